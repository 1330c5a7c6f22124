"""``kip714 serve`` and ``kip714 proxy`` as a service: one config file (precedence default < file < flag <
environment, ``--print-config``, unknown keys), ``/healthz`` and ``/readyz`` over HTTP (readiness false when the
proxy's cluster dies), SIGTERM under load with ``--record-sync`` (nothing acknowledged lost, no client reads half
an answer), SIGHUP (a new certificate for new TLS connections, the old ones going on; new subscriptions; a bad
file refused while the old configuration keeps running), systemd's notifications, and the systemd units
checked by ``systemd-analyze verify``."""

from __future__ import annotations

import asyncio
import os
import pathlib
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import threading

import pytest
from service_helpers import KipProcess, free_ports, http_get, wait_until

import kip714
from kip714.cli import build_parser, main
from kip714.cli._settings import resolve
from kip714.wire import GetTelemetrySubscriptionsRequest, PushTelemetryRequest, decode_response, encode_request

ROOT = pathlib.Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------------------ the config file


def _settings(tmp_path, toml: str | None, argv: list[str], env: dict[str, str]):
    words = ["serve"]
    if toml is not None:
        path = tmp_path / "serve.toml"
        path.write_text(toml)
        words += ["--config-file", str(path)]
    words += argv
    args = build_parser(["serve"]).parse_args(words)
    args._argv = words
    return args, resolve(args, environ=env)


PRECEDENCE = [
    # (file, flags, environment) -> (value, where it came from)
    (None, [], {}, 9092, "default"),
    ("port = 1000", [], {}, 1000, "file"),
    ("port = 1000", ["--port", "2000"], {}, 2000, "flag --port"),
    ("port = 1000", ["--port", "2000"], {"KIP714_PORT": "3000"}, 3000, "env KIP714_PORT"),
    (None, [], {"KIP714_PORT": "3000"}, 3000, "env KIP714_PORT"),
    (None, ["--port", "2000"], {}, 2000, "flag --port"),
    ("port = 1000", [], {"KIP714_PORT": "3000"}, 3000, "env KIP714_PORT"),
]


@pytest.mark.unit
@pytest.mark.parametrize("toml,argv,env,value,origin", PRECEDENCE)
def test_config_precedence_default_file_flag_environment(tmp_path, toml, argv, env, value, origin):
    args, settings = _settings(tmp_path, toml, argv, env)
    assert args.port == value
    assert settings.origins["port"].startswith(origin)


@pytest.mark.unit
def test_every_kind_of_option_from_the_file_and_the_environment(tmp_path):
    toml = (
        'idle-timeout = "5m"\nrecord-sync = true\nprometheus = "127.0.0.1:9999"\n'
        'otlp-header = ["Authorization=Bearer secret", "X=1"]\nmax-frame-bytes = "2MB"\n'
        '[subscriptions.producers]\nmetrics = ["org.apache.kafka.producer.", "x."]\n"interval.ms" = 1000\n'
    )
    args, settings = _settings(
        tmp_path, toml, ["--idle-timeout", "1m"], {"KIP714_RECORD_SYNC": "false", "KIP714_LOG_LEVEL": "debug"}
    )
    assert (args.idle_timeout, args.record_sync, args.prometheus, args.max_frame_bytes, args.log_level) == (
        60.0,
        False,
        ("127.0.0.1", 9999),
        2 << 20,
        "debug",
    )
    assert args.otlp_header == [("Authorization", "Bearer secret"), ("X", "1")]
    assert args.file_subscriptions == {"producers": {"metrics": "org.apache.kafka.producer.,x.", "interval.ms": "1000"}}
    text = settings.render()
    assert "idle-timeout = 60.0  # flag --idle-timeout" in text
    assert "record-sync = false  # env KIP714_RECORD_SYNC" in text
    assert 'otlp-header = ["Authorization=***", "X=***"]' in text and "secret" not in text
    assert "[subscriptions.producers]" in text
    # what --print-config prints reads back as the same settings
    (tmp_path / "printed.toml").write_text(text)
    again, _ = _settings(tmp_path, text, [], {})
    assert (again.idle_timeout, again.prometheus, again.max_frame_bytes) == (60.0, ("127.0.0.1", 9999), 2 << 20)


