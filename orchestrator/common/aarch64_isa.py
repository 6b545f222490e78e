"""Which AArch64 extension an instruction word belongs to: what a SIGILL report names.

When a wheel dies of SIGILL on an emulated board, the board side reports the faulting
instruction word (see ``orchestrator/board_side/sigill_guard.py``). This table names the
instruction classes a wheel built for a newer core than the board's typically contains: FP16
arithmetic (ARMv8.2), dot product, LSE atomics, RCpc, RDM, FHM, I8MM, BF16, SVE. It is a
classifier, not a disassembler: an encoding it does not know is reported by its hex word.
Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class InstructionClass:
    mask: int
    value: int
    what: str  # e.g. "FP16 scalar arithmetic (FADD/FMUL/FMOV ... on H registers)"
    feature: str  # e.g. "FEAT_FP16, ARMv8.2-A"


# Checked in order; the first match wins (the base-ARMv8.0 exceptions come first).
_BASE = (
    # FCVT Sd/Dd, Hn: half -> single/double conversion is ARMv8.0 (not FP16 arithmetic).
    InstructionClass(mask=0xFFFE7C00, value=0x1EE24000, what="FCVT from half precision", feature="ARMv8.0"),
)
_CLASSES = (
    InstructionClass(
        mask=0x7FE00000,
        value=0x1EE00000,
        what="half-precision scalar floating point (FADD/FMUL/FMOV/FCVTZS ... on H registers)",
        feature="FEAT_FP16, ARMv8.2-A",
    ),
    InstructionClass(
        mask=0xFFC00000,
        value=0x1FC00000,
        what="half-precision fused multiply-add (FMADD/FMSUB ... on H registers)",
        feature="FEAT_FP16, ARMv8.2-A",
    ),
    InstructionClass(
        mask=0x9F60C400,
        value=0x0E400400,
        what="half-precision vector arithmetic (FADD/FMUL/FMLA ... .8H/.4H)",
        feature="FEAT_FP16, ARMv8.2-A",
    ),
    InstructionClass(
        mask=0x9F7E0C00,
        value=0x0E780800,
        what="half-precision vector conversion or rounding (FCVTZS/FRINT*/FABS ... .8H/.4H)",
        feature="FEAT_FP16, ARMv8.2-A",
    ),
    InstructionClass(
        mask=0xDF60C400,
        value=0x5E400400,
        what="half-precision scalar SIMD arithmetic (FMULX/FCMEQ/FRECPS ... on H registers)",
        feature="FEAT_FP16, ARMv8.2-A",
    ),
    InstructionClass(
        mask=0xDF7E0C00,
        value=0x5E780800,
        what="half-precision scalar SIMD conversion (FCVTZS/FRECPE ... on H registers)",
        feature="FEAT_FP16, ARMv8.2-A",
    ),
    InstructionClass(
        mask=0xBFC0B400,
        value=0x0F001000,
        what="half-precision multiply-add by element (FMLA/FMLS .8H)",
        feature="FEAT_FP16, ARMv8.2-A",
    ),
    InstructionClass(
        mask=0x9FC0F400,
        value=0x0F009000,
        what="half-precision multiply by element (FMUL/FMULX .8H)",
        feature="FEAT_FP16, ARMv8.2-A",
    ),
    InstructionClass(
        mask=0x9FF8FC00,
        value=0x0F00FC00,
        what="half-precision vector immediate (FMOV .4H/.8H, #imm)",
        feature="FEAT_FP16, ARMv8.2-A",
    ),
    InstructionClass(
        mask=0xBFE0FC00,
        value=0x0E20EC00,
        what="half-precision widening multiply-add (FMLAL)",
        feature="FEAT_FHM, ARMv8.2-A",
    ),
    InstructionClass(
        mask=0xBFE0FC00,
        value=0x2E20CC00,
        what="half-precision widening multiply-add (FMLAL2)",
        feature="FEAT_FHM, ARMv8.2-A",
    ),
    InstructionClass(
        mask=0xBFE0FC00, value=0x0E809400, what="dot product (SDOT/UDOT)", feature="FEAT_DotProd, ARMv8.2-A"
    ),
    InstructionClass(
        mask=0xBFC0F400,
        value=0x0F80E000,
        what="dot product by element (SDOT/UDOT)",
        feature="FEAT_DotProd, ARMv8.2-A",
    ),
    InstructionClass(
        mask=0xBFE0FC00,
        value=0x0E809C00,
        what="mixed-sign dot product (USDOT)",
        feature="FEAT_I8MM, ARMv8.6-A",
    ),
    InstructionClass(
        mask=0xFFE0F400,
        value=0x4E80A400,
        what="int8 matrix multiply-accumulate (SMMLA/UMMLA/USMMLA)",
        feature="FEAT_I8MM, ARMv8.6-A",
    ),
    InstructionClass(
        mask=0xFFE0FC00,
        value=0x6E80A400,
        what="int8 matrix multiply-accumulate (UMMLA)",
        feature="FEAT_I8MM, ARMv8.6-A",
    ),
    InstructionClass(
        mask=0xFFE0FC00,
        value=0x6E40EC00,
        what="bfloat16 matrix multiply-accumulate (BFMMLA)",
        feature="FEAT_BF16, ARMv8.6-A",
    ),
    InstructionClass(
        mask=0xBFE0FC00, value=0x2E40FC00, what="bfloat16 dot product (BFDOT)", feature="FEAT_BF16, ARMv8.6-A"
    ),
    InstructionClass(
        mask=0xFFFFFC00, value=0x1E634000, what="bfloat16 conversion (BFCVT)", feature="FEAT_BF16, ARMv8.6-A"
    ),
    InstructionClass(
        mask=0xBF20F400,
        value=0x2E008400,
        what="rounding doubling multiply-accumulate (SQRDMLAH/SQRDMLSH)",
        feature="FEAT_RDM, ARMv8.1-A",
    ),
    InstructionClass(
        mask=0x3FA07C00,
        value=0x08A07C00,
        what="atomic compare-and-swap (CAS)",
        feature="FEAT_LSE, ARMv8.1-A",
    ),
    InstructionClass(
        mask=0xBFA07C00,
        value=0x08207C00,
        what="atomic compare-and-swap pair (CASP)",
        feature="FEAT_LSE, ARMv8.1-A",
    ),
    InstructionClass(
        mask=0x3FFFFC00,
        value=0x38BFC000,
        what="load-acquire RCpc (LDAPR)",
        feature="FEAT_LRCPC, ARMv8.3-A",
    ),
    InstructionClass(
        mask=0x3F200C00,
        value=0x38200000,
        what="atomic memory operation (LDADD/LDSET/SWP ...)",
        feature="FEAT_LSE, ARMv8.1-A",
    ),
    InstructionClass(
        mask=0x1E000000, value=0x04000000, what="scalable vector instruction (SVE)", feature="FEAT_SVE"
    ),
)


def classify(word: int) -> InstructionClass | None:
    """The extension an instruction word needs, or None when the table does not know it."""
    for entry in _BASE:
        if word & entry.mask == entry.value:
            return None
    for entry in _CLASSES:
        if word & entry.mask == entry.value:
            return entry
    return None


def describe(word: int) -> str:
    """``0x1ee02800: half-precision scalar floating point (...), FEAT_FP16, ARMv8.2-A``."""
    found = classify(word)
    if found is None:
        return f"{word:#010x} (an encoding this CPU does not implement)"
    return f"{word:#010x}: {found.what}, {found.feature}"


# -- what a -mcpu / -march lets the compiler assume ---------------------------------------------------
#
# Feature names are the kernel's /proc/cpuinfo ones (arch/arm64/kernel/cpuinfo.c). What each core
# implies follows GCC's aarch64-cores.def (architecture level + the extensions listed for the core)
# and aarch64-arches.def (what each architecture level adds). Extensions the compiler never emits
# on its own (SSBS, crypto unless asked for) are left out: a board without them still runs the code.
_ARCH_LEVELS: dict[str, frozenset[str]] = {
    "armv8-a": frozenset({"fp", "asimd"}),
    "armv8.1-a": frozenset({"fp", "asimd", "crc32", "atomics", "asimdrdm"}),
    "armv8.2-a": frozenset({"fp", "asimd", "crc32", "atomics", "asimdrdm"}),
}
_EXTENSIONS: dict[str, frozenset[str]] = {
    "crc": frozenset({"crc32"}),
    "lse": frozenset({"atomics"}),
    "rdma": frozenset({"asimdrdm"}),
    "fp16": frozenset({"fphp", "asimdhp"}),
    "dotprod": frozenset({"asimddp"}),
    "rcpc": frozenset({"lrcpc"}),
    "crypto": frozenset({"aes", "pmull", "sha1", "sha2"}),
    "aes": frozenset({"aes", "pmull"}),
    "sha2": frozenset({"sha1", "sha2"}),
    "i8mm": frozenset({"i8mm"}),
    "bf16": frozenset({"bf16"}),
    "sve": frozenset({"sve"}),
    "fp16fml": frozenset({"fphp", "asimdhp", "asimdfhm"}),
}
_V82_CORE = _ARCH_LEVELS["armv8.2-a"] | _EXTENSIONS["fp16"] | _EXTENSIONS["dotprod"] | _EXTENSIONS["rcpc"]
CORE_FEATURES: dict[str, frozenset[str]] = {
    "cortex-a53": _ARCH_LEVELS["armv8-a"] | _EXTENSIONS["crc"],
    "cortex-a57": _ARCH_LEVELS["armv8-a"] | _EXTENSIONS["crc"],
    "cortex-a72": _ARCH_LEVELS["armv8-a"] | _EXTENSIONS["crc"],
    "cortex-a73": _ARCH_LEVELS["armv8-a"] | _EXTENSIONS["crc"],
    "cortex-a55": _V82_CORE,
    "cortex-a75": _V82_CORE,
    "cortex-a76": _V82_CORE,
    "cortex-a77": _V82_CORE,
    "cortex-a78": _V82_CORE,
    "cortex-a78ae": _V82_CORE,
    "neoverse-n1": _V82_CORE,
}


@dataclass(frozen=True, kw_only=True)
class FeatureNeed:
    """The CPU features a build's flags let the compiler use, and the flag that says so."""

    flag: str  # "-mcpu=cortex-a76"
    features: frozenset[str]


