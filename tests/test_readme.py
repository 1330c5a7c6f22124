"""Every example of README.md and of the documentation site (docs/**/*.md) runs as written.

Each fenced block of those files is one test, found by reading the Markdown (new sections are picked up
without touching this file):

- ```` ```python ```` blocks run in this process (so Spark blocks share the test session), each in a fresh
  namespace;
- ```` ```sh ````/``bash``/``shell``/``console`` blocks, and unlabelled blocks whose first command is a known
  program (``kip714``, ``make``, ``python``, ``spark-submit``, ``.venv/bin/...``, ``source``…), run as one
  bash script with ``set -e``;
- other blocks (diagrams, YAML, queries, ```` ```text ```` usage synopses with ``[optional]`` parts) are not
  examples and are left alone.

Each block runs in a fresh workspace that looks like the repository root — every top-level entry of the
checkout linked in — plus the inputs the README talks about: ``recording/`` (a ``kip714 serve --record``
recording, made by the simulator). A block fails when it exits non-zero, raises, or prints a traceback.

What the test changes, and only this, so that examples run unattended and quickly:

- ``kip714 serve`` lines without ``--duration`` get one (``3s``; ``60s`` when sent to the background with
  ``&``, which the block itself stops), and ``--port 0`` when they name no port (the default, 9092, may be
  taken); port ``9092`` becomes a free port throughout the block and ``0.0.0.0:PORT`` becomes
  ``127.0.0.1:FREE-PORT`` (test servers bind the loopback only);
- ``make TARGET`` runs as ``make -n TARGET`` (the target exists and its recipe expands: running ``make test``
  inside the test suite would recurse; ``make demo``'s run is ``tests/test_spark.py``'s demo test);
- ``.venv/bin/`` is the environment running the tests (``source .venv/bin/activate`` activates it, or does
  nothing outside a virtual environment, where that Python is already on ``PATH``).

Markers, an HTML comment on the line before a block (the reason is required):

- ``<!-- readme-test: skip REASON -->``: not run here — only for blocks that need a system the test cannot start
  (a cluster, a remote collector), or that another test runs against one (the reason names it);
- ``<!-- readme-test: args-only REASON -->``: for commands whose full run takes minutes: ``kip714`` lines are
  parsed by kip714's own argument parser, ``make`` lines run as ``make -n``, other lines must name a program
  on ``PATH`` and files that exist.
"""

from __future__ import annotations

import contextlib
import io
import os
import pathlib
import re
import runpy
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: docs/reference/ holds notes about other projects' code (Kafka, librdkafka, kafka-python), not kip714 examples.
DOCS = [
    ROOT / "README.md",
    *sorted(p for p in (ROOT / "docs").rglob("*.md") if "reference" not in p.relative_to(ROOT / "docs").parts),
]
SHELLS = {"sh", "bash", "shell", "console"}
PROGRAMS = {
    "kip714",
    "make",
    "python",
    "python3",
    "spark-submit",
    "source",
    ".",
    "pip",
    "export",
    "cd",
    "KIP714_ONLY",
    "kill",
    "wait",
}
MARKER = re.compile(r"<!--\s*readme-test:\s*(skip|args-only)\b\s*(.*?)\s*-->")
FENCE = re.compile(r"^```([A-Za-z0-9_+-]*)\s*$")
#: Outputs of the examples: never linked in from the checkout (a developer's own demo-output/ etc.).
OUTPUTS = {"recording", "out", "demo-output", ".git", "build"}
BLOCK_TIMEOUT_S = 240


@dataclass
class Block:
    path: pathlib.Path
    line: int
    lang: str
    text: str
    marker: str | None
    reason: str

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def kind(self) -> str | None:
        if self.lang == "python":
            return "python"
        if self.lang in SHELLS:
            return "shell"
        if self.lang == "":
            first = next((ln for ln in _command_lines(self.text)), "")
            word = first.split()[0] if first.split() else ""
            word = word.split("=")[0] if "=" in word else word
            if word in PROGRAMS or word.startswith(".venv/bin/"):
                return "shell"
        return None


def _command_lines(text: str) -> list[str]:
    """The block's commands: comments and blank lines dropped, backslash continuations joined."""
    lines, current = [], ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        lines.append((current + line).strip())
        current = ""
    if current:
        lines.append(current.strip())
    return lines


