"""The kip714 image (``make image``, deploy/image/) run with podman the way Kubernetes runs it
(deploy/kubernetes/): as its non-root user, a read-only root filesystem, no capabilities, the ConfigMap's
config file mounted, the replica's name and the cluster in ``KIP714_*`` variables. The proxy in front of
librdkafka's mock cluster (on the host) with a librdkafka producer and consumer through it (every record back
once, ``/readyz`` 200, the replica's name on its metrics), then ``podman stop`` (SIGTERM: the drain, timed);
``kip714 conformance --listen`` from the image judging a librdkafka client started here; no command at all
(the help, exit status 0); nothing of the build's pip configuration left in the image.

The ``image`` tier: ``make test-image`` builds the image, then runs this module alone (``make test`` does not:
conftest.py leaves the tier out unless ``-m image`` names it). Set ``KIP714_IMAGE`` for another image and
``CONTAINERS_CONF`` for other podman settings (default deploy/image/containers.conf)."""

from __future__ import annotations

import os
import pathlib
import queue
import subprocess
import sys
import threading
import time
import uuid

import pytest
import yaml
from mock_cluster import MockCluster
from service_helpers import free_port_run, free_ports, http_get, scrape, wait_until

import kip714
from kip714 import conformance

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ck = pytest.importorskip("confluent_kafka")

ROOT = pathlib.Path(__file__).resolve().parents[1]
IMAGE = os.environ.get("KIP714_IMAGE", f"localhost/kip714:{kip714.__version__}")
#: podman's environment: its settings for a machine without systemd (make test-image sets the same)
PODMAN_ENV = {"CONTAINERS_CONF": str(ROOT / "deploy" / "image" / "containers.conf"), **os.environ}
#: the pod's settings (deploy/kubernetes/deployment.yaml) in podman's words
AS_IN_THE_POD = [
    "--read-only",
    "--cap-drop=ALL",
    "--security-opt=no-new-privileges",
    "--tmpfs=/tmp:rw,mode=1777",
]
#: the image's user, which owns the pod's writable folder (the emptyDir, through fsGroup)
USER = 10001


def writable(tmp_path: pathlib.Path) -> list[str]:
    """The pod's emptyDir at /var/lib/kip714: a host folder the image's user owns (podman's tmpfs mounts
    here ignore their mode option)."""
    folder = tmp_path / "var-lib-kip714"
    folder.mkdir()
    os.chown(folder, USER, USER)
    tmp_path.chmod(0o755)
    return [f"--volume={folder}:/var/lib/kip714"]


def podman(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, env=PODMAN_ENV)


@pytest.fixture(scope="module", autouse=True)
def image() -> str:
    if podman("image", "exists", IMAGE).returncode != 0:
        pytest.fail(f"no image {IMAGE}: make image builds it (make test-image does both)", pytrace=False)
    return IMAGE


def test_no_command_prints_the_help_and_exits_0():
    done = podman("run", "--rm", *AS_IN_THE_POD, IMAGE)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: kip714"), done.stdout[:300]
    assert "proxy" in done.stdout and "conformance" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


#: a digest of a kip714 package's Python sources (path and content), run here and in the image
_SOURCES_DIGEST = """
import hashlib, os
def digest(top):
    h = hashlib.sha256()
    for d, dirs, files in sorted(os.walk(top)):
        dirs.sort()
        for f in sorted(files):
            if f.endswith(".py"):
                h.update(os.path.relpath(os.path.join(d, f), top).encode())
                with open(os.path.join(d, f), "rb") as fh:
                    h.update(fh.read())
    return h.hexdigest()
"""


def test_the_image_runs_as_its_user_with_the_checkouts_kip714_and_no_build_configuration():
    script = (
        "import os, sys, kip714, confluent_kafka, prometheus_client, uvloop; "
        f"exec({_SOURCES_DIGEST!r}); "
        "print(os.getuid(), os.getgid(), kip714.__version__, kip714.__file__, digest(os.path.dirname(kip714.__file__))); "
        "found = [os.path.join(d, f) for top in ('/etc', '/run', '/opt', '/root', '/var/lib/kip714') "
        "for d, _, fs in os.walk(top) for f in fs if f in ('pip.conf', 'pip.ini', 'constraints.txt')]; "
        "print(found)"
    )
    done = podman("run", "--rm", *AS_IN_THE_POD, "--entrypoint", "python3", IMAGE, "-c", script)
    assert done.returncode == 0, done.stderr
    ids, found = done.stdout.splitlines()
    uid, gid, version, where, sources = ids.split()
    assert (uid, gid, version) == (str(USER), str(USER), kip714.__version__)
    assert where.startswith("/opt/kip714/"), where
    # the wheel of this checkout, not an older build's: the same Python sources
    namespace: dict = {}
    exec(_SOURCES_DIGEST, namespace)
    assert sources == namespace["digest"](str(ROOT / "src" / "kip714")), "the image holds another kip714: make image"
    # the host's pip configuration and CA bundle were in the build context, mounted for the build only
    assert found == "[]", found


