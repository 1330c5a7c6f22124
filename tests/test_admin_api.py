"""Kafka's admin API for CLIENT_METRICS subscriptions on ``kip714 serve`` and ``kip714 proxy --telemetry
terminate``: the decisions and error codes of Apache Kafka 4.1+ (in process), then kafka-python's
``KafkaAdminClient`` (a client nobody here wrote) end to end: create, alter, describe, list and delete; a real
librdkafka client gets the new subscription; ``kill -9`` and a restart keep it; through the proxy, a request
that mixes CLIENT_METRICS with the cluster's resources is split and answered as one (the upstream here is a
small broker written with kafka-python's own protocol classes, since librdkafka's mock cluster answers none of
these APIs)."""

from __future__ import annotations

import logging
import socket
import socketserver
import struct
import threading

import pytest

kafka = pytest.importorskip("kafka")

from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient  # noqa: E402
from server_thread import ServerThread  # noqa: E402
from service_helpers import KipProcess, wait_until  # noqa: E402

import kip714  # noqa: E402
from kip714 import ErrorCode  # noqa: E402
from kip714.broker.admin_state import AdminStateStore  # noqa: E402
from kip714.broker.config_admin import ClientMetricsAdmin  # noqa: E402
from kip714.broker.subscription_layers import SubscriptionLayers  # noqa: E402
from kip714.wire import (  # noqa: E402
    AlterableConfig,
    AlterConfigsRequest,
    AlterConfigsResource,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    IncrementalAlterableConfig,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
    ListConfigResourcesRequest,
)

CM = ConfigResourceType.CLIENT_METRICS
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _admin(store=None, **kw) -> ClientMetricsAdmin:
    return ClientMetricsAdmin(SubscriptionLayers(kip714.SubscriptionRegistry(), store), **kw)


def _alter(admin: ClientMetricsAdmin, *resources, validate_only=False, principal="User:ANONYMOUS"):
    req = IncrementalAlterConfigsRequest(
        [
            IncrementalAlterConfigsResource(t, n, [IncrementalAlterableConfig(*c) for c in cfgs])
            for t, n, cfgs in resources
        ],
        validate_only,
    )
    return [(r.error_code, r.error_message) for r in admin.incremental_alter_configs(req, principal).responses]


# ------------------------------------------------------------------------------------------ Kafka's decisions


@pytest.mark.unit
@pytest.mark.parametrize(
    "resources,expected",
    [
        # ClientMetricsConfigs.validate on the resulting config
        (
            [(16, "s", [("interval.ms", SET, "50")])],
            [(42, "Invalid value 50 for interval.ms, interval must be between 100 and 3600000 (1 hour)")],
        ),
        (
            [(16, "s", [("interval.ms", SET, "fast")])],
            [(40, "Invalid value fast for configuration interval.ms: Not a number of type INT")],
        ),
        ([(16, "s", [("foo", SET, "1")])], [(42, "Unknown client metrics configuration: foo")]),
        ([(16, "s", [("match", SET, "client_id=(")])], [(40, "Illegal client matching pattern: client_id=(")]),
        ([(16, "s", [("match", SET, "owner=x")])], [(40, "Illegal client matching pattern: owner=x")]),
        ([(16, "", [("metrics", SET, "*")])], [(42, "Subscription name can't be empty")]),
        # ConfigAdminManager.preprocess, in its order
        (
            [(16, "s", [("metrics", SET, "a")]), (16, "s", [("metrics", SET, "b")])],
            [(42, "Each resource must appear at most once.")] * 2,
        ),
        ([(16, "s", [("metrics", SET, "a"), ("metrics", DELETE, None)])], [(42, "Error due to duplicate config keys")]),
        (
            [(16, "s", [("metrics", SET, None), ("match", APPEND, None)])],
            [(42, "Null value not supported for : metrics, match")],
        ),
        ([(3, "s", [("metrics", SET, "a")])], [(42, "Unknown resource type 3")]),
        # Kafka's config schema has no LIST keys for CLIENT_METRICS: APPEND and SUBTRACT are refused
        ([(16, "s", [("metrics", APPEND, "a")])], [(40, "Can't APPEND to key metrics because its type is not LIST.")]),
        ([(16, "s", [("match", SUBTRACT, "a")])], [(40, "Can't SUBTRACT to key match because its type is not LIST.")]),
        # serve holds no topics, brokers or groups
        ([(2, "t", [("retention.ms", SET, "1")])], [(3, "This server does not host this topic-partition.")]),
        ([(4, "1", [("x", SET, "1")])], [(42, "kip714 serve only holds client-metrics configs, not BROKER configs")]),
    ],
)
def test_kafkas_error_codes_and_messages(resources, expected):
    admin = _admin(alter_open=True)
    assert _alter(admin, *resources) == expected
    assert len(admin.layers.registry) == 0 and admin.layers.registry.version == 0


