"""The schema of a check's ``evidence``: every key a check, the runner or the calling layer writes.

:attr:`CheckResult.evidence <specverify.CheckResult.evidence>` is an :class:`Evidence`, a
``TypedDict``: a plain ``dict`` at run time (so the JSON is the dict as it is), whose keys mypy
checks where it is written and where it is read (the report, the plugin, the CLI, the verdict).
Every key is optional: a check records what applies to it, a reader shows what it finds.  Records
nested in it that a reader looks into have a ``TypedDict`` of their own.  docs/report.md points
here as the schema of the JSON's ``evidence``.

Imports nothing but ``typing`` (the report renders JSON without torch or Hypothesis).
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any, Protocol, TypedDict

__all__ = [
    "AcceptedShapeRecord",
    "AdjacentRows",
    "CallShape",
    "CaseRecord",
    "DepthRecord",
    "EmittedToken",
    "EventSize",
    "Evidence",
    "FirstMismatch",
    "FutilityRecord",
    "Neighbours",
    "PositionPValue",
    "ShapeRecord",
    "ShrinkRecord",
    "StepOutput",
    "TVRecord",
    "TreeCase",
    "UnconfirmedAlarm",
    "Warps",
    "tv_record",
    "unknown_keys",
]


class TVRecord(TypedDict):
    """Total variation between the observed and the exact law (``stats.TVEstimate`` as JSON)."""

    estimate: float  # the plug-in distance with its typical noise removed in quadrature, >= 0
    low: float  # lower bound of the ``confidence`` interval
    high: float  # upper bound of the ``confidence`` interval
    confidence: float  # coverage of the interval, e.g. 0.95
    plug_in: float  # the raw distance between the empirical and the exact laws


class _TVLike(Protocol):
    @property
    def estimate(self) -> float: ...
    @property
    def low(self) -> float: ...
    @property
    def high(self) -> float: ...
    @property
    def confidence(self) -> float: ...
    @property
    def plug_in(self) -> float: ...


def tv_record(tv: _TVLike) -> TVRecord:
    """A :class:`~specverify.stats.TVEstimate` as its evidence record (the fields in their order)."""
    return TVRecord(estimate=tv.estimate, low=tv.low, high=tv.high, confidence=tv.confidence, plug_in=tv.plug_in)


class EventSize(TypedDict):
    """A law finding's two sizes: given the event its case conditions on, and in the emitted law
    (``specverify.checks._event``; docs/statistics.md, "Two sizes of a law finding")."""

    event: str  # the event in words: a draft as rare as the case's rarest forced one, at its position
    probability: float  # P(event) under the case's own draft rows (0.0 where it underflows a float)
    log10_probability: float  # log10 P(event), exact where ``probability`` underflows (-inf: impossible)
    tv_given: float  # the TV of the law given the event (the estimate)
    tv_bound: float  # P(event) * TV given the event <= P(event): a bound on the emitted law's TV
    log10_tv_bound: float  # log10 of the bound
    resolution: float  # below this bound the finding is a float-edge finding, never a verdict


class CaseRecord(TypedDict, total=False):
    """A case as ``StepCase.describe()`` / ``ModelCase.describe()`` write it, or a batch of them."""

    kind: str  # "step" (explicit rows) or "model" (a model; drafts drawn by the harness)
    label: str  # the case kind, e.g. "random", "disjoint", "seed-chain"
    precision: str  # dtype the rows were passed in, e.g. "float64"
    K: int  # drafts per step
    V: int  # vocabulary size
    target_probs: list[Any]  # step: [K+1, V] target rows
    draft_probs: list[Any]  # step: [K, V] draft rows
    draft_tokens: list[int]  # step: [K] the drafts
    model: str  # model: its class name
    target_table: list[Any]  # ChainModel: [V, V] target transition table
    draft_table: list[Any]  # ChainModel: [V, V] draft transition table
    context: list[int]  # ChainModel: the context tokens
    target_tables: list[Any]  # TableModel: per position, the target's table
    draft_tables: list[Any]  # TableModel: per position, the draft's table
    cases: list[CaseRecord]  # a batch of cases (robustness, batched fit): each as above


class CallShape(TypedDict):
    """The call a contract check failed on."""

    B: int  # batch rows
    K: int  # drafts per row
    V: int  # vocabulary size


class StepOutput(TypedDict):
    """One row of a sampler's output."""

    tokens: list[int]  # [K+1] emitted tokens (padded past the accepted ones)
    num_accepted: int  # accepted drafts


