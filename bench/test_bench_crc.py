"""CRC32C and SubscriptionId speed against the two CRC32C packages.

Run: ``python -m pytest bench/test_bench_crc.py --benchmark-only --benchmark-columns=min,mean,median``
"""

from __future__ import annotations

import random

import pytest

from kip714._crc import _crc32c_sw, compute_subscription_id, crc32c
from kip714.tools.bench import SUBSCRIPTION_CLIENT, SUBSCRIPTION_LISTS
from kip714.tools.bench import python_subscription_id as make_python_subscription_id

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


LISTS = {"2-metrics": SUBSCRIPTION_LISTS["2 metric prefixes"], "13-metrics": SUBSCRIPTION_LISTS["13 metrics"]}
CLIENT = SUBSCRIPTION_CLIENT


#: the straightforward Python version (kip714.tools.bench's peer) with the crc32c package
python_subscription_id = make_python_subscription_id(crc32c_pkg.crc32c)


@pytest.mark.parametrize("impl", ["kip714", "python+crc32c-pkg"])
@pytest.mark.parametrize("which", list(LISTS))
def test_subscription_id(benchmark, which, impl):
    benchmark.group = f"subscription-id-{which}"
    fn = compute_subscription_id if impl == "kip714" else python_subscription_id
    metrics = LISTS[which]
    assert benchmark(fn, metrics, 30000, CLIENT) == python_subscription_id(metrics, 30000, CLIENT)