@pytest.mark.unit
def test_alter_is_refused_without_admin_open_or_a_listed_principal(tmp_path):
    closed, listed = _admin(), _admin(principals=["User:alice"])
    cfg = (16, "s", [("metrics", SET, "*")])
    assert _alter(closed, cfg) == [(31, None)]  # as Kafka's controller: no message
    assert _alter(listed, cfg, principal="User:bob") == [(31, None)]
    assert _alter(listed, cfg, principal="User:alice") == [(0, None)] and len(listed.layers.registry) == 1
    # describing and listing stay open
    desc = closed.describe_configs(DescribeConfigsRequest([DescribeConfigsResource(16, "s")]))
    assert desc.results[0].error_code == 0
    assert listed.list_config_resources(ListConfigResourcesRequest([]), 1).config_resources[0].resource_name == "s"


@pytest.mark.unit
def test_describe_lists_all_three_keys_as_kafka_4_1_does():
    admin = _admin(alter_open=True)
    assert _alter(admin, (16, "s", [("metrics", SET, "a.,  b."), ("interval.ms", SET, " 1000")])) == [(0, None)]
    req = DescribeConfigsRequest(
        [
            DescribeConfigsResource(16, "s"),
            DescribeConfigsResource(16, "nobody"),
            DescribeConfigsResource(16, "s", ["metrics", "nope"]),
            DescribeConfigsResource(16, ""),
        ],
        include_synonyms=True,
        include_documentation=True,
    )
    s, nobody, only, empty = admin.describe_configs(req).results
    assert [(c.name, c.value, c.config_source, c.config_type, [x.source for x in c.synonyms]) for c in s.configs] == [
        ("interval.ms", "1000", 7, 3, [7]),
        ("match", "", 5, 7, []),
        ("metrics", "a.,b.", 7, 7, [7]),
    ]
    assert s.configs[0].documentation == "Metrics push interval in milliseconds"
    assert [(c.name, c.value, c.config_source) for c in nobody.configs] == [
        ("interval.ms", "300000", 5),
        ("match", "", 5),
        ("metrics", "", 5),
    ]  # a name nobody set: the defaults
    assert [c.name for c in only.configs] == ["metrics"]
    assert (empty.error_code, empty.error_message) == (42, "Client metrics subscription name must not be empty")


@pytest.mark.unit
def test_changes_bump_subscription_ids_only_when_something_changed():
    admin = _admin(alter_open=True)
    reg = admin.layers.registry
    _alter(admin, (16, "s", [("metrics", SET, "a.")]))
    version = reg.version
    assert _alter(admin, (16, "s", [("metrics", SET, "a.")])) == [(0, None)] and reg.version == version  # same value
    assert _alter(admin, (16, "s", [("metrics", SET, "b.")]), validate_only=True) == [(0, None)]
    assert reg.version == version and reg.get("s").config["metrics"] == "a."  # only checked
    # one request touching several keys of one resource: one change
    _alter(admin, (16, "s", [("metrics", SET, "b."), ("interval.ms", SET, "500")]))
    assert reg.version == version + 1
    # the legacy AlterConfigs replaces the whole config; an empty one deletes it
    legacy = admin.alter_configs(
        AlterConfigsRequest([AlterConfigsResource(16, "s", [AlterableConfig("match", "client_id=x")])]),
        "User:ANONYMOUS",
    )
    assert legacy.responses[0].error_code == 0 and dict(reg.get("s").config) == {"match": "client_id=x"}
    admin.alter_configs(AlterConfigsRequest([AlterConfigsResource(16, "s", [])]), "User:ANONYMOUS")
    assert reg.get("s") is None