def blocks() -> list[Block]:
    found = []
    for path in DOCS:
        lines = path.read_text().splitlines()
        i = 0
        while i < len(lines):
            m = FENCE.match(lines[i])
            if not m:
                i += 1
                continue
            start, lang = i, m.group(1).lower()
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            marker, reason = None, ""
            k = start - 1
            while k >= 0 and not lines[k].strip():
                k -= 1
            if k >= 0 and (mm := MARKER.search(lines[k])):
                marker, reason = mm.group(1), mm.group(2)
            found.append(Block(path, start + 1, lang, "\n".join(lines[start + 1 : j]) + "\n", marker, reason))
            i = j + 1
    return [b for b in found if b.kind]


BLOCKS = blocks()


@pytest.mark.unit
def test_the_readme_has_examples_of_both_kinds():
    kinds = {b.kind for b in BLOCKS if b.path.name == "README.md" and b.marker is None}
    assert kinds == {"python", "shell"}
    # the first two commands of the README are make demo and make test
    first = _command_lines(next(b for b in BLOCKS if b.path.name == "README.md").text)
    assert [ln.split("#")[0].strip() for ln in first[:2]] == ["make demo", "make test"]


@pytest.mark.unit
def test_markers_carry_a_reason_and_are_rare():
    for b in BLOCKS:
        if b.marker:
            assert b.reason, f"{b.id}: a readme-test marker needs a reason"
    skipped = [b for b in BLOCKS if b.marker == "skip"]
    assert len(skipped) <= max(2, len(BLOCKS) // 5), f"skip markers are for external systems only: {skipped}"


# ------------------------------------------------------------------------------------------ workspace


@pytest.fixture(scope="session")
def recording(tmp_path_factory) -> pathlib.Path:
    """A small serve recording (the simulator writes the same schema)."""
    from kip714 import SubscriptionRegistry, TelemetryBroker
    from kip714.tools.simulate import Fleet

    rec = tmp_path_factory.mktemp("readme-inputs") / "recording"
    registry = SubscriptionRegistry()
    registry.set("all", {"metrics": "*", "interval.ms": "30000"})
    stats = Fleet(3, 3, seed=17, codec="mixed").run_in_process(TelemetryBroker(registry), "5m", recorder=str(rec))
    assert stats.recorded_rows > 0
    return rec


@pytest.fixture
def workspace(tmp_path, recording) -> pathlib.Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in OUTPUTS:
            (ws / entry.name).symlink_to(entry)
    shutil.copytree(recording, ws / "recording")
    return ws


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _in_venv() -> bool:
    return sys.prefix != sys.base_prefix


def _bin() -> str:
    return str(pathlib.Path(sys.executable).parent)


def _addresses(line: str, port: str) -> str:
    """Port 9092 → the block's free port; 0.0.0.0:PORT (listen everywhere) → 127.0.0.1 and a free port."""
    line = re.sub(r"(?<!\d)9092(?!\d)", port, line)
    return re.sub(r"0\.0\.0\.0:\d+", lambda m: f"127.0.0.1:{_free_port()}", line)


def _rewrite(text: str) -> str:
    """The test's changes to a shell block (see the module docstring)."""
    port = str(_free_port())
    text = text.replace("\\\n", " ")  # continuation lines joined: one line per command
    out = []
    for line in text.splitlines():
        code = line.split(" #")[0] if not line.lstrip().startswith("#") else ""
        line = _addresses(line, port)
        line = line.replace(".venv/bin/", _bin() + "/")
        if re.match(r"\s*(source|\.)\s+\S*bin/activate\b", line):
            line = f"source {_bin()}/activate" if _in_venv() else "true"
        m = re.match(r"(\s*)make\s+(.*)$", code)
        if m:
            line = f"{m.group(1)}make -n {m.group(2)}"
        if re.search(r"(^|\s)kip714 serve\b", code) and "--duration" not in code:
            background = code.rstrip().endswith("&")
            cmd = code.rstrip()[:-1].rstrip() if background else code.rstrip()
            if "--port" not in cmd:
                cmd += " --port 0"  # serve's default, 9092, may be taken on a shared machine
            line = _addresses(cmd + (" --duration 60s &" if background else " --duration 3s"), port)
        out.append(line)
    return "\n".join(out) + "\n"


def _env(first: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([*([first] if first else []), _bin(), env.get("PATH", "")])
    env.pop("KIP714_TRACEBACK", None)
    return env


def _needs_spark(block: Block) -> bool:
    return bool(re.search(r"spark|kip714 (pipeline|report)|kip714 demo(?! --captures)", block.text))


#: the subcommands a shell example runs on the suite's Spark session (see SessionCommands)
SESSION_COMMANDS = ("pipeline", "report")


def _uses_session(block: Block) -> bool:
    """Whether the block runs on the suite's Spark session: Python blocks that need Spark, and shell blocks
    with a ``kip714 pipeline``/``kip714 report`` line (SessionCommands)."""
    if block.marker is not None or not _needs_spark(block):
        return False
    if block.kind == "python":
        return True
    return any(
        re.search(rf"(^|[\s;&|(]|\$\()kip714 ({'|'.join(SESSION_COMMANDS)})\b", line)
        and not re.search(r"\s(--follow|--help|-h)\b", line)
        for line in _command_lines(block.text)
    )


def _marks(block: Block) -> list:
    """The block's tier: ``spark`` when it needs Spark (and, on the session, the worker that holds it),
    else ``integration`` (servers, clients and subprocesses of the examples)."""
    if block.marker is None and _needs_spark(block):
        return [pytest.mark.spark] + ([pytest.mark.spark_session] if _uses_session(block) else [])
    return [pytest.mark.integration]


# ------------------------------------------------------------------------------------------ running

_SHIM = """#!{python}
# kip714 for the shell examples: pipeline/report run in the test process, on its Spark session
import json, os, socket, sys
argv = sys.argv[1:]
if argv[:1] and argv[0] in {commands!r} and not {{"--follow", "--help", "-h"}} & set(argv):
    with socket.socket(socket.AF_UNIX) as s:
        s.connect({sock!r})
        s.sendall(json.dumps({{"argv": argv, "cwd": os.getcwd()}}).encode())
        s.shutdown(socket.SHUT_WR)
        answer = json.loads(b"".join(iter(lambda: s.recv(1 << 16), b"")))
    sys.stdout.write(answer["stdout"])
    sys.stderr.write(answer["stderr"])
    sys.exit(answer["status"])
os.execv(sys.executable, [sys.executable, "-m", "kip714", *argv])
"""


class SessionCommands:
    """``kip714 pipeline`` and ``kip714 report`` lines of the shell examples, run by kip714's command line in
    this process on the suite's Spark session (a JVM of their own costs each example seconds of start-up).
    A ``kip714`` first on the block's ``PATH`` sends its arguments and working directory
    here over a Unix socket and prints what the command printed, with its exit status; every other
    subcommand, ``--follow`` (which runs until stopped) and ``--help`` run the real program. What differs from a
    shell: the JVM (already started, with the suite's settings) and the environment (this process's)."""

    def __init__(self, spark, directory: pathlib.Path) -> None:
        import threading

        self.spark = spark
        self.bin = directory / "bin"
        self.bin.mkdir()
        sock = str(directory / "kip714.sock")
        shim = self.bin / "kip714"
        shim.write_text(_SHIM.format(python=sys.executable, commands=set(SESSION_COMMANDS), sock=sock))
        shim.chmod(0o755)
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(sock)
        self.listener.listen()
        self.calls = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        import json

        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # closed
            with conn:
                request = json.loads(b"".join(iter(lambda: conn.recv(1 << 16), b"")))
                conn.sendall(json.dumps(self.run(request["argv"], pathlib.Path(request["cwd"]))).encode())

    def run(self, argv: list[str], cwd: pathlib.Path) -> dict:
        """``kip714 ARGV`` in ``cwd``, as the command line runs it: its output and exit status."""
        import traceback

        from kip714 import cli

        self.calls += 1
        out, err = io.StringIO(), io.StringIO()
        old = os.getcwd()
        os.chdir(cwd)  # the test's thread is waiting for the block's shell
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _spark_cwd(self.spark, cwd):
                try:
                    status = cli.main(argv)
                except SystemExit as exc:  # argparse's usage errors
                    status = exc.code if isinstance(exc.code, int) else (exc.code is not None)
                except BaseException:  # what the real program would die of: a traceback, status 1
                    traceback.print_exc()
                    status = 1
        finally:
            os.chdir(old)
            self.spark.sparkContext.setLogLevel("ERROR")  # pipeline turns Spark's log off
        return {"stdout": out.getvalue(), "stderr": err.getvalue(), "status": int(status or 0)}

    def close(self) -> None:
        self.listener.close()


@pytest.fixture(scope="session")
def session_commands(spark, tmp_path_factory):
    commands = SessionCommands(spark, tmp_path_factory.mktemp("session-commands"))
    yield commands
    commands.close()


@contextlib.contextmanager
def _spark_cwd(spark, ws: pathlib.Path):
    """Spark resolves relative paths against its JVM's working directory, fixed when the suite's session
    started; a user's Python and JVM share one. Point the local file system's working directory at the
    workspace while the block runs."""
    if spark is None:
        yield
        return
    jvm = spark.sparkContext._jvm
    fs = jvm.org.apache.hadoop.fs.FileSystem.getLocal(spark.sparkContext._jsc.hadoopConfiguration())
    before = fs.getWorkingDirectory()
    fs.setWorkingDirectory(jvm.org.apache.hadoop.fs.Path(ws.as_uri()))
    try:
        yield
    finally:
        fs.setWorkingDirectory(before)


def _run_python(block: Block, ws: pathlib.Path, spark) -> None:
    script = ws / "readme_example.py"
    script.write_text(block.text)
    old = os.getcwd()
    os.chdir(ws)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), _spark_cwd(spark, ws):
            runpy.run_path(str(script), run_name="__main__")
    finally:
        os.chdir(old)


def _left_running(pgid: int, grace_s: float = 2.0) -> str:
    """The command lines of the processes of group ``pgid`` still running ``grace_s`` after the block ended
    (Linux /proc), or ''."""
    deadline = time.monotonic() + grace_s
    while True:
        left = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[2]) == pgid and fields[0] != "Z":
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        left.append(f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:120])
            except (OSError, IndexError, ValueError):
                continue
        if not left or time.monotonic() > deadline:
            return "; ".join(left)
        time.sleep(0.1)