class FirstMismatch(TypedDict):
    """The first grid point of an exact check where the sampler's output is not the canonical one."""

    uniforms: list[float]  # [K+1] the coins of that row
    expected: StepOutput  # the canonical algorithm's output for those coins
    got: StepOutput  # the sampler's output
    mismatched_volume: float  # fraction of the uniforms' cube where the outputs differ


class EmittedToken(TypedDict):
    """The token a failure message names."""

    token: int
    position: int


class Warps(TypedDict):
    """A logits sampler's failing case: the law it had to preserve beside the raw target's law."""

    row: int  # the batch row shown
    params: dict[str, Any]  # that row's sampling parameters (temperature, top_k, top_p, ...)
    warped: list[list[float]]  # [K+1, V] the warped target law (what must be preserved)
    unwarped: list[list[float]]  # [K+1, V] softmax of the same logits at temperature 1, no cuts
    emitted: EmittedToken | None  # the token the failure names, if it names one


class DeclaredWarpRecord(TypedDict):
    """The warp a sampler is judged by (specverify._warps.declared; a loop run's ``run["warp"]``)."""

    name: str
    declared: bool  # False: no warp declared, judged by transformers'
    preset: str | None  # the preset's name, None for a declared callable


class WarpDifference(TypedDict):
    """A warp against one preset on the separating cases (specverify._warps.separating)."""

    preset: str
    tv: float  # the largest TV between the two warps' laws over the cases
    case: str | None  # the first case that separates them (None: the same law on every case)


class PositionPValue(TypedDict):
    """One position's test in the per-position law of the completed sequence."""

    position: int  # 1..K
    pvalue: float


class UnconfirmedAlarm(TypedDict):
    """A screen alarm that fresh samples did not confirm."""

    example: CaseRecord  # the case that raised it
    confirm_pvalue: float | None  # the confirmation's p-value (None: the decision had no test there)


class DepthRecord(TypedDict):
    """A search's depth tier at a small TV (docs/statistics.md, "Depth at a small TV"): every case
    screened at a coarse TV, the largest tested again at the budget's TV, which the claim is made on."""

    coverage_tv: float  # the TV the coverage screens were sized for
    coverage_examples: int  # cases screened at it
    coverage_claim: float | None  # the TV those screens detect (the largest over them and the decisions)
    coverage_reach: str | None  # what they gave the sampler (V and K ranges)
    deep_examples: int  # cases tested again at the budget's TV
    deep_claim: float | None  # the TV the deep tests detect: the decision's claim
    deep_samples: int  # samples the deep tests drew
    deep_stopped: int  # deep tests a futility look ended early (a passing case, at a --tv budget)


class ShrinkRecord(TypedDict):
    """How far a search shrank its failing case: new cases screened after the first alarm, against
    the count that bounds one round (a count, not a clock: the same case on any machine)."""

    screens: int  # new cases screened to shrink, every round together
    limit: int  # the most one round may screen
    cut: bool  # a round reached the limit: the case is the smallest found within it


class AdjacentRows(TypedDict):
    """Independence of adjacent batch rows (contract.rows-independent)."""

    pvalue: float
    cramers_v: float  # effect size of the dependence
    pairs: int  # row pairs tested


class Neighbours(TypedDict):
    """A row's law beside two different neighbours (contract.rows-independent)."""

    pvalue: float
    observed: list[list[int]]  # [2, cells] the row's outcome counts beside each neighbour


class ShapeRecord(TypedDict, total=False):
    """One shape (and position) of the shapes family's target-law test."""

    V: int  # vocabulary size
    K: int  # drafts per step
    position: int  # the completed token's position (0 is the first token)
    rows: int  # rows run at this shape
    rows_needed: int  # rows the budget's sized_for_tv needed (more than ``rows`` when capped)
    test: str  # goodness-of-fit method, e.g. "g-test"
    df: int  # degrees of freedom
    pvalue: float  # the test's p-value at this position
    min_detectable_tv: float  # smallest TV detected with the budget's power
    cells: list[str]  # labels of the lumped cells (active tokens and a tail)
    observed: list[int]  # [cells] counts
    expected: list[float]  # [cells] expected counts
    where: str  # the cell that deviates most, in words
    reduced: str  # how the sampler's declared limits reduced the shape