@pytest.mark.unit
def test_clients_pushing_with_an_old_subscription_id_get_unknown_subscription_id_and_get_again():
    admin = _admin(alter_open=True)
    broker = kip714.TelemetryBroker(admin.layers.registry)
    _alter(admin, (16, "s", [("metrics", SET, "org.apache.kafka."), ("interval.ms", SET, "100")]))
    client = kip714.ClientInfo(client_id="c")
    got, _ = broker.handle(kip714.GetTelemetrySubscriptionsRequest(None), client, 1_000, "conn")
    _alter(admin, (16, "s", [("metrics", SET, "org.apache.kafka.producer.")]))
    push = kip714.PushTelemetryRequest(got.client_instance_id, got.subscription_id, False, 0, b"")
    answer, _ = broker.handle(push, client, 2_000, "conn")
    assert answer.error_code == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    again, _ = broker.handle(kip714.GetTelemetrySubscriptionsRequest(got.client_instance_id), client, 2_001, "conn")
    assert again.subscription_id != got.subscription_id
    assert list(again.requested_metrics) == ["org.apache.kafka.producer."]


@pytest.mark.unit
def test_list_config_resources_as_kafka_4_1():
    admin = _admin(alter_open=True)
    _alter(admin, (16, "a", [("metrics", SET, "*")]), (16, "b", [("metrics", SET, "x.")]))
    names = lambda resp: sorted(r.resource_name for r in resp.config_resources)  # noqa: E731
    assert names(admin.list_config_resources(ListConfigResourcesRequest(), 0)) == ["a", "b"]
    assert names(admin.list_config_resources(ListConfigResourcesRequest([]), 1)) == ["a", "b"]
    assert names(admin.list_config_resources(ListConfigResourcesRequest([2, 16]), 1)) == ["a", "b"]
    assert names(admin.list_config_resources(ListConfigResourcesRequest([2]), 1)) == []
    bad = admin.list_config_resources(ListConfigResourcesRequest([1]), 1)
    assert bad.error_code == ErrorCode.UNSUPPORTED_VERSION and bad.config_resources == []


@pytest.mark.unit
def test_admin_state_wins_over_files_and_flags_deletions_included(tmp_path, caplog):
    store = AdminStateStore(tmp_path / "state")
    admin = _admin(store, alter_open=True)
    layers = admin.layers
    layers.set_base("flags", {"base": {"metrics": "*"}})
    layers.set_base("config-file", {"filed": {"metrics": "a."}, "base": {"metrics": "weaker."}})
    assert dict(layers.registry.get("base").config) == {"metrics": "*"}  # flags beat the config file
    assert _alter(admin, (16, "filed", [("interval.ms", SET, "1000")])) == [(0, None)]
    assert _alter(admin, (16, "base", [("metrics", DELETE, None)])) == [(0, None)]  # every key deleted: gone
    assert layers.registry.get("base") is None and layers.source("filed") == "admin"
    assert store.load() == {"filed": {"metrics": "a.", "interval.ms": "1000"}, "base": None}  # a tombstone
    with caplog.at_level(logging.WARNING, "kip714.subscriptions"):
        layers.warn_overridden()
    assert "name=base used=admin-deletion hidden=config-file,flags" in caplog.text
    assert "name=filed used=admin hidden=config-file" in caplog.text
    store.close()
    # a restart: the files and flags again, the stored state on top
    again = _admin(AdminStateStore(tmp_path / "state"), alter_open=True)
    again.layers.set_base("flags", {"base": {"metrics": "*"}})
    again.layers.set_base("config-file", {"filed": {"metrics": "a."}})
    assert again.layers.registry.get("base") is None
    assert dict(again.layers.registry.get("filed").config) == {"metrics": "a.", "interval.ms": "1000"}
    # a second process on the same folder is refused
    with pytest.raises(kip714.errors.InvalidConfigError, match="another kip714 process uses it"):
        AdminStateStore(tmp_path / "state")


# ------------------------------------------------------------------------------------------ end to end: serve


def _serve(tmp_path, *extra: str) -> tuple[KipProcess, str]:
    proc = KipProcess(
        [
            "serve",
            "--port",
            "0",
            "--state-dir",
            str(tmp_path / "state"),
            "--admin-open",
            "--record",
            str(tmp_path / "rec"),
            "--metrics",
            "org.apache.kafka.consumer.",
            "--subscription-name",
            "base",
            "--summary-interval",
            "0",
            *extra,
        ]
    )
    port = proc.wait_for(r"event=listening host=\S+ port=(\d+)").group(1)
    proc.wait_for("event=ready")
    return proc, f"127.0.0.1:{port}"


