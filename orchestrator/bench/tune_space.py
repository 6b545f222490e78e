"""`orch tune`'s candidate space: what is searched on a board once its releases are known, and the
BenchPlan of each rung. Pure: no SSH.

**The space** (per board): the deployed variants (``--variant``, or every variant with a release of
the current release's ORT version), x intra-op threads (1, 2 and onnxruntime's default, one per
physical core, or ``--threads``) x graph optimisation (disable, basic, all, or ``--opt-level``) x
execution provider (cpu, plus xnnpack where the release's onnxruntime listed it when deploy
verified it, or ``--ep``) x fp32 and, with ``--quantize``, int8. The default settings of each
variant (threads default, opt all, cpu, fp32) are always a candidate, and so are stock's when a
stock release of that ORT version is deployed: the result is compared with them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from orchestrator.bench.plan import (
    OPT_LEVELS,
    QUANTS,
    BenchPlan,
    Combination,
    OptLevel,
    Quant,
    QuantizeMode,
    ReleaseRef,
    Setting,
    checked,
    quant_label,
)
from orchestrator.bench.records import BoardRecord
from orchestrator.bench.series import SeriesKey, series_of
from orchestrator.bench.steps import pick_releases
from orchestrator.errors import BenchError

DEFAULT_THREADS = (1, 2, 0)  # 0 = onnxruntime's default: one thread per physical core
DEFAULT_OPT_LEVELS: tuple[OptLevel, ...] = ("disable", "basic", "all")
# What bench_agent.py asks onnxruntime for, by --ep name (to read a release's verified providers).
PROVIDERS = {
    "cpu": "CPUExecutionProvider",
    "xnnpack": "XnnpackExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
}


def default_of(variant: str) -> Combination:
    """A variant's default settings: threads default, opt all, cpu, fp32."""
    return Combination(variant=variant)


def offers(release: ReleaseRef, ep: str) -> bool | None:
    """Whether the release's onnxruntime listed the provider when it was verified (None: not known)."""
    if not release.providers:
        return None
    return PROVIDERS.get(ep, ep) in release.providers


@dataclass(frozen=True, kw_only=True)
class Space:
    """What is searched, before a board's releases are known."""

    threads: tuple[int, ...] = DEFAULT_THREADS
    opt_levels: tuple[OptLevel, ...] = DEFAULT_OPT_LEVELS
    eps: tuple[str, ...] = ()  # empty: cpu, and xnnpack where the release offers it
    inter_threads: int = 0
    int8: Quant | None = None  # the int8 series' quant label (--quantize), None: fp32 only

    def eps_for(self, release: ReleaseRef) -> tuple[str, ...]:
        if self.eps:  # as asked, less what the release is known not to have
            return tuple(ep for ep in self.eps if offers(release, ep) is not False)
        return ("cpu", "xnnpack") if offers(release, "xnnpack") else ("cpu",)

    def settings(self, eps: Sequence[str]) -> tuple[Setting, ...]:
        return tuple(
            Setting(ep=ep, opt_level=level, intra_threads=threads, inter_threads=self.inter_threads)
            for ep in eps
            for level in self.opt_levels
            for threads in self.threads
        )

    def for_variant(self, variant: str, eps: Sequence[str]) -> tuple[Combination, ...]:
        """A variant's candidates: its default settings first, then the cross product (fp32, then int8)."""
        found = [default_of(variant)]
        quants: tuple[Quant, ...] = ("fp32", self.int8) if self.int8 else ("fp32",)
        for quant in quants:
            found += [Combination(variant=variant, quant=quant, setting=s) for s in self.settings(eps)]
        return tuple(dict.fromkeys(found))

    def candidates(self, releases: Sequence[ReleaseRef]) -> tuple[Combination, ...]:
        """Every chosen release's candidates, release by release."""
        found = [c for release in releases for c in self.for_variant(release.variant, self.eps_for(release))]
        return tuple(dict.fromkeys(found))


