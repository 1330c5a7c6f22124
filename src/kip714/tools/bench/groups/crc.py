"""The ``crc`` group: the SubscriptionId (CRC32C of the metric list and interval, xor the instance id's
hash) against the same computed in Python with the crc32c package, and :func:`kip714.crc32c` against the
crc32c and google-crc32c packages by size."""

from __future__ import annotations

import functools
import random
import uuid
from collections.abc import Callable

import kip714

from ..harness import Bench
from ..payloads import KB
from ..peers import PeerMissing, peer_label, peer_module
from ..render import fmt_ns, size_name
from ..timing import interleaved

__all__ = ["run"]


# SubscriptionId inputs: a typical two-entry list and the KIP's 13 standard metrics as the broker would
# order them (spec vector 8), with the vectors' client instance id.
_P = "org.apache.kafka."
SUBSCRIPTION_LISTS = {
    "2 metric prefixes": [_P + "client.producer.partition.latency", _P + "client.producer.partition.queue."],
    "13 metrics": [
        _P + m
        for m in [
            "producer.record.queue.time.avg",
            "producer.node.request.latency.max",
            "consumer.node.request.latency.max",
            "producer.produce.throttle.time.avg",
            "consumer.poll.idle.ratio.avg",
            "producer.connection.creation.total",
            "producer.connection.creation.rate",
            "producer.produce.throttle.time.max",
            "producer.record.queue.time.max",
            "consumer.node.request.latency.avg",
            "producer.node.request.latency.avg",
            "consumer.connection.creation.total",
            "consumer.connection.creation.rate",
        ]
    ],
}
SUBSCRIPTION_CLIENT = uuid.UUID(int=(0x5E0B1D6A3C4F7A21 << 64) | 0x9D3E2B7C8A1F4E60)


def python_subscription_id(crc32c_fn: Callable[[bytes], int]) -> Callable[..., int]:
    """The SubscriptionId peer, the straightforward Python way: join + encode + ``crc32c_fn`` (the crc32c
    package's) + Uuid.hashCode + xor. Returned as a closure so that the measured call is that function
    alone, with no wrapper around it."""

    def subscription_id(metrics, interval, client_instance_id) -> int:
        crc = crc32c_fn(("[" + ", ".join(metrics) + "]" + str(interval)).encode("utf-8"))
        n = client_instance_id.int
        x = (n >> 64) ^ (n & 0xFFFFFFFFFFFFFFFF)
        v = (crc ^ (x >> 32) ^ x) & 0xFFFFFFFF
        return v - (1 << 32) if v & 0x80000000 else v

    return subscription_id


def run(bench: Bench) -> None:
    """Add the SubscriptionId and CRC32C rows and the CRC32C curve to ``bench``."""
    G = "crc"
    client = SUBSCRIPTION_CLIENT

    def python_peer(metrics):
        peer = python_subscription_id(peer_module("crc32c").crc32c)
        assert peer(metrics, 30000, client) == kip714.compute_subscription_id(metrics, 30000, client)
        return "Python + " + peer_label("crc32c"), peer, (metrics, 30000, client)

    for name, metrics in SUBSCRIPTION_LISTS.items():
        bench.pair(
            G,
            f"subscription-id-{len(metrics)}",
            f"SubscriptionId, {name}",
            (kip714.compute_subscription_id, (metrics, 30000, client)),
            functools.partial(python_peer, metrics),
            goal={"kind": "ratio", "value": 3, "text": "≥ 3×"},
            peer_dist="crc32c",
        )

    sizes = [64, KB, 100 * KB, 1 << 20] if bench.quick else [64, KB, 4 * KB, 100 * KB, 1 << 20]
    peers = []
    for dist, mod, attr in (("crc32c", "crc32c", "crc32c"), ("google-crc32c", "google_crc32c", "value")):
        try:
            peers.append((peer_label(dist), getattr(peer_module(mod), attr)))
        except PeerMissing as exc:
            bench.skip(G, dist, str(exc))
    series: dict[str, list[float]] = {"kip714.crc32c": []}
    for label, _ in peers:
        series[label] = []
    for size in sizes:
        data = random.Random(size).randbytes(size)
        for _, f in peers:
            assert f(data) == kip714.crc32c(data)
        st = interleaved(
            [(kip714.crc32c, (data,))] + [(f, (data,)) for _, f in peers], bench.rounds, budget_s=bench.budget / 2
        )
        series["kip714.crc32c"].append(st[0]["median"])
        for (label, _), s in zip(peers, st[1:]):
            series[label].append(s["median"])
        if size in (64, 1 << 20):
            for (label, _), s in zip(peers, st[1:]):
                bench.add_row(G, f"crc32c-{size}-{label.split()[0]}", f"crc32c, {size_name(size)}", st[0], s, label)
        else:
            bench.log(
                f"[{G}] curve crc32c {size_name(size)}: kip714 {fmt_ns(st[0]['median'])}, "
                + ", ".join(f"{lb} {fmt_ns(s['median'])}" for (lb, _), s in zip(peers, st[1:]))
            )
    bench.curve("crc", "CRC32C", "bytes", "time per call (ns)", sizes, series)
