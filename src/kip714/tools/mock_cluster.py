"""librdkafka's mock Kafka cluster in a helper process: an upstream nobody here wrote, for the proxy tests
and the ``proxy`` group of ``kip714 bench`` (needs confluent-kafka, whose wheel carries librdkafka).

``MockCluster(brokers=3, metrics=[...], push_interval_ms=..., disable_apis=[...])`` starts
``python -m kip714.tools.mock_cluster`` which creates the cluster through librdkafka's C API (``ctypes`` on the
librdkafka inside the confluent-kafka wheel: ``rd_kafka_mock_cluster_new``, ``…_bootstraps``,
``rd_kafka_mock_telemetry_set_requested_metrics``, ``…_set_push_interval``, ``rd_kafka_mock_set_apiversion``,
``rd_kafka_mock_group_initial_rebalance_delay_ms``),
prints its bootstrap servers and then obeys one command per line on stdin, answering ``ok`` or ``error ...``:

- ``topic NAME PARTITIONS``, ``host_port ID HOST PORT``, ``quit``;
- faults (``rdkafka_mock.h``): ``down ID`` / ``up ID`` (the broker's listener stops accepting and its
  connections close / it listens again; its partitions keep their leader), ``rtt ID MS`` (every response of
  the broker delayed by MS), ``leader TOPIC PARTITION ID`` (the partition's leader moves: produce to the old
  one gets NOT_LEADER_OR_FOLLOWER), ``errors APIKEY ERR...`` (the next requests of that API key, on any
  broker, get these error codes one by one; -195, ``_TRANSPORT``, closes the connection), ``broker_errors ID
  APIKEY ERR:RTT...`` (the same on one broker, each answer delayed by RTT ms), ``decommission ID`` (the broker
  is gone for good: connections and listener closed, partitions moved to the others).

The cluster lives as long as the process; closing stdin ends it.

A new consumer group's first assignment waits ``group_initial_rebalance_delay_ms``: the mock's default is
Kafka's broker default, 3000 ms, which every consumer group of a test or benchmark run would wait out.
``MockCluster`` sets 0, as Kafka's own test and development configurations do; pass 3000 for the default.
"""

from __future__ import annotations

import ctypes
import glob
import os
import subprocess
import sys
import time


def _librdkafka() -> ctypes.CDLL:
    import importlib.util

    # where the wheel keeps its librdkafka, found without importing confluent_kafka (a tenth of a CPU-second
    # in every helper process, which uses only the C library)
    spec = importlib.util.find_spec("confluent_kafka")
    if spec is None or spec.origin is None:
        raise RuntimeError("the mock cluster needs confluent-kafka (its wheel carries librdkafka)")
    libs = os.path.join(os.path.dirname(os.path.dirname(spec.origin)), "confluent_kafka.libs")
    found = sorted(glob.glob(os.path.join(libs, "librdkafka*.so*")))
    if not found:
        raise RuntimeError(f"no librdkafka in {libs}")
    lib = ctypes.CDLL(found[0])
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    lib.rd_kafka_conf_set.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_size_t,
    ]
    lib.rd_kafka_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
    lib.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_telemetry_set_requested_metrics.argtypes = [
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_char_p),
        ctypes.c_size_t,
    ]
    lib.rd_kafka_mock_telemetry_set_push_interval.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    lib.rd_kafka_mock_set_apiversion.argtypes = [ctypes.c_void_p, ctypes.c_int16, ctypes.c_int16, ctypes.c_int16]
    lib.rd_kafka_mock_topic_create.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    lib.rd_kafka_mock_broker_set_host_port.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_char_p, ctypes.c_int]
    lib.rd_kafka_mock_broker_set_down.argtypes = [ctypes.c_void_p, ctypes.c_int32]
    lib.rd_kafka_mock_broker_set_up.argtypes = [ctypes.c_void_p, ctypes.c_int32]
    lib.rd_kafka_mock_broker_set_rtt.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_int]
    lib.rd_kafka_mock_partition_set_leader.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32, ctypes.c_int32]
    lib.rd_kafka_mock_push_request_errors_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_int16,
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_int),
    ]
    lib.rd_kafka_mock_push_request_errors_array.restype = None
    # variadic: the fixed part only; each (error, rtt) pair is passed as two C ints (x86-64 SysV, aarch64 Linux)
    lib.rd_kafka_mock_broker_push_request_error_rtts.argtypes = [
        ctypes.c_void_p,
        ctypes.c_int32,
        ctypes.c_int16,
        ctypes.c_size_t,
    ]
    lib.rd_kafka_mock_broker_decommission.argtypes = [ctypes.c_void_p, ctypes.c_int32]
    lib.rd_kafka_mock_group_initial_rebalance_delay_ms.argtypes = [ctypes.c_void_p, ctypes.c_int32]
    lib.rd_kafka_mock_group_initial_rebalance_delay_ms.restype = None
    return lib


