"""kip714.broker.javaorder against Kafka's vectors and, differentially, against a real JDK.

The differential test compiles tests/java/SubscriptionOrder.java, feeds one ``java`` process thousands
of seeded random subscription histories (puts, re-puts, removals, queries) and compares every query's
requested-metrics order, map key order and SubscriptionId with kip714's emulation. It is skipped when
``javac``/``java`` are missing. Besides the JDK on PATH (17 here, checked with ``jdk=17``) it also runs
against a JDK 19+ if one is installed under /usr/lib/jvm or named by ``KIP714_JAVA19`` (``jdk=19``).
"""

from __future__ import annotations

import glob
import os
import random
import re
import shutil
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from suite_jvm import JAVA_OPTIONS, JAVAC_OPTIONS

from kip714._crc import compute_subscription_id
from kip714.broker.javaorder import JavaConcurrentHashMap, JavaHashSet, java_string_hash, resolve_order

JAVA_SOURCE = Path(__file__).parent / "java" / "SubscriptionOrder.java"
P = "org.apache.kafka."
VEC_UUID = uuid.UUID(int=(0x5E0B1D6A3C4F7A21 << 64) | 0x9D3E2B7C8A1F4E60)


# ------------------------------------------------------------------------- broker flow in Python


@dataclass
class Sub:
    name: str
    metrics: JavaHashSet
    interval: int


def resolve(chm: JavaConcurrentHashMap, client: uuid.UUID, matching: set[str] | None = None):
    """What ClientMetricsManager computes for one client: (requested metrics, interval, id)."""
    matched = [s for s in chm.values() if matching is None or s.name in matching]
    order = resolve_order(s.metrics for s in matched)
    interval = min([300000] + [s.interval for s in matched])
    return order, interval, compute_subscription_id(order, interval, client)


def configure(subs: list[tuple[str, list[str], int]], jdk: int = 17) -> JavaConcurrentHashMap:
    chm: JavaConcurrentHashMap = JavaConcurrentHashMap()
    for name, metrics, interval in subs:
        chm.put(name, Sub(name, JavaHashSet.from_collection(metrics, jdk=jdk), interval))
    return chm


# ------------------------------------------------------------------------------ vectors (no JDK)

GREEK = ["lambda", "epsilon", "nu", "phi", "beta", "gamma", "sigma", "delta", "mu", "kappa", "alpha", "iota"]
KIP13 = [
    P + m
    for m in [
        "producer.connection.creation.rate",
        "producer.connection.creation.total",
        "producer.node.request.latency.avg",
        "producer.node.request.latency.max",
        "producer.produce.throttle.time.avg",
        "producer.produce.throttle.time.max",
        "producer.record.queue.time.avg",
        "producer.record.queue.time.max",
        "consumer.connection.creation.rate",
        "consumer.connection.creation.total",
        "consumer.node.request.latency.avg",
        "consumer.node.request.latency.max",
        "consumer.poll.idle.ratio.avg",
    ]
]
TWO = [P + "client.producer.partition.queue.", P + "client.producer.partition.latency"]


