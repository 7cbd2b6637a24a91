"""Budgets: how hard a run looks, stated as the deviation it promises to detect.

A budget fixes the family-wise false-positive probability of the whole run (``alpha``) and the
total-variation deviation ``tv`` that every statistical check detects with probability ``power``.
Sample sizes follow from those two numbers (noncentral chi-square), so a larger budget is a
smaller ``tv``, never an arbitrary sample count.  A check that cannot reach ``ceiling_tv`` (its
sampler too slow, its cells too many) is inconclusive, never a pass.
"""

from __future__ import annotations

import dataclasses

from .errors import UsageError

__all__ = [
    "BUDGETS",
    "COVERAGE_TV",
    "MAX_SAMPLES_CAP",
    "SHAPE_VOLUME_CAP",
    "Budget",
    "SampleSize",
    "budget_for_tv",
    "budget_for_calls",
    "decision_cap",
    "depth_for",
    "get_budget",
    "resolve_budget",
    "sample_size",
]


@dataclasses.dataclass(frozen=True)
class Budget:
    """How much evidence a run gathers.

    Attributes:
        name: ``quick``, ``standard``, ``thorough`` or a custom name.
        alpha: family-wise false-positive probability of the whole run.
        tv: total-variation deviation each statistical check detects with ``power``.
        power: probability of detecting a deviation of ``tv`` (both stages together).
        examples: Hypothesis examples each searching check tries.
        screen_alpha: level of each example's screening test (false alarms are re-tested).
        max_samples: most samples one test may draw.
        cap_per_decision: ``max_samples`` caps each decision of a check (a ``--tv`` budget, so
            that every decision is sized for ``tv``: a check of many decisions costs many caps);
            otherwise a check's decisions share one cap (a preset's cost stays fixed).
        validity_examples: examples of the exact robustness and uniform-driven checks.
        timeout: seconds one sampler call may take before it counts as a hang.
        shape_tv: TV the ``shapes`` family's checks are sized for where the volume affords it.
        shape_volume: input elements (rows x (2K+1) x V) one production shape may give the sampler:
            its cost grows with V, so the largest vocabularies get fewer rows and a coarser claim.
        shape_min_rows: fewest rows a production shape gets, whatever its volume affords (so the
            largest vocabularies keep a claim under the ceiling).
        shape_max_vocab: largest vocabulary the ``shapes`` family gives the sampler at this budget
            (larger shapes are reported as skipped, with this reason).
        shape_full_domain: also test the whole law of one shape, every (accepted, token) cell, with
            the identity test of :func:`specverify.stats.identity_test` (samples ~ sqrt(cells)/eps^2).
        shape_ceiling_tv: above this detectable TV a ``shapes`` check is inconclusive (its own
            ceiling: at the largest V a CPU budget affords far fewer rows than at small V).
        depth_examples: searching checks first screen their ``examples`` at ``coverage_tv``, then
            test this many of the largest cases screened again at ``tv`` (0: every example at
            ``tv``, as the presets do); see docs/statistics.md, "Depth at a small TV".
        coverage_tv: the TV the coverage screens are sized for when ``depth_examples`` is set.
    """

    name: str
    alpha: float = 1e-4
    tv: float = 0.01
    power: float = 0.99
    examples: int = 20
    screen_alpha: float = 1e-4
    max_samples: int = 2_000_000
    cap_per_decision: bool = False
    validity_examples: int = 60
    timeout: float = 120.0
    shape_tv: float = 0.05
    shape_volume: int = 2**28
    shape_min_rows: int = 512
    shape_max_vocab: int = 262_144
    shape_full_domain: bool = False
    shape_ceiling_tv: float = 0.5
    depth_examples: int = 0
    coverage_tv: float | None = None
    #: How the budget was derived (a custom ``--tv`` one: from which preset, what was capped); empty for a preset.
    derivation: str = ""
    #: The preset a custom ``--tv`` budget's settings come from (what repeats it: ``--budget BASE --tv EPS``); empty
    #: for a preset.
    base: str = ""

    @property
    def ceiling_tv(self) -> float:
        """Above this detectable TV a check is inconclusive rather than passed."""
        return 2.0 * self.tv

    @property
    def stage_power(self) -> float:
        """Power of each of the two stages, so that both together reach :attr:`power`."""
        return self.power**0.5

    def decision_cap(self, decisions: int = 1) -> int:
        """Most samples each of a check's ``decisions`` may draw (see ``cap_per_decision``)."""
        return decision_cap(self.max_samples, decisions, per_decision=self.cap_per_decision)

    def volume_cap(self, row_elements: int) -> int:
        """Most rows a production shape of ``row_elements`` input elements a row may draw: what
        ``shape_volume`` affords, and never fewer than ``shape_min_rows``."""
        return max(self.shape_min_rows, self.shape_volume // row_elements)

    def sample_size(
        self,
        df: int,
        alpha: float,
        *,
        tv: float | None = None,
        power: float | None = None,
        decisions: int = 1,
        cap: int | None = None,
        factor: int = 1,
        floor: int = 1,
    ) -> SampleSize:
        """:func:`sample_size` at this budget: sized for its ``tv`` with its ``power`` unless
        given, under the cap of one of ``decisions`` (:meth:`decision_cap`) unless ``cap`` is given."""
        return sample_size(
            self.tv if tv is None else tv,
            df,
            alpha,
            self.power if power is None else power,
            self.decision_cap(decisions) if cap is None else cap,
            factor=factor,
            floor=floor,
        )

    def with_(self, **changes: object) -> Budget:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


BUDGETS = {
    "quick": Budget(
        "quick",
        tv=0.05,
        examples=6,
        validity_examples=20,
        max_samples=200_000,
        shape_tv=0.1,
        shape_volume=2**26,
        shape_min_rows=512,
        shape_max_vocab=65_537,
    ),
    "standard": Budget("standard", tv=0.01, examples=20, validity_examples=60),
    "thorough": Budget(
        "thorough",
        tv=0.003,
        examples=60,
        validity_examples=200,
        max_samples=20_000_000,
        shape_tv=0.02,
        shape_volume=2**32,
        shape_full_domain=True,
        shape_min_rows=2_048,
    ),
}


#: The TV the quick preset sizes its decisions for on a sampler called one row at a time.
ONE_ROW_QUICK_TV = 0.1


def budget_for_calls(budget: Budget, batched: bool) -> Budget:
    """The budget a run gives a sampler: the same, but for the quick preset on a sampler called one
    row at a time (``batched=False``), whose every row is a Python call: its decisions are sized for
    TV :data:`ONE_ROW_QUICK_TV`, not 0.05, and its production shapes get a quarter of the volume (a
    quarter of the rows each, so quick stays about a minute at 20,000 rows a second); the run says
    so (``derivation``; docs/statistics.md).  ``--budget quick --tv 0.05`` keeps quick's sizes."""
    if batched or budget.name != "quick" or budget.base or budget.tv >= ONE_ROW_QUICK_TV:
        return budget
    volume = budget.shape_volume // 4
    return budget.with_(
        tv=ONE_ROW_QUICK_TV,
        shape_volume=volume,
        derivation=f"quick on a sampler called one row at a time (batched=False): every statistical decision "
        f"sized for TV {ONE_ROW_QUICK_TV:g}, not {budget.tv:g}, and a production shape given {volume:,} input "
        f"elements, not {budget.shape_volume:,} (a quarter of the rows; the large vocabularies state the coarser TV "
        f"they reach); --budget quick --tv {budget.tv:g} keeps quick's sizes",
    )


def get_budget(name: str) -> Budget:
    try:
        return BUDGETS[name]
    except KeyError:
        raise UsageError(f"unknown budget {name!r}; choose one of {', '.join(BUDGETS)}") from None


#: Most samples one test of a ``--tv`` budget may draw: beyond it a decision is capped (and its
#: reach stated as the TV it actually reaches), never silently sized for less.
MAX_SAMPLES_CAP = 2_000_000_000
#: Most input elements one production shape of a ``--tv`` budget may give the sampler.
SHAPE_VOLUME_CAP = 2**36


def decision_cap(max_samples: int, decisions: int = 1, *, per_decision: bool = False) -> int:
    """Most samples each of ``decisions`` may draw: ``max_samples`` each where the cap is per
    decision (a ``--tv`` budget), else their share of one ``max_samples``."""
    return max_samples if per_decision else max(1, max_samples // max(1, decisions))


@dataclasses.dataclass(frozen=True)
class SampleSize:
    """How many samples one statistical decision draws: ``needed``, what its test needs to detect
    the TV it is sized for, and ``samples``, what it draws under its cap (a capped decision states
    the TV it actually reaches)."""

    needed: int
    samples: int

    @property
    def capped(self) -> bool:
        return self.samples < self.needed


def sample_size(
    tv: float, df: int, alpha: float, power: float, cap: int, *, factor: int = 1, floor: int = 1
) -> SampleSize:
    """The one rule for a statistical decision's sample: ``factor`` times what a level-``alpha``
    test with ``df`` (at least 1) needs to detect any deviation of ``tv`` with ``power``
    (:func:`specverify.stats.samples_needed`), at most ``cap`` and at least ``floor``.  Every check
    sizes its decisions here (through :meth:`Budget.sample_size` where it holds a budget), so the
    plan's rehearsal, which runs the checks' own code, counts what this rule gives."""
    from .stats import samples_needed  # scipy: imported where a decision is sized, not with the presets

    needed = factor * samples_needed(tv, max(df, 1), alpha, power)
    return SampleSize(needed, max(floor, min(needed, cap)))


def _nearest_preset(tv: float) -> Budget:
    """The preset whose TV is nearest ``tv`` on a log scale (its other settings are kept)."""
    import math

    return min(BUDGETS.values(), key=lambda b: abs(math.log(b.tv / tv)))


def budget_for_tv(tv: float, base: Budget | str | None = None) -> Budget:
    """A custom budget sized to detect TV ``tv``: the nearest preset's (or ``base``'s) other
    settings, with ``max_samples``, ``shape_tv`` and ``shape_volume`` scaled by the power
    analysis (samples grow as ``1/tv**2`` at a fixed df) and ``max_samples`` the cap of each
    decision (not shared by a check's decisions, as a preset's is), capped at :data:`MAX_SAMPLES_CAP` and
    :data:`SHAPE_VOLUME_CAP`; a capped decision states the TV it actually reaches, as any other.

    Raises:
        UsageError: ``tv`` outside (0, 1).
    """
    if not isinstance(tv, (int, float)) or isinstance(tv, bool) or not 0 < tv < 1:
        raise UsageError(f"--tv must lie in (0, 1), got {tv!r}")
    preset = get_budget(base) if isinstance(base, str) else base or _nearest_preset(tv)
    scale = (preset.tv / tv) ** 2
    wanted_samples = int(preset.max_samples * scale)
    wanted_volume = int(preset.shape_volume * scale)
    max_samples = max(1_000, min(wanted_samples, MAX_SAMPLES_CAP))
    volume = max(2**20, min(wanted_volume, SHAPE_VOLUME_CAP))
    shape_tv = min(0.5, preset.shape_tv * tv / preset.tv)
    capped = [f"max_samples {wanted_samples:,} capped at {max_samples:,}"] if wanted_samples > MAX_SAMPLES_CAP else []
    if wanted_volume > SHAPE_VOLUME_CAP:
        capped.append(f"shape_volume {wanted_volume:,} capped at {volume:,}")
    derivation = (
        f"TV {tv:g} on demand: the {preset.name} preset's settings, max_samples, shape_tv and shape_volume "
        f"scaled by ({preset.tv:g}/{tv:g})^2 = {scale:.3g}, max_samples the cap of each decision"
        + (f"; {', '.join(capped)}" if capped else "")
    )
    depth, coverage = depth_for(tv, preset.examples)
    if depth:
        derivation += (
            f"; searching checks screen their {preset.examples} examples at TV {coverage:g} and test the "
            f"{depth} largest again at TV {tv:g} (the depth tier)"
        )
        if volume > preset.shape_volume:  # the production shapes' large V cannot reach EPS at any affordable volume
            volume = preset.shape_volume
            derivation += (
                f"; shape_volume kept at the {preset.name} preset's {volume:,} (large V keeps its cap and states the "
                "TV it reaches)"
            )
    return preset.with_(
        name=f"tv={tv:g}",
        tv=float(tv),
        max_samples=max_samples,
        cap_per_decision=True,
        shape_tv=shape_tv,
        shape_volume=volume,
        shape_ceiling_tv=max(preset.shape_ceiling_tv, shape_tv),
        derivation=derivation,
        depth_examples=depth,
        coverage_tv=coverage,
        base=preset.name,
    )


#: Below this TV a ``--tv`` budget's searching checks are tiered: coverage at this TV, depth at the TV asked.
COVERAGE_TV = 0.01


def depth_for(tv: float, examples: int) -> tuple[int, float | None]:
    """How many searching examples a ``--tv`` budget tests at ``tv`` itself, and the TV the others
    are screened at: ``(0, None)`` (every example at ``tv``) down to :data:`COVERAGE_TV`; below it
    as many deep cases as cost about what the ``examples`` coverage screens at
    :data:`COVERAGE_TV` cost (samples grow as ``1/tv**2``), and at least one."""
    if tv >= COVERAGE_TV:
        return 0, None
    return max(1, int(examples * (tv / COVERAGE_TV) ** 2)), COVERAGE_TV


def resolve_budget(
    budget: Budget | str = "standard",
    *,
    tv: float | None = None,
    alpha: float | None = None,
    power: float | None = None,
) -> Budget:
    """The budget a run uses: a preset by name (or a :class:`Budget`), or with ``tv`` one sized for
    it from that preset's settings when a preset other than the default is named, else from the
    nearest preset; ``alpha`` overrides the family-wise level, ``power`` the probability that each
    statistical check detects the budget's TV (every sample size follows from it: a lower power
    draws fewer samples, and every claim states the power it was made at).

    Raises:
        UsageError: ``tv``, ``alpha`` or ``power`` outside (0, 1).
    """
    for flag, value in (("--alpha", alpha), ("--power", power)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1):
            raise UsageError(f"{flag} must lie in (0, 1), got {value!r}")
    chosen = get_budget(budget) if isinstance(budget, str) else budget
    if tv is not None:
        chosen = budget_for_tv(tv, None if isinstance(budget, str) and budget == "standard" else chosen)
    if alpha is not None:
        chosen = chosen.with_(alpha=alpha)
    if power is not None:
        chosen = chosen.with_(power=float(power))
    return chosen
