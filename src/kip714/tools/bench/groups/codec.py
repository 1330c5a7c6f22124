"""The ``codec`` group: :func:`kip714.decompress` against the direct call of each codec's package
(zstandard, lz4, cramjam for snappy and xerial snappy, zlib for gzip) on realistic OTLP payloads, with
curves of the cost by payload size."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable

import kip714
from kip714._enums import compression_type_from_name

from ..harness import Bench, Goal, PeerContender
from ..payloads import KB, LIMIT, otlp_like
from ..peers import PeerMissing, dist_version, peer_module
from ..render import fmt_bytes, fmt_ns, size_name
from ..timing import interleaved

__all__ = ["run"]


def run(bench: Bench) -> None:
    """Add the decompression rows and the per-codec curves to ``bench``."""
    G = "codec"
    table_sizes = [4 * KB, 100 * KB]
    sizes = [KB, 4 * KB, 100 * KB, 1_000_000] if bench.quick else [KB, 4 * KB, 16 * KB, 100 * KB, 256 * KB, 1_000_000]
    codecs = ["zstd", "lz4", "snappy", "gzip", "snappy-xerial"]
    ctype = {c: int(compression_type_from_name(c.split("-")[0])) for c in codecs}

    def direct(codec: str):
        """(label, callable, compressor) of the direct library call for a framing."""
        if codec == "zstd":
            zstandard = peer_module("zstandard")
            dctx = zstandard.ZstdDecompressor()
            cctx = zstandard.ZstdCompressor(level=3, write_content_size=False)
            return (
                "zstandard (reused ZstdDecompressor, max_output_size)",
                lambda c: dctx.decompress(c, max_output_size=LIMIT),
                cctx.compress,
            )
        if codec == "lz4":
            lz4_frame = peer_module("lz4.frame")
            return "lz4.frame.decompress", lz4_frame.decompress, lambda d: kip714.compress(d, 3)
        if codec in ("snappy", "snappy-xerial"):
            cramjam = peer_module("cramjam")
            comp = (
                (lambda d: bytes(cramjam.snappy.compress_raw(d)))
                if codec == "snappy"
                else (lambda d: kip714.compress(d, 2))
            )
            return "cramjam.snappy.decompress_raw", cramjam.snappy.decompress_raw, comp
        return "zlib.decompress(wbits=31)", lambda c: zlib.decompress(c, 31), lambda d: gzip.compress(d, mtime=0)

    curve: dict[str, dict[str, list[float]]] = {}
    for codec in codecs:
        try:
            label, fn, comp = direct(codec)
        except PeerMissing as exc:
            bench.skip(G, codec, str(exc))
            continue
        dist = {"zstd": "zstandard", "lz4": "lz4", "snappy": "cramjam", "snappy-xerial": "cramjam", "gzip": None}[codec]
        ver = f" {dist_version(dist)}" if dist and dist_version(dist) else ""
        c = curve.setdefault(codec, {"x": [], "kip714": [], "direct": []})
        for size in sorted(set(sizes) | set(table_sizes)):
            data = otlp_like(size, seed=size)
            packed = comp(data)
            if codec == "snappy-xerial":
                raw_block = bytes(peer_module("cramjam").snappy.compress_raw(data))
                peer_call, peer_args = fn, (raw_block,)
            else:
                peer_call, peer_args = fn, (packed,)
            assert bytes(kip714.decompress(packed, ctype[codec], LIMIT)) == data
            assert bytes(peer_call(*peer_args)) == data
            extra = {"payload_bytes": len(data), "compressed_bytes": len(packed)}
            goal: Goal | None
            if size in table_sizes:
                if codec == "snappy-xerial":
                    op = (
                        f"decompress snappy xerial (Java clients), {fmt_bytes(len(data))} OTLP "
                        f"({fmt_bytes(len(packed))} compressed)"
                    )
                    goal, note = None, "peer: the same payload as one raw snappy block (no one-call xerial decoder)"
                    pl = "raw block, cramjam" + ver
                else:
                    op = f"decompress {codec}, {fmt_bytes(len(data))} OTLP ({fmt_bytes(len(packed))} compressed)"
                    goal = {"kind": "within", "value": 0.10, "text": "≥ 0.91× (≤ 10% slower)"}
                    note, pl = "", label.split(" (")[0] + ver

                def peer(
                    pl: str = pl,
                    peer_call: Callable[..., object] = peer_call,
                    peer_args: tuple[object, ...] = peer_args,
                ) -> PeerContender:
                    return pl, peer_call, peer_args

                row = bench.pair(
                    G,
                    f"decompress-{codec}-{size}",
                    op,
                    (kip714.decompress, (packed, ctype[codec], LIMIT)),
                    peer,
                    goal=goal,
                    note=note,
                    extra=extra,
                )
                kip_med, peer_med = row["kip714"]["median"], row["peer"]["median"]
            else:
                st = interleaved(
                    [(kip714.decompress, (packed, ctype[codec], LIMIT)), (peer_call, peer_args)],
                    bench.rounds,
                    budget_s=bench.budget / 2,
                )
                kip_med, peer_med = st[0]["median"], st[1]["median"]
                bench.log(f"[{G}] curve {codec} {size_name(size)}: kip714 {fmt_ns(kip_med)}, direct {fmt_ns(peer_med)}")
            if size in sizes:
                c["x"].append(len(data))
                c["kip714"].append(kip_med)
                c["direct"].append(peer_med)
    bench.curves["codec"] = {
        "title": "Decompression: kip714.decompress vs the direct codec call",
        "xlabel": "decompressed bytes",
        "ylabel": "time per call (ns)",
        "per_codec": curve,
    }