@pytest.mark.integration
def test_kafka_admin_client_manages_serves_subscriptions_and_they_survive_kill_9(tmp_path):
    ck = pytest.importorskip("confluent_kafka")
    proc, bootstrap = _serve(tmp_path)
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kip714-admin-test")
        try:
            assert admin.list_config_resources(["client_metrics"]) == {"client_metrics": ["base"]}
            # create, then alter one key
            assert admin.alter_configs(
                [
                    ConfigResource(
                        CM,
                        "producers",
                        {
                            "metrics": "org.apache.kafka.producer.",
                            "interval.ms": "5000",
                            "match": "client_id=admin-e2e.*",
                        },
                    )
                ]
            ) == {"client_metrics": {"producers": "OK"}}
            assert admin.alter_configs(
                [ConfigResource(CM, "producers", {"interval.ms": (AlterConfigOp.SET, "1000")})]
            ) == {"client_metrics": {"producers": "OK"}}
            described = admin.describe_configs([ConfigResource(CM, "producers")], config_filter="all")
            got = {k: (v["value"], v["config_source"]) for k, v in described["client_metrics"]["producers"].items()}
            assert got == {
                "interval.ms": ("1000", "DYNAMIC_CLIENT_METRICS_CONFIG"),
                "match": ("client_id=admin-e2e.*", "DYNAMIC_CLIENT_METRICS_CONFIG"),
                "metrics": ("org.apache.kafka.producer.", "DYNAMIC_CLIENT_METRICS_CONFIG"),
            }
            assert sorted(admin.list_config_resources()["client_metrics"]) == ["base", "producers"]
            # Kafka's error codes for bad input
            bad = admin.alter_configs([ConfigResource(CM, "producers", {"interval.ms": "50"})])
            assert bad["client_metrics"]["producers"].startswith("[Error 42] InvalidRequestError: Invalid value 50")
            bad = admin.alter_configs([ConfigResource(CM, "producers", {"match": "client_id=("})])
            assert bad["client_metrics"]["producers"] == (
                "[Error 40] InvalidConfigurationError: Illegal client matching pattern: client_id=("
            )
            bad = admin.alter_configs([ConfigResource(CM, "producers", {"owner": "x"})], raise_on_unknown=False)
            assert "Unknown client metrics configuration: owner" in bad["client_metrics"]["producers"]
        finally:
            admin.close()
        # a real librdkafka client gets the new subscription: its pushes carry its interval and prefix
        producer = ck.Producer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": "admin-e2e-1",
                "enable.sparse.connections": False,
                "log_level": 0,
            }
        )

        def pushed() -> list[dict]:
            producer.poll(0.05)
            return [r for r in _rows(tmp_path / "rec") if r["client_id"] == "admin-e2e-1" and r["payload"]]

        try:
            rows = wait_until(pushed, 20, 0.05, "a push of the new subscription")
            assert rows[0]["push_interval_ms"] == 1000  # the new subscription's (base's is 300000)
            assert sorted(rows[0]["subscribed_metrics"]) == ["org.apache.kafka.consumer.", "org.apache.kafka.producer."]
        finally:
            producer.flush(1)
    finally:
        proc.kill()  # kill -9: the state folder is all that is left
    proc, bootstrap = _serve(tmp_path)
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kip714-admin-test")
        try:
            assert sorted(admin.list_config_resources()["client_metrics"]) == ["base", "producers"]
            described = admin.describe_configs([ConfigResource(CM, "producers")])["client_metrics"]["producers"]
            assert described["interval.ms"]["value"] == "1000"
            # delete: every modified key deleted (a name the flags define too is hidden by a tombstone)
            assert admin.reset_configs([ConfigResource(CM, "producers", {})]) == {"client_metrics": {"producers": "OK"}}
            assert admin.reset_configs([ConfigResource(CM, "base", {})]) == {"client_metrics": {"base": "OK"}}
            assert admin.list_config_resources(["client_metrics"]) == {}
        finally:
            admin.close()
    finally:
        proc.kill()
    proc, bootstrap = _serve(tmp_path)
    try:
        proc.wait_for(r"event=subscription_overridden name=base used=admin-deletion hidden=flags")
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kip714-admin-test")
        try:
            assert admin.list_config_resources(["client_metrics"]) == {}
        finally:
            admin.close()
    finally:
        proc.stop()


def _rows(directory) -> list[dict]:
    try:
        return kip714.read_recording(directory).to_pylist()
    except (FileNotFoundError, OSError, ValueError):
        return []


# ------------------------------------------------------------------------------------------ through the proxy