def _check(err: int, cmd: list[str]) -> None:
    """An ``rd_kafka_resp_err_t`` a mock call returned: 0 is fine, anything else fails the command."""
    if err:
        raise RuntimeError(f"{cmd[0]}: librdkafka error {err}")


def _main(argv: list[str]) -> int:
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--brokers", type=int, default=3)
    p.add_argument("--metrics", default=None, help="comma-separated requested metrics ('' for none)")
    p.add_argument("--push-interval-ms", type=int, default=0)
    p.add_argument("--disable-api", default="", help="comma-separated API keys the mock must not advertise")
    p.add_argument(
        "--group-initial-rebalance-delay-ms",
        type=int,
        default=None,
        help="wait before a new group's first assignment (the mock's default: 3000)",
    )
    args = p.parse_args(argv)
    lib = _librdkafka()
    conf = lib.rd_kafka_conf_new()
    err = ctypes.create_string_buffer(512)
    # the handle only hosts the mock cluster (no bootstrap.servers: it never connects anywhere)
    lib.rd_kafka_conf_set(conf, b"log_level", b"2", err, 512)
    rk = lib.rd_kafka_new(0, conf, err, 512)
    if not rk:
        print(f"error rd_kafka_new: {err.value.decode()}", flush=True)
        return 1
    mc = lib.rd_kafka_mock_cluster_new(rk, args.brokers)
    if args.metrics is not None:
        names = [m.encode() for m in args.metrics.split(",") if m]
        arr = (ctypes.c_char_p * max(1, len(names)))(*names)
        lib.rd_kafka_mock_telemetry_set_requested_metrics(mc, arr, len(names))
    if args.push_interval_ms:
        lib.rd_kafka_mock_telemetry_set_push_interval(mc, args.push_interval_ms)
    if args.group_initial_rebalance_delay_ms is not None:
        lib.rd_kafka_mock_group_initial_rebalance_delay_ms(mc, args.group_initial_rebalance_delay_ms)
    for key in filter(None, args.disable_api.split(",")):
        lib.rd_kafka_mock_set_apiversion(mc, int(key), -1, -1)
    print("bootstraps", lib.rd_kafka_mock_cluster_bootstraps(mc).decode(), flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        try:
            if cmd[0] == "quit":
                break
            if cmd[0] == "topic":
                rc = lib.rd_kafka_mock_topic_create(mc, cmd[1].encode(), int(cmd[2]), 1)
                if rc:
                    raise RuntimeError(f"topic_create: {rc}")
            elif cmd[0] == "host_port":
                lib.rd_kafka_mock_broker_set_host_port(mc, int(cmd[1]), cmd[2].encode(), int(cmd[3]))
            elif cmd[0] == "down":
                _check(lib.rd_kafka_mock_broker_set_down(mc, int(cmd[1])), cmd)
            elif cmd[0] == "up":
                _check(lib.rd_kafka_mock_broker_set_up(mc, int(cmd[1])), cmd)
            elif cmd[0] == "rtt":
                _check(lib.rd_kafka_mock_broker_set_rtt(mc, int(cmd[1]), int(cmd[2])), cmd)
            elif cmd[0] == "leader":
                _check(lib.rd_kafka_mock_partition_set_leader(mc, cmd[1].encode(), int(cmd[2]), int(cmd[3])), cmd)
            elif cmd[0] == "errors":
                errors = [int(e) for e in cmd[2:]]
                lib.rd_kafka_mock_push_request_errors_array(
                    mc, int(cmd[1]), len(errors), (ctypes.c_int * len(errors))(*errors)
                )
            elif cmd[0] == "broker_errors":
                pairs = [tuple(int(x) for x in p.split(":")) for p in cmd[3:]]
                flat = [ctypes.c_int(v) for pair in pairs for v in pair]
                _check(
                    lib.rd_kafka_mock_broker_push_request_error_rtts(mc, int(cmd[1]), int(cmd[2]), len(pairs), *flat),
                    cmd,
                )
            elif cmd[0] == "decommission":
                _check(lib.rd_kafka_mock_broker_decommission(mc, int(cmd[1])), cmd)
            else:
                raise RuntimeError(f"unknown command {cmd[0]!r}")
            print("ok", flush=True)
        except Exception as exc:  # report, keep the cluster up
            print(f"error {exc}", flush=True)
    os._exit(0)  # the mock threads need no orderly teardown


class MockCluster:
    """A librdkafka mock cluster in a child process (see the module docstring)."""

    def __init__(
        self,
        brokers: int = 3,
        metrics: list[str] | None = None,
        push_interval_ms: int = 0,
        disable_apis: tuple[int, ...] = (),
        timeout: float = 20.0,
        group_initial_rebalance_delay_ms: int = 0,
    ) -> None:
        cmd = [
            sys.executable,
            "-m",
            "kip714.tools.mock_cluster",
            "--brokers",
            str(brokers),
            "--group-initial-rebalance-delay-ms",
            str(group_initial_rebalance_delay_ms),
        ]
        if metrics is not None:
            cmd += ["--metrics", ",".join(metrics)]
        if push_interval_ms:
            cmd += ["--push-interval-ms", str(push_interval_ms)]
        if disable_apis:
            cmd += ["--disable-api", ",".join(map(str, disable_apis))]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        assert self.proc.stdin is not None and self.proc.stdout is not None  # both are pipes
        self._stdin, self._stdout = self.proc.stdin, self.proc.stdout
        self.timeout = timeout
        line = self._line()
        if not line.startswith("bootstraps "):
            self.close()
            raise RuntimeError(f"mock cluster did not start: {line!r}")
        self.bootstraps = line.split(" ", 1)[1]
        self.addresses = [(h, int(p)) for h, p in (a.rsplit(":", 1) for a in self.bootstraps.split(","))]

    def _line(self) -> str:
        import selectors

        sel = selectors.DefaultSelector()
        sel.register(self._stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + self.timeout
        try:
            while time.monotonic() < deadline:
                if sel.select(0.2):
                    return self._stdout.readline().strip()
                if self.proc.poll() is not None:
                    return f"exited {self.proc.returncode}"
            return "timeout"
        finally:
            sel.close()

    def command(self, *words) -> None:
        self._stdin.write(" ".join(map(str, words)) + "\n")
        self._stdin.flush()
        answer = self._line()
        if answer != "ok":
            raise RuntimeError(f"mock cluster: {words} -> {answer}")

    def create_topic(self, name: str, partitions: int) -> None:
        self.command("topic", name, partitions)

    def broker_down(self, broker_id: int) -> None:
        """The broker stops accepting connections and closes its own (``rd_kafka_mock_broker_set_down``)."""
        self.command("down", broker_id)

    def broker_up(self, broker_id: int) -> None:
        self.command("up", broker_id)

    def set_rtt(self, broker_id: int, rtt_ms: int) -> None:
        """Delay every response of the broker by ``rtt_ms`` (0: none)."""
        self.command("rtt", broker_id, rtt_ms)

    def move_leader(self, topic: str, partition: int, broker_id: int) -> None:
        self.command("leader", topic, partition, broker_id)

    def push_errors(self, api_key: int, *errors: int) -> None:
        """The next ``len(errors)`` requests of ``api_key`` get these error codes (-195: a disconnect)."""
        self.command("errors", api_key, *errors)

    def push_broker_errors(self, broker_id: int, api_key: int, *errors_rtts: tuple[int, int]) -> None:
        """The broker's next requests of ``api_key`` get these (error code, delay in ms) answers."""
        self.command("broker_errors", broker_id, api_key, *(f"{e}:{rtt}" for e, rtt in errors_rtts))

    def decommission(self, broker_id: int) -> None:
        """The broker is gone for good (its partitions move to the others)."""
        self.command("decommission", broker_id)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self._stdin.write("quit\n")
                self._stdin.flush()
            except (BrokenPipeError, ValueError):
                pass
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def __enter__(self) -> MockCluster:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