def features_for_flags(flags: tuple[str, ...] | list[str]) -> FeatureNeed | None:
    """What a build's ``-march`` or ``-mcpu`` lets the code use (the last of each counts, as in GCC;
    with both, GCC takes the architecture from ``-march`` and only tunes for ``-mcpu``). None when
    neither is set or the value is not in the tables (then nothing can be checked)."""
    last: dict[str, str] = {}
    for flag in flags:
        option, _, value = flag.partition("=")
        if option in ("-mcpu", "-march") and value:
            last[option] = value
    if not last:
        return None
    option = "-march" if "-march" in last else "-mcpu"
    base, *extensions = last[option].split("+")
    known = (_ARCH_LEVELS if option == "-march" else CORE_FEATURES).get(base)
    if known is None:
        return None
    wanted = set(known)
    for extension in extensions:
        if extension.startswith("no"):
            wanted -= _EXTENSIONS.get(extension[2:], frozenset())
        else:
            wanted |= _EXTENSIONS.get(extension, frozenset())
    return FeatureNeed(flag=f"{option}={last[option]}", features=frozenset(wanted))


def parse_cpuinfo_features(text: str) -> tuple[str, ...]:
    """The ``Features`` of /proc/cpuinfo (the first CPU's; big.LITTLE boards share the set)."""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "Features":
            return tuple(value.split())
    return ()
