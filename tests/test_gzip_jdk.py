"""gzip payloads read exactly as Kafka's broker reads them: kip714.decompress(..., 1, ...) against the JDK.

Kafka decompresses a gzip PushTelemetry payload with ``java.util.zip.GZIPInputStream`` (8 KiB buffer).
Its rules for what follows a member are not zlib's: bytes that do not parse as a gzip header are
ignored; bytes that do start another member; up to 18 bytes that sit in the reader's current buffer
are ignored without being looked at (so the answer depends on where the 8 KiB buffer boundaries fall);
reserved header flags are ignored. ``tests/java/GzipOracle.java`` runs the real JDK reader over
generated cases: members ending around the buffer boundaries followed by every kind of tail, header
variants, corruptions and random mutations. Every verdict and every decompressed byte count and CRC
must agree.
"""

from __future__ import annotations

import gzip
import random
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
from suite_jvm import JAVA_OPTIONS, JAVAC_OPTIONS

import kip714
from kip714.errors import CorruptPayloadError

JAVA_SOURCE = Path(__file__).parent / "java" / "GzipOracle.java"
LIMIT = 1 << 24

pytestmark = [pytest.mark.java]


def member(
    data: bytes,
    level: int = 6,
    flags: int = 0,
    extra: bytes | None = None,
    name: bytes | None = None,
    comment: bytes | None = None,
    hcrc: str | None = None,
    method: int = 8,
) -> bytes:
    """One gzip member with the header fields chosen (hcrc: None, "good" or "bad")."""
    flg = flags
    if extra is not None:
        flg |= 4
    if name is not None:
        flg |= 8
    if comment is not None:
        flg |= 16
    if hcrc is not None:
        flg |= 2
    head = bytes([0x1F, 0x8B, method, flg, 0, 0, 0, 0, 0, 0xFF])
    if extra is not None:
        head += struct.pack("<H", len(extra)) + extra
    if name is not None:
        head += name + b"\0"
    if comment is not None:
        head += comment + b"\0"
    if hcrc is not None:
        c = zlib.crc32(head) & 0xFFFF
        head += struct.pack("<H", c if hcrc == "good" else c ^ 1)
    co = zlib.compressobj(level, zlib.DEFLATED, -15)
    body = co.compress(data) + co.flush()
    return head + body + struct.pack("<II", zlib.crc32(data) & 0xFFFFFFFF, len(data) & 0xFFFFFFFF)


def tails(rng: random.Random) -> dict[str, bytes]:
    small = member(b"second member")
    return {
        "zeros": b"\0" * 40,
        "random": rng.randbytes(40),
        "header-prefix": bytes([0x1F, 0x8B, 8, 0]) + b"\0" * 36,
        "valid-member": small + rng.randbytes(20),
        "empty-member": member(b"") + b"\0" * 20,
        "corrupt-member": small[:12] + b"\xff\xff\xff" + small[15:],
        "reserved-flags": member(b"flags", flags=0xE0),
        "hcrc-good": member(b"h", hcrc="good"),
        "hcrc-bad": member(b"h", hcrc="bad"),
        "name-unterminated": bytes([0x1F, 0x8B, 8, 8]) + b"\0" * 6 + b"x" * 30,
        "extra-overlong": bytes([0x1F, 0x8B, 8, 4]) + b"\0" * 6 + b"\xff\x00" + b"e" * 28,
        "method-7": bytes([0x1F, 0x8B, 7, 0]) + b"\0" * 36,
    }


CUTS = (0, 1, 2, 7, 8, 9, 10, 17, 18, 19, 20, 26, 27, 40)


