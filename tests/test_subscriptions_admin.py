"""kip714 subscriptions explain|lint --bootstrap-server: the subscriptions of a running kip714 serve, read through
Kafka's admin API, are the file it was started with (explain gives the SubscriptionIds its broker answers, lint
the file's findings); an endpoint without the admin API, or none at all, is one line and exit status 2."""

from __future__ import annotations

import contextlib
import io
import json
import socket
import threading
import uuid

import pytest
from server_thread import ServerThread

from kip714 import SubscriptionRegistry, TelemetryBroker, cli
from kip714.broker.subscriptions import kafka_uuid_string
from kip714.endpoint.server import TelemetryServer
from kip714.operations.admin_read import read_subscriptions
from kip714.operations.subscriptions import explain, lint, load_subscriptions, parse_client
from kip714.wire import GetTelemetrySubscriptionsRequest

CONFIG = """\
java-producers metrics=[org.apache.kafka.producer.,org.apache.kafka.consumer.fetch.manager.],interval.ms=10000,match=[client_software_name=apache-kafka-java,client_id=orders-.*]
standard metrics=[org.apache.kafka.producer.node.request.latency,org.apache.kafka.consumer.node.request.latency],interval.ms=60000
rdk metrics=[org.apache.kafka.producer.record.queue.time,org.apache.kafka.consumer.poll.idle],match=[client_software_name=confluent-kafka-.*]
quiet interval.ms=30000,match=[client_id=batch-.*]
"""
CLIENT = "client_id=orders-1,client_software_name=apache-kafka-java,client_software_version=3.9.0"


def _run(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = cli.main(argv)
    return status, out.getvalue()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    path = tmp_path_factory.mktemp("subs") / "subs.conf"
    path.write_text(CONFIG)
    registry = SubscriptionRegistry()
    for name, cfg in load_subscriptions(path).items():
        registry.set(name, cfg)
    broker = TelemetryBroker(registry)
    st = ServerThread(TelemetryServer(broker, "127.0.0.1", 0))
    try:
        yield st, broker, str(path)
    finally:
        st.stop()


def test_the_subscriptions_read_are_those_of_the_file(served):
    st, _, path = served
    got = read_subscriptions("127.0.0.1", st.port)
    assert sorted(got) == ["java-producers", "quiet", "rdk", "standard"]
    listed = st.call(lambda: [s.name for s in st.server.broker.registry.subscriptions()])
    assert list(got) == listed  # in the order the endpoint lists them
    # the keys set, as the file sets them (Kafka's defaults left out: rdk has no interval.ms, quiet no metrics)
    assert "interval.ms" not in got["rdk"] and "metrics" not in got["quiet"]
    from_file = load_subscriptions(path)
    clients = [parse_client(CLIENT), parse_client("client_id=x,client_software_name=confluent-kafka-python")]
    for client in clients:
        assert explain(got, client).as_dict() == explain(from_file, client).as_dict()
    assert _findings(lint(got)) == _findings(lint(from_file))


def _findings(found) -> list[tuple[str, str | None, str | None]]:
    """What lint found, apart from the order of the subscriptions named in a message (the endpoint lists them in
    Kafka's map order, a file in its own)."""
    return sorted((f["code"] if isinstance(f, dict) else f.code, *_where(f)) for f in found)


def _where(f) -> tuple[str | None, str | None]:
    d = f if isinstance(f, dict) else vars(f)
    return d["subscription"], d["client"]


def test_explain_through_the_admin_api_gives_the_brokers_subscription_id(served):
    st, broker, _ = served
    client = parse_client(CLIENT)
    response, _ = broker.handle(GetTelemetrySubscriptionsRequest(uuid.UUID(int=0)), client, 1_700_000_000_000)
    iid = kafka_uuid_string(response.client_instance_id)
    status, out = _run(["subscriptions", "explain", "--bootstrap-server", st.bootstrap,
                        "--client", f"{CLIENT},client_instance_id={iid}", "--json"])  # fmt: skip
    assert status == 0
    (shown,) = json.loads(out)
    assert shown["subscription_id"] == response.subscription_id
    assert shown["requested_metrics"] == list(response.requested_metrics)
    assert shown["push_interval_ms"] == response.push_interval_ms


def test_lint_through_the_admin_api_flags_what_the_file_has(served):
    st, _, path = served
    status, out = _run(["subscriptions", "lint", "--bootstrap-server", st.bootstrap, "--json"])
    assert status == 1
    assert {f["code"] for f in json.loads(out)} == {"empty-metrics", "several-subscriptions"}
    from_file = _run(["subscriptions", "lint", "--config", path, "--json"])
    assert from_file[0] == status and _findings(json.loads(from_file[1])) == _findings(json.loads(out))


def test_an_endpoint_without_the_admin_api_or_none_is_exit_2(capsys):
    with socket.socket() as listener:  # accepts, then closes every connection without answering
        listener.bind(("127.0.0.1", 0))
        listener.listen()

        def close_all() -> None:
            with contextlib.suppress(OSError):
                while True:
                    listener.accept()[0].close()

        threading.Thread(target=close_all, daemon=True).start()
        port = listener.getsockname()[1]
        assert cli.main(["subscriptions", "lint", "--bootstrap-server", f"127.0.0.1:{port}"]) == 2
        assert "closed the connection instead of answering LIST_CONFIG_RESOURCES v0" in capsys.readouterr().err
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert cli.main(["subscriptions", "lint", "--bootstrap-server", f"127.0.0.1:{port}"]) == 2
    assert capsys.readouterr().err.startswith("kip714 subscriptions: ")
    with pytest.raises(SystemExit):
        cli.main(["subscriptions", "lint", "--bootstrap-server", "nohost"])
