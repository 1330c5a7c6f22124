"""CRC32C and SubscriptionId speed against the two CRC32C packages.

Run: ``python -m pytest bench/test_bench_crc.py --benchmark-only --benchmark-columns=min,mean,median``
"""

from __future__ import annotations

import random
import uuid

import pytest

from kip714._crc import _crc32c_sw, compute_subscription_id, crc32c

crc32c_pkg = pytest.importorskip("crc32c")
google_crc32c = pytest.importorskip("google_crc32c")

SIZES = {"64B": 64, "1KB": 1024, "100KB": 100 * 1024, "1MB": 1 << 20}
IMPLS = {
    "kip714": crc32c,
    "kip714-software": _crc32c_sw,
    "crc32c-pkg": crc32c_pkg.crc32c,
    "google-crc32c": google_crc32c.value,
}


@pytest.mark.parametrize("impl", list(IMPLS))
@pytest.mark.parametrize("size", list(SIZES))
def test_crc32c(benchmark, size, impl):
    benchmark.group = f"crc32c-{size}"
    data = random.Random(SIZES[size]).randbytes(SIZES[size])
    fn = IMPLS[impl]
    expected = crc32c_pkg.crc32c(data)
    assert benchmark(fn, data) == expected


# The KIP's 13 standard metrics as the broker would order them (vector 8), and a typical two-entry list.
P = "org.apache.kafka."
LISTS = {
    "2-metrics": [P + "client.producer.partition.latency", P + "client.producer.partition.queue."],
    "13-metrics": [
        P + m
        for m in (
            "producer.record.queue.time.avg producer.node.request.latency.max "
            "consumer.node.request.latency.max producer.produce.throttle.time.avg consumer.poll.idle.ratio.avg "
            "producer.connection.creation.total producer.connection.creation.rate "
            "producer.produce.throttle.time.max producer.record.queue.time.max "
            "consumer.node.request.latency.avg producer.node.request.latency.avg "
            "consumer.connection.creation.total consumer.connection.creation.rate"
        ).split()
    ],
}
CLIENT = uuid.UUID(int=(0x5E0B1D6A3C4F7A21 << 64) | 0x9D3E2B7C8A1F4E60)


def _i32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


def python_subscription_id(metrics, interval, client_instance_id):
    """The straightforward Python version: join, encode, crc32c package, Uuid.hashCode, xor."""
    crc = crc32c_pkg.crc32c(("[" + ", ".join(metrics) + "]" + str(interval)).encode("utf-8"))
    n = client_instance_id.int
    x = (n >> 64) ^ (n & 0xFFFFFFFFFFFFFFFF)
    return _i32(crc ^ (x >> 32) ^ x)


@pytest.mark.parametrize("impl", ["kip714", "python+crc32c-pkg"])
@pytest.mark.parametrize("which", list(LISTS))
def test_subscription_id(benchmark, which, impl):
    benchmark.group = f"subscription-id-{which}"
    fn = compute_subscription_id if impl == "kip714" else python_subscription_id
    metrics = LISTS[which]
    assert benchmark(fn, metrics, 30000, CLIENT) == python_subscription_id(metrics, 30000, CLIENT)