class AcceptedShapeRecord(TypedDict):
    """One shape of the shapes family's acceptance test."""

    V: int
    K: int
    rows: int
    expected_accepted: float  # the canonical mean of accepted drafts per call
    observed_accepted: float  # the sampler's mean
    min_detectable_drop: float  # smallest drop in the mean detected with the budget's power
    ceiling_drop: float  # the largest drop this budget allows (K times the ceiling TV)
    pvalue_low: float  # one-sided p-value: fewer accepted than canonical
    pvalue_high: float  # one-sided p-value: more accepted than canonical


class TreeCase(TypedDict, total=False):
    """One tree for the report's drawing (``report._tree_svg``)."""

    parents: list[int]  # [nodes] parent of each node (-1 at the root)
    tokens: list[int]  # [nodes] the token at each node
    vocab: int  # vocabulary size
    path: list[int]  # the failing output's path of nodes (a fault's)
    token: int  # the failing output's emitted token
    breaks_at: int | None  # the first node of that path the target forbids
    ends_observed: list[int]  # [nodes] how often paths ended at each node
    ends_expected: list[float]  # [nodes] how often the exact law expects that
    rows: list[dict[str, Any]]  # the nodes involved, root first: {"node", "target" [V], "draft" [V] or None} (V <= 64)
    rows_of: str  # which nodes those are, in words
    smallest_difference: float | None  # the smallest nonzero |target - draft| over those rows
    mechanism: (
        str  # how the case fails, in words (an accepted child, the residual after a node, the bonus after a leaf)
    )


class FutilityRecord(TypedDict):
    """An experiment's futility looks (:class:`~specverify.stats.FutilityPlan`)."""

    looks: list[int]  # samples a decision has at each look
    final: int  # samples of a decision no look stopped
    stopped_at: int | None  # samples a decision had where a look stopped every decision (None: none did)


class LargestGap(TypedDict):
    """Where an engine's two modes differ most (``engine.law``)."""

    position: int  # the generated position whose token's law is furthest apart
    token: int  # the token (the vocabulary size: an end) whose rate differs most there
    on: float  # its rate with speculation on
    off: float  # its rate with speculation off
    tv: float  # the TV between the two modes' laws of that position
    what: str  # the same in words


class EngineLooks(TypedDict):
    """An engine law check's looks at its growing sample."""

    at: list[int]  # generations a mode at each look
    stopped_at: int  # generations a mode when it stopped


class ModeThroughput(TypedDict):
    """One mode's speed as a check called the engine."""

    tokens: int  # tokens generated (an end's padding not counted)
    seconds: float  # seconds of the calls that generated them
    per_second: float  # tokens a second


class Throughput(TypedDict, total=False):
    """Each mode's speed as a check called the engine (a mode it never called: absent)."""

    on: ModeThroughput  # speculation on
    off: ModeThroughput  # speculation off