@pytest.mark.unit
@pytest.mark.parametrize(
    "toml,message",
    [
        (
            "max_connections = 5",
            "unknown key 'max_connections': kip714 serve has no option --max_connections "
            "(did you mean 'max-connections'?)",
        ),
        ("upstream = 'x:1'", "unknown key 'upstream'"),
        ("port = 'high'", "port: "),
        ("record-sync = 'yes please'", "record-sync: expected true or false"),
        ("loop = 'fast'", "loop: 'fast' is not one of auto, asyncio, uvloop"),
        ("port = [", "not valid TOML"),
        ("[subscriptions]\nx = 1", "subscriptions.x must be a table"),
    ],
)
def test_a_bad_config_file_is_an_error_naming_the_key(tmp_path, capsys, toml, message):
    path = tmp_path / "bad.toml"
    path.write_text(toml)
    assert main(["serve", "--config-file", str(path), "--print-config"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kip714 serve: ") and message in err, err


@pytest.mark.integration
def test_a_required_flag_may_come_from_the_file_and_subscriptions_are_validated(tmp_path, capsys):
    path = tmp_path / "proxy.toml"
    path.write_text('upstream = "127.0.0.1:1"\n')
    assert main(["proxy", "--config-file", str(path), "--print-config"]) == 0
    assert 'upstream = "127.0.0.1:1"  # file' in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["proxy", "--print-config"])
    assert "--upstream (or upstream in --config-file, or KIP714_UPSTREAM)" in capsys.readouterr().err
    path.write_text('port = 0\n[subscriptions.s]\nmetrics = "a."\nowner = "me"\n')
    assert main(["serve", "--config-file", str(path), "--duration", "0"]) == 2
    assert "config-file: subscription 's': Unknown client metrics configuration: owner" in capsys.readouterr().err


@pytest.mark.integration
def test_the_example_config_files_are_valid(capsys):
    for command in ("serve", "proxy"):
        assert (
            main([command, "--config-file", str(ROOT / "deploy" / "systemd" / f"{command}.toml"), "--print-config"])
            == 0
        )
    assert "# file" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------ systemd


@pytest.mark.integration
@pytest.mark.parametrize("unit", ["kip714-serve.service", "kip714-proxy.service"])
def test_systemd_units_verify_clean(tmp_path, unit):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (make test installs Debian's systemd package)")
    bin_dir = pathlib.Path(sys.executable).parent
    if not (bin_dir / "kip714").exists():
        pytest.skip("no kip714 entry point beside this python")
    text = (ROOT / "deploy" / "systemd" / unit).read_text()
    assert "/opt/kip714/bin/kip714" in text and "Type=notify" in text and "ExecReload=/bin/kill -HUP $MAINPID" in text
    (tmp_path / unit).write_text(text.replace("/opt/kip714/bin/", f"{bin_dir}/"))
    out = subprocess.run(
        [analyze, "verify", "--man=no", f"./{unit}"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and out.stderr == "", out.stderr


class Notifications:
    """A ``$NOTIFY_SOCKET`` of our own: what a service tells systemd."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(20)
        self.got: list[str] = []

    def next_with(self, word: str) -> str:
        while True:
            msg = self.sock.recv(4096).decode()
            self.got.append(msg)
            if word in msg:
                return msg


# ------------------------------------------------------------------------------------------ health


@pytest.mark.integration
def test_health_endpoints_and_readiness_that_follows_the_cluster(tmp_path):
    from mock_cluster import MockCluster

    from kip714.endpoint import health

    mc = MockCluster(1)
    try:
        admin_port, port = free_ports(2)
        proxy = KipProcess(
            [
                "proxy",
                "--upstream",
                mc.bootstraps,
                "--port",
                str(port),
                "--broker-port-base",
                "0",
                "--admin",
                f"127.0.0.1:{admin_port}",
                "--prometheus",
                "127.0.0.1:0",
                "--upstream-check-interval",
                "0.2",
                "--summary-interval",
                "0",
            ]
        )
        with proxy:
            metrics_url = proxy.wait_for(r"event=prometheus url=(\S+)").group(1)
            proxy.wait_for("event=ready")
            base = f"http://127.0.0.1:{admin_port}"
            assert http_get(base + "/healthz") == (200, "ok\n")
            assert http_get(base + "/readyz") == (200, "ok\n")
            status, body = http_get(base + "/readyz?verbose")
            assert status == 200 and "[+]upstream ok" in body and "[+]listeners ok" in body
            # the same on the Prometheus port, next to /metrics
            on_metrics = metrics_url.rsplit("/", 1)[0]
            assert http_get(on_metrics + "/readyz")[0] == 200
            up = f'kip714_upstream_up{{replica="{socket.gethostname()}"}}'  # --replica-id: the host name
            assert f"{up} 1.0" in http_get(metrics_url)[1]
            assert http_get(base + "/metrics")[0] == 404
            assert health._main([base + "/readyz"]) == 0  # the units' ExecStartPost probe
            mc.close()  # the cluster dies
            wait_until(lambda: http_get(base + "/readyz")[0] == 503, 10, 0.05, "/readyz fails without the cluster")
            status, body = http_get(base + "/readyz")
            assert "[-]upstream failed" in body
            assert health._main([base + "/readyz"]) == 1
            assert health._main([base + "/healthz"]) == 0  # alive all the same: no restart storm
            assert f"{up} 0.0" in http_get(metrics_url)[1]
            assert proxy.stop() == 0
    finally:
        mc.close()


# ------------------------------------------------------------------------------------------ SIGTERM under load


class _Load:
    """Raw KIP-714 clients pipelining Gets and pushes: every push answered 0 is kept; a connection that ends
    in the middle of an answer is counted (``partial``), one that ends between answers is not."""

    def __init__(self, port: int, clients: int = 6, depth: int = 4) -> None:
        self.port, self.clients, self.depth = port, clients, depth
        self.accepted: list[bytes] = []
        self.partial = 0
        self.ended = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self.thread.start()

    async def _run(self) -> None:
        await asyncio.gather(*(self._client(n) for n in range(self.clients)))

    async def _read(self, reader: asyncio.StreamReader, key: int):
        try:
            head = await reader.readexactly(4)
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                self.partial += 1
            raise
        try:
            return decode_response(await reader.readexactly(struct.unpack(">i", head)[0]), key, 0).body
        except asyncio.IncompleteReadError:
            self.partial += 1
            raise

    async def _client(self, n: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        corr = seq = 0
        try:
            while not self.stop.is_set():
                writer.write(
                    b"".join(
                        encode_request(GetTelemetrySubscriptionsRequest(), corr + i, "load", 0)
                        for i in range(self.depth)
                    )
                )
                corr += self.depth
                subs = [await self._read(reader, 71) for _ in range(self.depth)]
                sent = []
                for sub in subs:
                    payload = b"%d-%d|" % (n, seq) + b"x" * 200
                    seq += 1
                    writer.write(
                        encode_request(
                            PushTelemetryRequest(sub.client_instance_id, sub.subscription_id, metrics=payload),
                            corr,
                            "load",
                            0,
                        )
                    )
                    corr += 1
                    sent.append(payload)
                for payload in sent:
                    if (await self._read(reader, 72)).error_code == 0:
                        self.accepted.append(payload)
        except (asyncio.IncompleteReadError, ConnectionError):
            self.ended += 1
        finally:
            writer.close()


@pytest.mark.integration
def test_sigterm_under_load_drains_and_loses_nothing_acknowledged(tmp_path):
    serve = KipProcess(
        [
            "serve",
            "--port",
            "0",
            "--metrics",
            "*",
            "--record",
            str(tmp_path / "rec"),
            "--record-sync",
            "--drain-timeout",
            "10s",
            "--summary-interval",
            "0",
        ]
    )
    with serve:
        port = int(serve.wait_for(r"event=listening host=\S+ port=(\d+)").group(1))
        serve.wait_for("event=ready")
        load = _Load(port)
        wait_until(lambda: len(load.accepted) >= 300, 30, 0.02, "300 pushes accepted")
        serve.signal(signal.SIGTERM)  # mid-load: the clients keep sending
        assert serve.proc.wait(30) == 0
        load.thread.join(30)
        assert not load.thread.is_alive()
    assert load.ended == load.clients and load.partial == 0
    assert "event=drained aborted=0" in serve.log
    recorded = set(kip714.read_recording(tmp_path / "rec").column("payload").to_pylist())
    assert set(load.accepted) <= recorded, f"{len(set(load.accepted) - recorded)} acknowledged pushes lost"


# ------------------------------------------------------------------------------------------ SIGHUP


def _tls_get(sock: ssl.SSLSocket, corr: int) -> list[str]:
    sock.sendall(encode_request(GetTelemetrySubscriptionsRequest(), corr, "reload", 0))
    head = b""
    while len(head) < 4:
        head += sock.recv(4 - len(head))
    size = struct.unpack(">i", head)[0]
    body = b""
    while len(body) < size:
        body += sock.recv(size - len(body))
    resp = decode_response(body, 71, 0)
    assert resp.correlation_id == corr and resp.body.error_code == 0
    return list(resp.body.requested_metrics)


def _connect_tls(port: int) -> tuple[ssl.SSLSocket, bytes]:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10))
    return sock, sock.getpeercert(binary_form=True)


def _der(pem: str) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pathlib.Path(pem).read_text())


@pytest.mark.integration
@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="SIGHUP")
def test_sighup_reloads_certificates_and_subscriptions_without_dropping_connections(tmp_path):
    from tls_cert import make_cert

    cert_a, key_a = make_cert(tmp_path, "a")
    cert_b, key_b = make_cert(tmp_path, "b")
    config = tmp_path / "serve.toml"

    def write(cert: str, key: str, metrics: str, extra: str = "") -> None:
        config.write_text(
            f'port = 0\ntls-cert = "{cert}"\ntls-key = "{key}"\nsummary-interval = 0\n{extra}'
            f'[subscriptions.s]\nmetrics = "{metrics}"\n'
        )

    write(cert_a, key_a, "a.")
    notify = Notifications(tmp_path / "notify")
    serve = KipProcess(["serve", "--config-file", str(config)], env={"NOTIFY_SOCKET": str(notify.path)})
    with serve:
        port = int(serve.wait_for(r"event=listening host=\S+ port=(\d+)").group(1))
        assert "READY=1" in notify.next_with("READY=1")
        old, der = _connect_tls(port)
        with old:
            assert der == _der(cert_a) and _tls_get(old, 1) == ["a."]
            # a new certificate and a new subscription
            write(cert_b, key_b, "b.")
            mark = len(serve.lines)
            serve.signal(signal.SIGHUP)
            assert "MONOTONIC_USEC=" in notify.next_with("RELOADING=1")
            notify.next_with("READY=1")
            serve.wait_for("event=reloaded", start=mark)
            new, der = _connect_tls(port)
            with new:
                assert der == _der(cert_b) and _tls_get(new, 1) == ["b."]
            assert _tls_get(old, 2) == ["b."]  # the old connection goes on, with the new subscription
            # a bad file is refused whole: the running configuration stays
            write(cert_a, key_a, "c.", extra="bogus = 1\n")
            mark = len(serve.lines)
            serve.signal(signal.SIGHUP)
            line = serve.wait_for("event=reload_refused", start=mark).string
            assert "unknown key 'bogus'" in line
            # a certificate that does not match its key is refused too, before the live one is touched
            write(cert_a, key_b, "c.")
            mark = len(serve.lines)
            serve.signal(signal.SIGHUP)
            assert "cannot load a certificate chain" in serve.wait_for("event=reload_refused", start=mark).string
            third, der = _connect_tls(port)
            with third:
                assert der == _der(cert_b) and _tls_get(third, 1) == ["b."]
            assert _tls_get(old, 3) == ["b."]
        assert serve.stop() == 0
        notify.next_with("STOPPING=1")
    assert os.path.exists(notify.path)