def _configmap_toml(tmp_path: pathlib.Path) -> pathlib.Path:
    """The ConfigMap's proxy.toml, as the pod mounts it, less the SASL mechanism (the mock cluster has no
    SASL; the Secret's credentials are left out with it)."""
    docs = yaml.safe_load((ROOT / "deploy" / "kubernetes" / "configmap.yaml").read_text())
    lines = [line for line in docs["data"]["proxy.toml"].splitlines() if not line.startswith("upstream-sasl-")]
    path = tmp_path / "proxy.toml"
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o644)
    return path


def _consume_all(bootstrap: str, topic: str, expected: int, timeout: float = 40.0) -> list[bytes]:
    c = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "g-" + uuid.uuid4().hex[:8],
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < expected and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got.append(m.value())
        end = time.monotonic() + 1.0  # a little longer: no duplicate may arrive
        while time.monotonic() < end:
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        c.close()
    return got


def test_the_proxy_in_the_image_relays_librdkafka_and_drains_on_podman_stop(tmp_path, capsys):
    config = _configmap_toml(tmp_path)
    port = free_port_run(4)  # the bootstrap, then brokers 1-3 on port + node id
    (metrics,) = free_ports(1)
    name = f"kip714-test-{uuid.uuid4().hex[:8]}"
    with MockCluster(brokers=3) as cluster:
        # the mock cluster names no controller, so it cannot create the state topic: made here, as an operator
        # does whose cluster refuses kip714 the CREATE ACL
        cluster.create_topic(tomllib.loads(config.read_text())["state-topic"], 1)
        env = {
            "KIP714_REPLICA_ID": name,  # the pod's name, through the downward API
            "KIP714_UPSTREAM": cluster.bootstraps,
            "KIP714_HOST": "127.0.0.1",
            "KIP714_PORT": str(port),
            "KIP714_BROKER_PORT_BASE": str(port),
            "KIP714_ADVERTISED_HOST": "127.0.0.1",
            "KIP714_PROMETHEUS": f"127.0.0.1:{metrics}",
        }
        started = podman(
            "run",
            "--detach",
            "--name",
            name,
            *AS_IN_THE_POD,
            *writable(tmp_path),
            "--volume",
            f"{config}:/etc/kip714/proxy.toml:ro",
            *(f"--env={k}={v}" for k, v in env.items()),
            IMAGE,
            "proxy",
            "--config-file",
            "/etc/kip714/proxy.toml",
        )
        assert started.returncode == 0, started.stderr
        try:
            ready = f"http://127.0.0.1:{metrics}/readyz"
            try:
                wait_until(lambda: _status(ready) == 200, timeout=60, step=0.2, what="/readyz 200")
            except AssertionError:
                raise AssertionError(podman("logs", name).stderr[-3000:]) from None
            samples = scrape(f"http://127.0.0.1:{metrics}/metrics")
            assert any(("replica", name) in labels for _, labels in samples), "no replica label"

            bootstrap = f"127.0.0.1:{port}"
            topic = "t-" + uuid.uuid4().hex[:10]
            cluster.create_topic(topic, 3)
            sent = [f"record-{i}".encode() for i in range(300)]
            producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
            for value in sent:
                producer.produce(topic, value)
            assert producer.flush(30) == 0
            got = _consume_all(bootstrap, topic, len(sent))
            assert sorted(got) == sorted(sent)  # every record back, once

            # SIGTERM with a client still connected (the producer's idle connections)
            t = time.monotonic()
            stopped = podman("stop", "--time", "30", name, timeout=60)
            took = time.monotonic() - t
            assert stopped.returncode == 0, stopped.stderr
            state = podman("inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip()
            log = podman("logs", name).stderr
            assert state == "0", log[-3000:]
            assert "event=draining" in log and "event=drained aborted=0" in log, log[-3000:]
            with capsys.disabled():
                print(f"\npodman stop: the proxy drained and exited 0 in {took:.2f} s (drain-timeout 20 s)")
            assert took < 20, f"the drain took {took:.1f} s"
            del producer
        finally:
            podman("rm", "--force", "--time", "0", name)


def _status(url: str) -> int:
    try:
        return http_get(url, timeout=2)[0]
    except OSError:
        return 0


def test_conformance_listen_in_the_image_judges_a_librdkafka_client(tmp_path):
    port = free_port_run(2)
    name = f"kip714-lab-{uuid.uuid4().hex[:8]}"
    lab = subprocess.Popen(
        ["podman", "run", "--rm", "--name", name, *AS_IN_THE_POD, IMAGE, "conformance", "--listen"]
        + [f"127.0.0.1:{port}", "--scenario", "terminating_push", "--startup", "1.5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=PODMAN_ENV,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert lab.stdout is not None
        for line in lab.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    clients = pathlib.Path(conformance.__file__).with_name("clients.py")
    said: list[str] = []
    started: list[subprocess.Popen[bytes]] = []
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            if line is None:
                break
            said.append(line)
            if "start the client now" in line:
                seconds = line.split("let it run ")[1].split(" s,")[0]
                started.append(
                    subprocess.Popen(
                        [sys.executable, str(clients), "confluent-consumer", f"127.0.0.1:{port}", seconds],
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
        assert lab.wait(30) == 0, "".join(said)
    finally:
        if lab.poll() is None:
            podman("rm", "--force", "--time", "0", name)
            lab.wait(30)
        for proc in started:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    assert [line.split(":")[0] for line in said if "start the client now" in line] == ["scenario terminating_push"]
    assert any(line.startswith("terminating_push: pass") for line in said), "".join(said)