def space_from_options(
    *,
    threads: Sequence[int],
    opt_levels: Sequence[OptLevel],
    eps: Sequence[str],
    inter_threads: int,
    quantize: QuantizeMode | None,
) -> Space:
    return Space(
        threads=tuple(dict.fromkeys(threads)) or DEFAULT_THREADS,
        opt_levels=tuple(dict.fromkeys(opt_levels)) or DEFAULT_OPT_LEVELS,
        eps=tuple(dict.fromkeys(eps)),
        inter_threads=inter_threads,
        int8=quant_label(quantize) if quantize else None,
    )


def choose_releases(plan: BenchPlan, releases: Sequence[ReleaseRef], board: str) -> tuple[ReleaseRef, ...]:
    """The releases tuned on a board: those of ``--variant`` (chosen as bench chooses them), else every
    variant's release of the ORT version asked for or of the current release's; plus stock's release of
    that version as the reference when one is deployed."""
    if plan.variants:
        chosen = list(pick_releases(plan, releases, board))
    else:
        version = plan.ort_version_for("")
        if not version:
            version = pick_releases(plan, releases, board)[0].ort_version  # the current release
        current = [r.variant for r in releases if r.current and r.ort_version == version]
        variants = list(
            dict.fromkeys([*current, *sorted(r.variant for r in releases if r.ort_version == version)])
        )
        if not variants:
            raise BenchError(
                f"{board}: no release of ORT {version} is deployed",
                hint=f"orch deploy --host {board} --ort-version {version}",
            )
        chosen = list(
            pick_releases(
                replace(plan, variants=tuple(variants), ort_versions=(("", version),)), releases, board
            )
        )
    if not any(release.variant == "stock" for release in chosen):
        version = chosen[0].ort_version
        if any(r.variant == "stock" and r.ort_version == version for r in releases):
            stock = replace(plan, variants=("stock",), ort_versions=(("", version),))
            chosen += pick_releases(stock, releases, board)
    return tuple(chosen)


def stock_note(releases: Sequence[ReleaseRef], chosen: Sequence[ReleaseRef]) -> str:
    """'' when stock is among the tuned releases, else why there is no comparison with stock."""
    if any(release.variant == "stock" for release in chosen):
        return ""
    others = sorted({r.ort_version for r in releases if r.variant == "stock"})
    if not others:
        return "no stock release deployed"
    version = chosen[0].ort_version if chosen else "?"
    return f"no stock release of ORT {version} deployed (stock {', '.join(others)} is: another release)"


def pinned(plan: BenchPlan, chosen: Sequence[ReleaseRef]) -> BenchPlan:
    """The plan with the board's chosen releases fixed: every rung measures exactly these."""
    return replace(
        plan,
        variants=tuple(release.variant for release in chosen),
        ort_versions=tuple((release.variant, release.ort_version) for release in chosen),
    )


def rung_plan(base: BenchPlan, candidates: Sequence[Combination], runs: int) -> BenchPlan:
    """The BenchPlan of one rung: ``runs`` interleaved rounds of just these candidates."""
    variants = tuple(v for v in base.variants if any(c.variant == v for c in candidates))
    settings = tuple(dict.fromkeys(c.setting for c in candidates))
    int8 = any(c.quant != "fp32" for c in candidates)
    return replace(
        base,
        variants=variants,
        settings=settings,
        quantize=base.quantize if int8 else None,
        rounds=runs,
        only=tuple(candidates),
    )


def candidate_of(key: SeriesKey) -> Combination:
    setting = Setting(
        ep=key.ep,
        opt_level=checked(key.opt_level, OPT_LEVELS, "opt_level"),
        intra_threads=key.intra_threads,
        inter_threads=key.inter_threads,
    )
    return Combination(variant=key.variant, quant=checked(key.quant, QUANTS, "quant"), setting=setting)


def runs_of(board: BoardRecord) -> dict[Combination, tuple[tuple[float, ...], ...]]:
    """Every candidate's runs so far in a board record (all rungs together)."""
    return {candidate_of(series.key): series.runs for series in series_of(board)}