class Evidence(TypedDict, total=False):
    """What a person needs to believe a result: every key any check, the runner or the calling
    layer writes (a check writes those that apply to it; shapes in brackets).  In the JSON a float
    that is not finite (an impossible outcome's statistic, a ratio to zero, an undetectable drop)
    is ``null``."""

    # --- a fault: the sampler raised, hung, crashed or broke its contract ----------------------
    violation: str  # the contract rule broken ("output", "raised", "hang", "crashed", a rule name)
    traceback: str  # the sampler's traceback (a fault), or the harness's (an "error" result)
    sampler_output: str  # the sampler process's last output (stdout and stderr), up to 16 KiB
    last_output: str  # trees: the sampler's output that broke the contract, its first rows
    failing_row: int  # trees: the batch row that broke the contract
    failing_path: list[int]  # trees: that row's path of accepted nodes
    failing_token: int  # trees: that row's emitted token
    shape: CallShape  # contract: the call that failed
    coins: str  # trees: what the failing call was given for coins ("all 0" uniforms, or "generator")

    # --- the case and how to reproduce it ------------------------------------------------------
    minimal_example: CaseRecord  # the smallest failing case (a batch: {"cases": [...]})
    shrink: ShrinkRecord  # how far the search shrank it (bounded in screens)
    model: CaseRecord  # the model a model-based check ran on
    decided_on: CaseRecord  # the case another decision of the same search failed on, this one decided there
    repro: str  # Python that reproduces the failure on its own
    tree: str  # trees: which tree the check ran on
    tree_case: TreeCase  # trees: the failing tree case, for the drawing
    warps: Warps  # a logits sampler's failure: its case's warped and raw laws (added by the runner)
    explained_by: str  # undeclared: the preset whose law fits the counts (or allows the output) transformers' does not
    convention: (
        str  # history: the convention for the tokens counted whose exact law fits the counts, the declared's not
    )
    convention_pvalue: float  # history: the Bonferroni-corrected p-value of the counts against that convention's law

    # --- the search and its share of the run's false-alarm budget ------------------------------
    examples: int  # cases screened by the search
    cases_screened: int  # trees: cases the search screened before its fault
    screen_alpha: float  # level of one screen
    confirm_alpha: float  # level a confirmation is held to
    alpha_share: float  # what screen and confirmation together spend of the run's budget
    smallest_screen_pvalue: float  # the smallest p-value among the screens
    unconfirmed_alarms: list[UnconfirmedAlarm]  # screen alarms fresh samples did not confirm
    depth: DepthRecord  # a --tv budget below TV 0.01: the coverage screens and the deep tests the claim is made on

    # --- a goodness-of-fit test ----------------------------------------------------------------
    test: str  # the method, e.g. "g-test", "pearson", "monte-carlo", "exact", "adk-chi-square", "impossible"
    df: int  # degrees of freedom
    statistic: float  # the test statistic
    observed: list[Any]  # counts: [cells], or [groups, cells] (one row per case, position or group)
    expected: list[Any]  # expected counts, the same shape as ``observed``
    outcome_labels: list[str]  # [cells] what each column of ``observed`` is (e.g. "a1:t3")
    where: str  # the cell that deviates most from the law, in words
    tv: TVRecord  # a failure's estimated total variation from the law, with its interval
    event: EventSize  # a law finding given forced drafts: its TV there and its bound in the emitted law
    case_pvalues: list[float]  # fit.batched: each case's p-value
    log_e_value: float  # fit.batched (a failure), trees law checks: log of the sequential test's e-value
    stopped_early: (
        bool  # fit.batched (a failure), trees law checks: the sequential test stopped before the planned rows
    )
    sequential_alpha: float  # trees law checks: the level of the decision's anytime-valid test
    fixed_alpha: float  # trees law checks: the level of its fixed test (the two sum to the decision's)
    planned_rows: int  # trees: rows the fixed test was sized for (a sequential stop draws fewer)
    tallied_with: str  # trees.acceptance: the decision whose rows it was tallied on too (one draw, two tests)
    positions: list[PositionPValue]  # fit.conditional positions: each position's p-value
    tests: int  # fit.marginals: tests the Bonferroni correction ran over
    shapes: (
        list[list[int]] | list[ShapeRecord] | list[AcceptedShapeRecord]
    )  # fit.marginals: the [K, V] shapes; shapes family: a record per shape
    group_pvalues: list[float]  # loop: each group's p-value
    groups: list[str]  # loop: what each group (row of ``observed``) is
    # loop at a --tv budget: the looks, the final sample, where a look stopped the experiment (fit.conditional's
    # deep tests: counted in depth.deep_stopped)
    futility: FutilityRecord
    # fit.every-shape at a --tv budget: each shape's experiment, in the order of ``shapes`` (None: no looks, its plan
    # exceeds the cap)
    futility_by_shape: list[FutilityRecord | None]
    row_sums: list[float]  # fit.renormalisation: the rows' sums as passed (target rows, then draft rows)
    draft_sequences: int  # exact.conditional: draft sequences enumerated
    lumped: bool  # trees: the law's tail of inactive tokens is lumped into one cell
    algorithm: str | None  # trees: the algorithm the sampler declares, whose law it is held to (None: it declares none)
    candidates: str  # trees: how the candidates were drawn ("without replacement", "i.i.d. from the draft")
    length: int  # trees: tokens per completed sequence

    # --- an exact check over a grid of uniforms ------------------------------------------------
    points: int  # grid points (rows) run
    induced_tv: float  # TV between the law the outputs induce over the uniforms and the exact law
    tie_volume: float  # volume of the uniforms' cube left out near ties (within ``tie`` of a threshold)
    tie: float  # the distance to a threshold left out as a tie
    mismatch: bool  # an output differed from the canonical one
    first_mismatch: FirstMismatch  # the first such output

    # --- the independence of rows (contract) ---------------------------------------------------
    cramers_v: float  # effect size of the dependence between calls
    calls: int  # calls tested
    rows: int  # rows run (contract, shapes)
    adjacent_rows: AdjacentRows  # adjacent rows' independence
    neighbours: Neighbours  # a row's law beside different neighbours
    tv_of: str  # which laws the claimed TV is between

    # --- acceptance (efficiency, trees, shapes) ------------------------------------------------
    expected_accepted: float  # the canonical (or reference algorithm's) mean of accepted drafts per call
    observed_accepted: float  # the sampler's mean
    ratio: float  # observed_accepted / expected_accepted
    expected_law: list[float]  # [K+1] the canonical law of the accepted count
    observed_counts: list[int]  # [K+1] calls that accepted 0..K drafts
    min_detectable_drop: (
        float | None
    )  # smallest drop in the mean detected with probability ``power`` (None: no level given)
    min_detectable_deficit: float | None  # that drop as a fraction of expected_accepted (None: expected 0)
    power: float  # the budget's power
    pvalue_low: float  # one-sided p-value: fewer accepted than expected
    pvalue_high: float  # one-sided p-value: more accepted than expected
    held_to: str  # trees: the reference algorithm with the most accepted, that the sampler is held to
    expected_by_algorithm: dict[str, float]  # trees: each reference algorithm's mean on the same candidates
    outside_drafting: str | None  # trees.robustness: why the declared drafting cannot produce the tree posed
    law_differs: (
        bool  # trees.robustness: the law given the candidates differs from the declared algorithm's (information)
    )
    accepts_more: bool  # trees: more accepted than the algorithm held to, at the level (information, not a failure)
    not_posed: list[str]  # trees: what the sampler's declared tree limits kept the check from posing, each with why

    # --- a shape of the shapes family ----------------------------------------------------------
    V: int  # vocabulary size of the shape (robustness: of the failing vocabulary)
    K: int  # drafts per step
    case: str  # shapes.edge: the edge case kind
    precision: str  # shapes.edge: dtype the rows were passed in
    rows_per_call: int  # rows per sampler call
    rows_needed: int  # rows the budget's sized_for_tv needed (more than ``rows`` when capped)
    sized_for_tv: float  # the TV the rows were sized to detect
    ceiling_tv: float  # the largest claim a pass may make (above it: inconclusive)
    reduced: str  # how the sampler's declared max_vocab/max_k reduced the shape
    cells: list[str] | int  # lumped laws: [cells] labels of the lumped cells; the full-domain law: the number of cells
    draft_tokens: list[int]  # [K] the drafts of the structured case
    batches: int  # full-domain identity test: Poisson batches
    mean_batch_size: float  # their mean size (what the volume affords)
    planned_batch_size: int  # the size the identity test's plan asked for
    rejecting_batches: int  # batches whose statistic reached the threshold
    statistics: list[float]  # [batches] each batch's standardised statistic
    impossible: int  # observations in cells of probability 0
    power_against: str  # the deviation the identity test's power is stated against

    # --- the engine family: speculation on against off -------------------------------------------
    two_sample: dict[str, Any]  # engine.law: the two-sample test (statistic, pvalue, df, samples, groups, pooled_mass)
    largest_gap: LargestGap  # engine.law: where the modes differ most
    prompt: list[int]  # engine.law: the prompt every generation continues
    looks: EngineLooks  # engine.law: its looks
    throughput: Throughput  # engine checks: each mode's speed as the check called it


def unknown_keys(record: Mapping[str, Any], schema: Any = Evidence, where: str = "evidence") -> list[str]:
    """What in ``record`` (a check's evidence, or its JSON) the schema does not describe: keys it does
    not list and, in the nested records, required keys that are missing, at any depth (empty when
    the record follows the schema).  Catches a producer and this module drifting apart."""
    hints = typing.get_type_hints(schema)
    problems = [f"{where}: no {key!r}" for key in sorted(schema.__required_keys__ - set(record))]
    for key, value in record.items():
        if key not in hints:
            problems.append(f"{where}: {key!r} is not in {schema.__name__}")
            continue
        candidates = _records(hints[key])
        for item in value if isinstance(value, list) else [value]:
            if candidates and isinstance(item, Mapping):
                found = [unknown_keys(item, c, f"{where}.{key}") for c in candidates]
                best = min(found, key=len)  # read as the record it matches best
                problems += best
    return problems


def _records(hint: Any) -> list[Any]:
    """The TypedDicts a type hint can hold (in a union, a list, a dict's values)."""
    if typing.is_typeddict(hint):
        return [hint]
    return [r for arg in typing.get_args(hint) for r in _records(arg)]