def _run_shell(block: Block, ws: pathlib.Path, commands: SessionCommands | None = None) -> None:
    script = "set -e\n" + _rewrite(block.text)
    # output to files, not pipes: a background helper the block leaves behind (a user's shell would just
    # return to the prompt) must not hold the test; the whole process group is ended afterwards
    out_path, err_path = ws / ".readme-stdout", ws / ".readme-stderr"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen(
            ["bash", "-c", script],
            cwd=ws,
            env=_env(commands and str(commands.bin)),
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        left = ""
        try:
            returncode = proc.wait(timeout=BLOCK_TIMEOUT_S)
            left = _left_running(proc.pid)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    stdout, stderr = out_path.read_text(), err_path.read_text()
    shown = f"\n--- script\n{script}\n--- stdout\n{stdout[-3000:]}\n--- stderr\n{stderr[-3000:]}"
    assert returncode == 0, f"{block.id} exited {returncode}{shown}"
    # an example that starts helpers stops them: a user copying it must not be left with stray processes
    assert not left, f"{block.id} left processes running: {left}{shown}"
    assert "Traceback (most recent call last)" not in stderr, f"{block.id} printed a traceback{shown}"


def _check_args_only(block: Block, ws: pathlib.Path) -> None:
    from kip714.cli import build_parser

    for line in _command_lines(_rewrite(block.text)):
        words = shlex.split(line, comments=True)
        while words and re.match(r"[A-Z_][A-Z0-9_]*=", words[0]):
            words = words[1:]  # VAR=value prefixes
        if not words:
            continue
        program = pathlib.Path(words[0]).name
        if program == "kip714":
            try:
                build_parser().parse_args(words[1:])
            except SystemExit as exc:
                raise AssertionError(f"{block.id}: kip714 refuses {line!r}") from exc
        elif program == "make":
            proc = subprocess.run(words, cwd=ws, env=_env(), capture_output=True, text=True, timeout=60)
            assert proc.returncode == 0, f"{block.id}: {line!r}: {proc.stderr}"
        else:
            assert shutil.which(words[0], path=_env()["PATH"]) or (ws / words[0]).exists(), (
                f"{block.id}: {words[0]} is not a program here"
            )
            for w in words[1:]:
                if not w.startswith("-") and "/" in w and "=" not in w and "::" not in w:
                    assert (ws / w).exists(), f"{block.id}: {line!r} names {w}, which does not exist"


@pytest.mark.parametrize("block", [pytest.param(b, marks=_marks(b)) for b in BLOCKS], ids=[b.id for b in BLOCKS])
def test_example_runs_as_written(block: Block, workspace: pathlib.Path, request):
    if block.marker == "skip":
        pytest.skip(f"{block.id}: {block.reason}")
    if block.kind == "shell" and sys.platform == "win32":
        pytest.skip("shell examples are POSIX shell")
    spark = commands = None
    if _needs_spark(block) and block.marker != "args-only":
        if os.environ.get("KIP714_SKIP_SPARK") == "1":
            pytest.skip("KIP714_SKIP_SPARK=1")
        if _uses_session(block):
            spark = request.getfixturevalue("spark")  # the suite's one session: local_session() returns it
        if block.kind == "shell" and spark is not None:
            commands = request.getfixturevalue("session_commands")
    if block.marker == "args-only":
        _check_args_only(block, workspace)
    elif block.kind == "python":
        _run_python(block, workspace, spark)
    else:
        calls = commands.calls if commands else 0
        _run_shell(block, workspace, commands)
        assert commands is None or commands.calls > calls, f"{block.id}: no kip714 {SESSION_COMMANDS} ran"
