"""The native core's copy of Kafka's numbers (src/_native/common/kafka_constants.pxd) equals their one home,
kip714._enums: every error code and compression id the C code compares against."""

from __future__ import annotations

import pathlib
import re

import pytest

from kip714 import CompressionType, ErrorCode

PXD = pathlib.Path(__file__).parents[1] / "src" / "_native" / "common" / "kafka_constants.pxd"


@pytest.mark.skipif(not PXD.is_file(), reason="the native sources are not beside an installed wheel")
def test_native_constants_match_enums():
    pairs = re.findall(r"^\s+([EC])_([A-Z_]+) = (-?\d+)$", PXD.read_text(), flags=re.M)
    assert len(pairs) >= 10
    for kind, name, value in pairs:
        enum = ErrorCode if kind == "E" else CompressionType
        assert enum[name] == int(value), f"{kind}_{name} = {value} but {enum.__name__}.{name} = {int(enum[name])}"
