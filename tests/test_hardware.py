"""CPU feature detection and the INT8 weight format chosen from it (AVX2-only, AVX512, VNNI, unknown, ARM)."""

from __future__ import annotations

import pytest

from variants.core import hardware
from variants.core.hardware import current_hardware

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model name\t: Intel(R) Xeon(R) Platinum 8480+
model\t\t: 143
flags\t\t: fpu sse2 avx avx2 fma avx512f avx512bw
bugs\t\t: spectre_v1

processor\t: 1
cpu family\t: 25
stepping\t: 8
flags\t\t: fpu sse2 avx avx2 fma avx512f avx512bw
"""


def force_cpu(monkeypatch: pytest.MonkeyPatch, flags: set[str], x86: bool = True) -> None:
    monkeypatch.setattr(hardware, "cpu_features", lambda: frozenset(flags))
    monkeypatch.setattr(hardware, "is_x86", lambda: x86)


def test_flags_are_read_from_cpuinfo() -> None:
    assert hardware.parse_cpu_flags(CPUINFO) == {"fpu", "sse2", "avx", "avx2", "fma", "avx512f", "avx512bw"}
    assert hardware.parse_cpu_flags("processor : 0\nFeatures : fp asimd\n") == frozenset()  # not x86 Linux
    assert hardware.cpu_features() is hardware.cpu_features()  # read once


def test_cpu_generation_is_read_from_cpuinfo() -> None:
    # the first processor's block only, "model name" kept apart from "model"
    assert hardware.parse_cpu_id(CPUINFO) == {"vendor": "GenuineIntel", "family": 6, "model": 143}
    assert hardware.parse_cpu_id("processor : 0\nFeatures : fp asimd\n") == {}  # ARM
    ppc64le = "processor : 0\ncpu : POWER9\nrevision : 2.2\n\ntimebase : 512000000\nmodel : 9006-22P\n"
    assert hardware.parse_cpu_id(ppc64le) == {}  # the machine's model after the blocks is not the CPU's
    assert hardware.parse_cpu_id("") == {}


@pytest.mark.parametrize(
    ("flags", "x86", "int8_format"),
    [
        ({"avx2", "fma"}, True, "U8S7"),  # Haswell..Comet Lake, Zen 1-3: 8-bit s8 weights would saturate
        ({"avx2", "avx512f", "avx512bw"}, True, "U8S7"),  # Skylake-X: the same without VNNI
        ({"avx2", "avx512f", "avx512_vnni"}, True, "U8S8"),  # Cascade Lake, Zen 4
        ({"avx2", "avx_vnni"}, True, "U8S8"),  # Alder Lake
        ({"avx512f", "avx512_vnni", "amx_int8"}, True, "U8S8"),  # Sapphire Rapids
        (set(), True, "U8U8"),  # flags unknown (no /proc/cpuinfo): the safe choice
        (set(), False, "U8S8"),  # ARM: no u8 x s8 saturation
    ],
)
def test_int8_format_follows_the_instruction_set(
    monkeypatch: pytest.MonkeyPatch, flags: set[str], x86: bool, int8_format: str
) -> None:
    force_cpu(monkeypatch, flags, x86)
    settings = hardware.int8_settings()
    expected = {"U8S8": ("QInt8", False), "U8S7": ("QInt8", True), "U8U8": ("QUInt8", False)}[int8_format]
    assert (settings.weight_type, settings.reduce_range) == expected
    assert settings.format == int8_format
    assert settings.reason


def test_benchmark_records_carry_the_isa_and_the_int8_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    force_cpu(monkeypatch, {"sse2", "avx2", "fma", "avx512f"})
    facts = current_hardware()
    assert facts["cpu_isa"] == ["avx2", "fma", "avx512f"]
    assert facts["int8"]["format"] == "U8S7" and facts["int8"]["reduce_range"] is True