@pytest.mark.parametrize(
    "subs, jdk, order, interval, expected",
    [
        pytest.param([], 17, [], 300000, -1583195767, id="1"),
        pytest.param([("sub-1", TWO, 30000)], 17, TWO[::-1], 30000, -111713672, id="2"),
        pytest.param([("sub-1", TWO, 30000), ("sub-2", ["*"], 300000)], 17, ["*"], 30000, -1387469480, id="3"),
        pytest.param(
            [("a", [P + "producer.", P + "consumer."], 60000), ("b", [P + "consumer.", P + "producer.node."], 10000)],
            17,
            [P + "producer.", P + "consumer.", P + "producer.node."],
            10000,
            881785404,
            id="4",
        ),
        pytest.param([("a", [P + "producer."], 600000)], 17, [P + "producer."], 300000, -1446181002, id="5"),
        pytest.param([("a", [P + "producer.", ""], 1000)], 17, [P + "producer.", ""], 1000, 38142455, id="6"),
        pytest.param([("a", [""], 5000)], 17, [""], 5000, 1691415660, id="7"),
        pytest.param(
            [("a", KIP13, 100)],
            17,
            [
                P + m
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
            100,
            1179564880,
            id="8",
        ),
        pytest.param(
            [("a", [P + "producer." + g for g in GREEK], 60000)],
            17,
            [
                P + "producer." + g
                for g in [
                    "alpha",
                    "kappa",
                    "gamma",
                    "lambda",
                    "iota",
                    "epsilon",
                    "beta",
                    "sigma",
                    "phi",
                    "delta",
                    "mu",
                    "nu",
                ]
            ],
            60000,
            -1939838256,
            id="11-jdk17",
        ),
        pytest.param(
            [("a", [P + "producer." + g for g in GREEK], 60000)],
            19,
            [
                P + "producer." + g
                for g in [
                    "alpha",
                    "kappa",
                    "gamma",
                    "lambda",
                    "epsilon",
                    "beta",
                    "iota",
                    "phi",
                    "sigma",
                    "delta",
                    "mu",
                    "nu",
                ]
            ],
            60000,
            -836231277,
            id="11-jdk19",
        ),
    ],
)
def test_kafka_vectors_from_configuration(subs, jdk, order, interval, expected):
    assert resolve(configure(subs, jdk), VEC_UUID) == (order, interval, expected)


def test_vectors_9_and_10():
    u = uuid.UUID(int=(1 << 64) | 2)
    assert resolve(configure([]), u)[2] == -725132323
    assert resolve(configure([("x", ["*"], 30000)]), u)[2] == -668342516
    u = uuid.UUID(int=(0xFFFFFFFF00000000 << 64) | 0x0000000100000000)
    assert resolve(configure([]), u)[2] == 725132320


def test_java_string_hash():
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert java_string_hash("\U0001f600") == 31 * 0xD83D + 0xDE00  # two UTF-16 code units
    assert java_string_hash("\ud83d\ude00") == java_string_hash("\U0001f600")


def test_hashset_capacity_rules():
    def cap(n: int, jdk: int) -> int:
        return JavaHashSet.from_collection([f"m{i}" for i in range(n)], jdk=jdk).capacity

    assert [cap(n, 17) for n in (0, 1, 11, 12, 13, 24, 48, 96)] == [16, 16, 16, 32, 32, 64, 128, 256]
    assert [cap(n, 19) for n in (0, 1, 11, 12, 13, 24, 48, 96)] == [16, 16, 16, 16, 32, 32, 64, 128]
    assert JavaHashSet().capacity == 16


def test_hashset_basics():
    s = JavaHashSet.from_collection(["b", "a", "b", "\ud83d\ude00"])
    assert len(s) == 3
    assert "a" in s and "\U0001f600" in s and "c" not in s and 3 not in s
    assert not s.add("a")
    assert list(s) == ["a", "b", "\ud83d\ude00"]
    assert s.java_to_string() == "[a, b, \ud83d\ude00]"
    assert JavaHashSet().java_to_string() == "[]"
    with pytest.raises(TypeError):
        s.add(1)  # type: ignore[arg-type]


def test_chm_basics():
    m: JavaConcurrentHashMap[int] = JavaConcurrentHashMap()
    for i in range(30):
        m.put(f"sub-{i}", i)
    assert len(m) == 30 and m.table_length == 64
    assert m.put("sub-3", 99) == 3 and m["sub-3"] == 99 and m.get("nope", -1) == -1
    assert m.remove("sub-4") == 4 and "sub-4" not in m and m.remove("sub-4") is None
    assert sorted(m.values()) == sorted([i for i in range(30) if i not in (3, 4)] + [99])
    assert list(m) == list(m.keys()) == [k for k, _ in m.items()]
    del m["sub-5"]
    with pytest.raises(KeyError):
        del m["sub-5"]
    with pytest.raises(TypeError):
        m.put("x", None)  # type: ignore[arg-type]


def test_resolve_order_star_and_empty():
    a = JavaHashSet.from_collection(["x", "y"])
    assert resolve_order([]) == []
    assert resolve_order([a, JavaHashSet.from_collection(["*", "z"])]) == ["*"]
    assert resolve_order([a]) == list(a)


# ------------------------------------------------------------------------------- case generator

WORDS = [
    "connection.creation",
    "node.request.latency",
    "produce.throttle.time",
    "record.queue.time",
    "poll.idle.ratio",
    "request.rate",
    "io.wait.time",
    "bytes.consumed",
    "fetch.size",
    "commit.latency",
    "partition.queue",
    "partition.latency",
    "coordinator.rebalance",
    "heartbeat.response.time",
    "buffer.available.bytes",
    "batch.size",
    "compression.rate",
    "records.lag",
    "request.size",
    "select.rate",
]
PREFIXES = [
    P + "producer.",
    P + "consumer.",
    P + "admin.",
    P + "client.producer.",
    P + "client.consumer.",
    P + "consumer.coordinator.",
    P + "producer.topic.",
    P + "consumer.fetch.manager.",
]
SUFFIXES = ["", ".avg", ".max", ".rate", ".total", ".count"]


def realistic_name(rng: random.Random) -> str:
    r = rng.random()
    prefix = rng.choice(PREFIXES)
    if r < 0.1:
        return prefix
    word = rng.choice(WORDS)
    if r < 0.2:
        return prefix + word[: rng.randint(1, len(word))]
    return prefix + word + rng.choice(SUFFIXES)


def unicode_name(rng: random.Random) -> str:
    chars = []
    for _ in range(rng.randint(0, 10)):
        r = rng.random()
        if r < 0.4:
            chars.append(chr(rng.randint(0x20, 0x7E)))
        elif r < 0.6:
            chars.append(chr(rng.randint(0xA0, 0x24F)))
        elif r < 0.75:
            chars.append(chr(rng.randint(0x4E00, 0x9FFF)))
        elif r < 0.9:
            chars.append(chr(rng.randint(0x1F300, 0x1FAFF)))  # astral: a surrogate pair in Java
        elif r < 0.95:
            chars.append(chr(rng.randint(0xD800, 0xDFFF)))  # a lone surrogate
        else:
            chars.append(chr(rng.randint(0xE000, 0xFFFD)))
    return "".join(chars)


def colliding_family(rng: random.Random, k: int) -> list[str]:
    """k distinct strings with one and the same String.hashCode ("Aa" and "BB" hash alike)."""
    stem = rng.choice(PREFIXES) + rng.choice(WORDS) + "."
    blocks = 6
    picks = rng.sample(range(1 << blocks), k)
    return [stem + "".join("Aa" if bits >> b & 1 else "BB" for b in range(blocks)) for bits in picks]


def same_bucket(rng: random.Random, k: int, mask: int) -> list[str]:
    """k strings with different hashes that share the low bits of Java's spread hash."""
    want = rng.randint(0, mask)
    out: list[str] = []
    stem = rng.choice(PREFIXES)
    stem_hash = java_string_hash(stem) & 0xFFFFFFFF
    while len(out) < k:
        tail = format(rng.getrandbits(40), "x")
        # String.hashCode of stem + tail, continued from the stem's over the tail's ASCII units (the search
        # tries thousands of strings: without a string, a cache entry or UTF-16 per try)
        h = stem_hash
        for unit in tail.encode():
            h = (31 * h + unit) & 0xFFFFFFFF
        if (h ^ (h >> 16)) & mask == want:
            out.append(stem + tail)
            assert java_string_hash(out[-1]) & 0xFFFFFFFF == h
    return out


def metric_pool(rng: random.Random, adversarial: bool) -> list[str]:
    pool = list({realistic_name(rng) for _ in range(rng.randint(20, 90))})
    pool += [unicode_name(rng) for _ in range(rng.randint(0, 12))]
    if adversarial:
        pool += colliding_family(rng, rng.randint(9, 24))
        pool += same_bucket(rng, rng.randint(4, 12), rng.choice([15, 63, 127]))
    return pool


def metric_list(rng: random.Random, pool: list[str]) -> list[str]:
    r = rng.random()
    distinct = sorted(set(pool))
    if r < 0.2:  # the sizes where JDK 17 and 19+ size the table differently
        size = rng.choice([12, 24, 48])
        items = rng.sample(distinct, min(size, len(distinct)))
        items += rng.choices(distinct, k=size - len(items))  # pool too small: duplicates
        return items
    if r < 0.3:
        size = rng.randint(25, 80)
    else:
        size = rng.randint(0, 14)
    items = [rng.choice(pool) for _ in range(size)]
    if rng.random() < 0.03:
        items.insert(rng.randint(0, len(items)), "*")
    if rng.random() < 0.05:
        items.insert(rng.randint(0, len(items)), "")
    return items


def sub_names(rng: random.Random, adversarial: bool) -> list[str]:
    names = [f"sub-{i}" for i in range(rng.randint(1, 40))]
    if rng.random() < 0.3:
        names += [unicode_name(rng) or "x" for _ in range(rng.randint(1, 10))]
    if adversarial:
        names += colliding_family(rng, rng.randint(9, 20))
        names += same_bucket(rng, rng.randint(3, 10), rng.choice([15, 127]))
    rng.shuffle(names)
    return names


def enc(s: str) -> str:
    return "x" + s.encode("utf-16-be", "surrogatepass").hex()


@dataclass
class Case:
    lines: list[str] = field(default_factory=list)
    expected: list[tuple[list[str], int, int, list[str]]] = field(default_factory=list)


def generate(seed: int, count: int, jdk: int) -> list[Case]:
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        adversarial = rng.random() < 0.12
        pool = metric_pool(rng, adversarial)
        names = sub_names(rng, adversarial)
        remove_rate = 0.15
        # map stress: many names in few bins, enough of them to grow the map past 128 bins with tree
        # bins in it, and many removals (red-black deletion, tree bins turning back into lists)
        map_stress = rng.random() < 0.06
        if map_stress:
            names = colliding_family(rng, rng.randint(12, 40)) + [f"sub-{i}" for i in range(rng.randint(0, 110))]
            names += same_bucket(rng, rng.randint(6, 16), rng.choice([127, 255]))
            pool = pool[:8]
            remove_rate = rng.choice([0.2, 0.35, 0.5])
        chm: JavaConcurrentHashMap = JavaConcurrentHashMap()
        case = Case(lines=["N"])
        steps = rng.randint(1, 2 * len(names) + 4)
        for step in range(steps):
            r = rng.random()
            if r < remove_rate and len(chm):
                name = rng.choice(list(chm.keys())) if rng.random() < 0.9 else rng.choice(names)
                chm.remove(name)
                case.lines.append(f"R {enc(name)}")
            else:
                name = rng.choice(names)
                metrics = metric_list(rng, pool)
                interval = rng.choice([100, 1000, 30000, 60000, 300000, 600000, rng.randint(100, 3600000)])
                chm.put(name, Sub(name, JavaHashSet.from_collection(metrics, jdk=jdk), interval))
                case.lines.append(f"P {enc(name)} {interval} {len(metrics)} {' '.join(map(enc, metrics))}".rstrip())
            if rng.random() < 0.15 or step == steps - 1:
                client = uuid.UUID(int=rng.getrandbits(128))
                msb, lsb = client.int >> 64, client.int & (2**64 - 1)
                if rng.random() < 0.7:
                    matching = None
                    case.lines.append(f"Q {msb:x} {lsb:x} -1")
                else:
                    matching = set(rng.sample(names, rng.randint(0, len(names))))
                    case.lines.append(f"Q {msb:x} {lsb:x} {len(matching)} {' '.join(map(enc, matching))}".rstrip())
                order, interval, sid = resolve(chm, client, matching)
                case.expected.append((order, interval, sid, list(chm.keys())))
        cases.append(case)
    return cases


# --------------------------------------------------------------------------------- JDK plumbing


def java_major(java: str) -> int | None:
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def find_jvms() -> list[tuple[str, int]]:
    """The java on PATH, plus one JDK 19+ (KIP714_JAVA19, or the newest under /usr/lib/jvm)."""
    found: list[tuple[str, int]] = []
    default = shutil.which("java")
    if default and (major := java_major(default)):
        found.append((default, major))
    candidates = [os.environ["KIP714_JAVA19"]] if os.environ.get("KIP714_JAVA19") else []
    candidates += sorted(glob.glob("/usr/lib/jvm/*/bin/java"))
    newer = [(c, m) for c in candidates if (m := java_major(c)) and m >= 19]
    if newer and not any(m >= 19 for _, m in found):
        found.append(max(newer, key=lambda cm: cm[1]))
    return found


JVMS = find_jvms() if shutil.which("javac") else []


@pytest.fixture(scope="session")
def oracle_classes(tmp_path_factory) -> Path:
    javac = shutil.which("javac")
    if javac is None:
        pytest.skip("javac not found: the JDK differential test needs a JDK (17+) on PATH")
    out = tmp_path_factory.mktemp("java-oracle")
    proc = subprocess.run(
        [javac, *JAVAC_OPTIONS, "--release", "17", "-d", str(out), str(JAVA_SOURCE)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    return out


def describe(case: Case, limit: int = 30) -> str:
    def dec(tok: str) -> str:
        return bytes.fromhex(tok[1:]).decode("utf-16-be", "surrogatepass") if tok.startswith("x") else tok

    lines = []
    for line in case.lines[:limit]:
        t = line.split(" ")
        text = " ".join([t[0]] + [repr(dec(x)) if x.startswith("x") else x for x in t[1:]])
        lines.append(text if len(text) < 300 else text[:300] + " ...")
    return "\n".join(lines)


@pytest.mark.java
@pytest.mark.slow
@pytest.mark.parametrize(
    "java, major",
    JVMS or [pytest.param(None, 0, marks=pytest.mark.skip(reason="no javac/java on PATH"))],
    ids=[f"jdk{m}" for _, m in JVMS] or ["no-jdk"],
)
def test_against_real_jdk(oracle_classes, java, major):
    jdk = 19 if major >= 19 else 17
    cases = generate(seed=714_000 + major, count=600, jdk=jdk)
    stdin = "\n".join(line for case in cases for line in case.lines) + "\n"
    proc = subprocess.run(
        [java, *JAVA_OPTIONS, "-Xss8m", "-cp", str(oracle_classes), "SubscriptionOrder"],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = proc.stdout.splitlines()
    expected = [e for case in cases for e in case.expected]
    assert len(got) == len(expected), proc.stderr[-2000:]

    def dec(tok: str) -> bytes:
        return bytes.fromhex(tok[1:])

    def units(strings: list[str]) -> list[bytes]:
        # compare as Java strings: a surrogate pair written as two code points is one astral character
        return [x.encode("utf-16-be", "surrogatepass") for x in strings]

    owners = [case for case in cases for _ in case.expected]
    mismatches = []
    for line, (order, interval, sid, keys), case in zip(got, expected, owners):
        t = line.split(" ")
        n = int(t[2])
        j_order = [dec(x) for x in t[3 : 3 + n]]
        j_keys = [dec(x) for x in t[4 + n :]]
        if (int(t[0]), int(t[1]), j_order, j_keys) != (sid, interval, units(order), units(keys)):
            mismatches.append((case, (int(t[0]), int(t[1]), j_order, j_keys), (sid, interval, order, keys)))
    queries = len(expected)
    print(f"JDK {major} (model jdk={jdk}): {len(cases)} histories, {queries} queries, {len(mismatches)} mismatches")
    if mismatches:
        case, java_result, ours = mismatches[0]
        pytest.fail(
            f"{len(mismatches)} of {queries} queries differ from JDK {major}; first one:\n"
            f"java: {java_result}\nours: {ours}\nhistory:\n{describe(case)}"
        )