class _KafkaPythonBroker(socketserver.ThreadingTCPServer):
    """A broker of one node answering ApiVersions, Metadata, DescribeConfigs, IncrementalAlterConfigs and
    ListConfigResources with kafka-python's protocol classes (not kip714's codec): TOPIC and GROUP resources,
    and one CLIENT_METRICS name of its own (which the proxy must replace by kip714's)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.seen: list[tuple[int, int, list]] = []  # (api key, version, resources or types)
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server_address[1]}"


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        from kafka.protocol.admin import (
            DescribeConfigsRequest,
            DescribeConfigsResponse,
            IncrementalAlterConfigsRequest,
            IncrementalAlterConfigsResponse,
            ListConfigResourcesRequest,
            ListConfigResourcesResponse,
        )
        from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse

        sock, server = self.request, self.server
        host, port = server.server_address
        while True:
            head = _recv(sock, 4)
            if not head:
                return
            frame = _recv(sock, struct.unpack(">i", head)[0])
            key, version = struct.unpack(">hh", frame[:4])
            if key == 18:
                req = ApiVersionsRequest.decode(frame, version=version, header=True)
                keys = [(18, 0, 3), (3, 0, 12), (32, 1, 4), (44, 0, 1), (74, 0, 1)]
                resp = ApiVersionsResponse(
                    version=version,
                    error_code=0,
                    throttle_time_ms=0,
                    api_keys=[
                        ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in keys
                    ],
                )
            elif key == 3:
                req = MetadataRequest.decode(frame, version=version, header=True)
                resp = MetadataResponse(
                    version=version,
                    throttle_time_ms=0,
                    cluster_id="kp",
                    controller_id=1,
                    topics=[],
                    brokers=[MetadataResponse.MetadataResponseBroker(node_id=1, host=host, port=port, rack=None)],
                )
            elif key == 32:
                req = DescribeConfigsRequest.decode(frame, version=version, header=True)
                server.seen.append((key, version, [(r.resource_type, r.resource_name) for r in req.resources]))
                R = DescribeConfigsResponse.DescribeConfigsResult
                C = R.DescribeConfigsResourceResult
                resp = DescribeConfigsResponse(
                    version=version,
                    throttle_time_ms=7,
                    results=[
                        R(
                            error_code=0,
                            error_message=None,
                            resource_type=r.resource_type,
                            resource_name=r.resource_name,
                            configs=[
                                C(
                                    name="retention.ms",
                                    value="1000",
                                    read_only=False,
                                    config_source=1,
                                    is_sensitive=False,
                                    synonyms=[],
                                    config_type=5,
                                    documentation=None,
                                )
                            ],
                        )
                        for r in reversed(req.resources)
                    ],
                )  # any order: the proxy puts them in place
            elif key == 44:
                req = IncrementalAlterConfigsRequest.decode(frame, version=version, header=True)
                server.seen.append((key, version, [(r.resource_type, r.resource_name) for r in req.resources]))
                R = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
                resp = IncrementalAlterConfigsResponse(
                    version=version,
                    throttle_time_ms=0,
                    responses=[
                        R(
                            error_code=0,
                            error_message=None,
                            resource_type=r.resource_type,
                            resource_name=r.resource_name,
                        )
                        for r in req.resources
                    ],
                )
            elif key == 74:
                req = ListConfigResourcesRequest.decode(frame, version=version, header=True)
                server.seen.append((key, version, list(req.resource_types)))
                R = ListConfigResourcesResponse.ConfigResource
                rows = [(2, "t1"), (16, "the-clusters-own"), (32, "g1"), (4, "1")]
                resp = ListConfigResourcesResponse(
                    version=version,
                    throttle_time_ms=0,
                    error_code=0,
                    config_resources=[
                        R(resource_name=n, resource_type=t)
                        for t, n in rows
                        if not req.resource_types or t in req.resource_types
                    ],
                )
            else:
                return
            resp.with_header(correlation_id=req.header.correlation_id)
            sock.sendall(resp.encode(header=True, framed=True))


def _recv(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            return b""
        out += chunk
    return out


@pytest.fixture
def split_proxy():
    from proxy_helpers import start_proxy

    upstream = _KafkaPythonBroker()
    reg = kip714.SubscriptionRegistry()
    admin = ClientMetricsAdmin(SubscriptionLayers(reg), alter_open=True, role="kip714 proxy")
    pt = start_proxy(upstream.address, broker=kip714.TelemetryBroker(reg), admin=admin, telemetry="terminate")
    yield pt, upstream
    pt.stop()
    upstream.shutdown()
    upstream.server_close()


@pytest.mark.integration
def test_proxy_splits_mixed_requests_and_answers_in_kafkas_order(split_proxy):
    pt, upstream = split_proxy
    admin = KafkaAdminClient(bootstrap_servers=pt.bootstrap, client_id="kip714-split-test")
    try:
        assert admin.alter_configs(
            [
                ConfigResource(CM, "mine", {"metrics": "org.apache.kafka."}),
                ConfigResource(ConfigResourceType.TOPIC, "t1", {"retention.ms": "1000"}),
            ],
            raise_on_unknown=False,
        ) == {"client_metrics": {"mine": "OK"}, "topic": {"t1": "OK"}}
        described = admin.describe_configs(
            [
                ConfigResource(ConfigResourceType.TOPIC, "t1"),
                ConfigResource(CM, "mine"),
                ConfigResource(ConfigResourceType.TOPIC, "t2"),
            ],
            config_filter="all",
        )
        assert described["topic"]["t1"]["retention.ms"]["value"] == "1000"
        assert described["topic"]["t2"]["retention.ms"]["value"] == "1000"
        assert described["client_metrics"]["mine"]["metrics"]["value"] == "org.apache.kafka."
        listed = admin.list_config_resources()
        assert listed["client_metrics"] == ["mine"]  # the cluster's own row replaced by kip714's
        assert listed["topic"] == ["t1"] and listed["group"] == ["g1"] and listed["broker"] == ["1"]
        assert admin.list_config_resources(["client_metrics"]) == {"client_metrics": ["mine"]}
    finally:
        admin.close()
    # the cluster never saw a CLIENT_METRICS resource, and only what was not kip714's alone
    assert all(t != 16 for _, _, items in upstream.seen if _ in (32, 44) for t, _n in items)
    assert [(k, items) for k, _, items in upstream.seen if k == 32][-1] == (32, [(2, "t1"), (2, "t2")])
    assert [items for k, _, items in upstream.seen if k == 74] == [[]]  # "all" went as it is; [16] never went


@pytest.mark.integration
def test_proxy_in_front_of_a_cluster_without_the_admin_apis(tmp_path):
    """librdkafka's mock cluster answers none of the four APIs: the proxy adds them to ApiVersions and answers
    them alone (the other resources get UNSUPPORTED_VERSION); kill -9 is covered on serve."""
    from mock_cluster import MockCluster
    from proxy_helpers import start_proxy

    with MockCluster(2) as mc:
        reg = kip714.SubscriptionRegistry()
        store = AdminStateStore(tmp_path / "state")
        admin = ClientMetricsAdmin(SubscriptionLayers(reg, store), alter_open=True, role="kip714 proxy")
        pt = start_proxy(mc.bootstraps, broker=kip714.TelemetryBroker(reg), admin=admin, telemetry="terminate")
        try:
            client = KafkaAdminClient(bootstrap_servers=pt.bootstrap, client_id="kip714-mock-test")
            try:
                assert client.alter_configs([ConfigResource(CM, "p", {"metrics": "org.apache.kafka.producer."})]) == {
                    "client_metrics": {"p": "OK"}
                }
                out = client.describe_configs([ConfigResource(CM, "p"), ConfigResource(ConfigResourceType.TOPIC, "t")])
                assert out["client_metrics"]["p"]["metrics"]["value"] == "org.apache.kafka.producer."
                assert client.list_config_resources(["client_metrics"]) == {"client_metrics": ["p"]}
            finally:
                client.close()
            assert store.load() == {"p": {"metrics": "org.apache.kafka.producer."}}
        finally:
            pt.stop()
            store.close()


@pytest.mark.integration
def test_serve_in_process_refuses_alters_by_default_and_keeps_describing():
    st = ServerThread(kip714.TelemetryServer(port=0))
    try:
        admin = KafkaAdminClient(bootstrap_servers=st.bootstrap, client_id="kip714-closed-test")
        try:
            out = admin.alter_configs([ConfigResource(CM, "x", {"metrics": "*"})])
            assert out["client_metrics"]["x"].startswith("[Error 31] ClusterAuthorizationFailedError")
            assert admin.describe_configs([ConfigResource(CM, "x")]) == {"client_metrics": {"x": {}}}
        finally:
            admin.close()
    finally:
        st.stop()