def generate(seed: int = 714) -> list[bytes]:
    rng = random.Random(seed)
    cases: list[bytes] = []
    tail = tails(rng)
    # 1. stored members whose deflate data ends around the 8 KiB buffer boundaries (the first fill starts
    #    after the 10-byte header, so boundaries are at 10 + 8192 k), followed by every tail, cut short
    for boundary in (10 + 8192, 10 + 2 * 8192):
        for d in (-27, -19, -18, -10, -9, -8, -1, 0, 1, 8, 9, 18, 19, 27):
            length = boundary + d - 15  # header 10 + stored block 5 + data
            base = member(rng.randbytes(length), level=0)
            assert len(base) - 8 == boundary + d
            for _kind, t in tail.items():
                for cut in CUTS:
                    cases.append(base + t[:cut])
    # 2. compressed members of several sizes, every tail and cut
    for size in (0, 1, 100, 5000, 20000):
        base = member(bytes(rng.choice(b"abcdefgh ") for _ in range(size)))
        for _kind, t in tail.items():
            for cut in CUTS:
                cases.append(base + t[:cut])
    # 3. first-member header variants and corruptions
    data = b"kip714 telemetry " * 50
    good = member(data)
    cases += [
        member(data, flags=0x20),
        member(data, flags=0xE0),
        member(data, extra=b"abc"),
        member(data, extra=b""),
        member(data, name=b"metrics.pb"),
        member(data, comment=b"c"),
        member(data, hcrc="good"),
        member(data, hcrc="bad"),
        member(data, name=b"n", comment=b"c", extra=b"x", hcrc="good", flags=0x40),
        member(data, method=7),
        good[:-1],
        good[:-8],
        good[:10],
        good[:3],
        b"",
        b"\x1f",
        b"\x1f\x8b",
        good[:-4] + b"\0\0\0\0",
        good[:-8] + b"\0\0\0\0" + good[-4:],
        gzip.compress(data),
        gzip.compress(data) + gzip.compress(data, compresslevel=0),
        zlib.compress(data),
        member(data, flags=0xE0)[:-1],
        member(data, flags=0xE0)[:-5] + b"\0" * 5,
    ]
    # 4. random mutations of small multi-member payloads
    bases = [good + member(b"tail"), member(b"x" * 3000, level=1) + b"\0" * 12, member(b"", flags=0xE0) + good]
    for _ in range(800):
        b = bytearray(rng.choice(bases))
        for _ in range(rng.randint(1, 3)):
            op = rng.randrange(4)
            i = rng.randrange(len(b) + 1)
            if op == 0 and i < len(b):
                b[i] ^= 1 << rng.randrange(8)
            elif op == 1:
                del b[i:]
            elif op == 2:
                b[i:i] = rng.randbytes(rng.randint(1, 12))
            else:
                b += rng.choice(list(tail.values()))[: rng.randint(0, 40)]
        cases.append(bytes(b))
    return cases


def ours(data: bytes) -> str:
    try:
        out = kip714.decompress(data, 1, LIMIT)
    except CorruptPayloadError:
        return "ERR"
    return f"OK {len(out)} {zlib.crc32(out):x}"


@pytest.fixture(scope="module")
def java_oracle(tmp_path_factory):
    javac, java = shutil.which("javac"), shutil.which("java")
    if javac is None or java is None:
        pytest.skip("javac/java not found: the gzip differential test needs a JDK (17+) on PATH")
    out = tmp_path_factory.mktemp("gzip-oracle")
    proc = subprocess.run(
        [javac, *JAVAC_OPTIONS, "--release", "17", "-d", str(out), str(JAVA_SOURCE)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr

    def run(cases: list[bytes]) -> list[str]:
        stdin = b"".join(struct.pack(">i", len(c)) + c for c in cases) + struct.pack(">i", -1)
        res = subprocess.run(
            [java, *JAVA_OPTIONS, "-cp", str(out), "GzipOracle"], input=stdin, capture_output=True, timeout=300
        )
        assert res.returncode == 0, res.stderr.decode()[-2000:]
        lines = res.stdout.decode().splitlines()
        assert len(lines) == len(cases)
        return [line if line.startswith("OK") else "ERR" for line in lines]

    return run


def test_gzip_verdicts_and_bytes_match_the_jdk(java_oracle):
    cases = generate()
    want = java_oracle(cases)
    got = [ours(c) for c in cases]
    diff = [(i, len(c), g, w) for i, (c, g, w) in enumerate(zip(cases, got, want)) if g != w]
    assert not diff, f"{len(diff)} of {len(cases)} differ from the JDK, e.g. {diff[:8]}"
    # both outcomes, and both of Java's tail rules, really exercised
    assert sum(w == "ERR" for w in want) > 200 and sum(w.startswith("OK") for w in want) > 1000


def test_the_jdk_buffer_quirk_is_modelled():
    """The same 15-byte tail (a gzip header prefix) is ignored when it sits in the reader's buffer and
    read as a truncated member when it starts in the next one."""
    tail = bytes([0x1F, 0x8B, 8, 0]) + b"\0" * 11
    inside = member(b"a" * (8202 - 15 - 40), level=0) + tail  # member and tail end before 10 + 8192
    across = member(b"a" * (8202 - 15), level=0) + tail  # deflate data ends at the boundary
    assert kip714.decompress(inside, 1, LIMIT) == b"a" * (8202 - 55)
    with pytest.raises(CorruptPayloadError):
        kip714.decompress(across, 1, LIMIT)
