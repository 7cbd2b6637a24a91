"""Search generated cases for a failure, shrink it, and confirm it on fresh samples.

Hypothesis generates cases; each is *screened* by a test at a coarse level on samples whose seed is
derived from the case itself (never drawn by Hypothesis), so the same case always gives the same
answer and shrinking is sound.  A screen alarm is shrunk to the smallest case that still alarms,
and then *confirmed* on fresh samples at a level chosen so that the whole decision keeps its share
of the run's false-positive budget (see :func:`specverify.stats.confirmation_alpha`): a false
failure needs a screen false alarm and an independent false confirmation.

An alarm that fresh samples do not confirm is set aside and the search goes on with the examples
it has left, so a false alarm (the shrinker, trying many cases, can stumble on one) never costs the
check its power.  Under the null, each round needs a screen false alarm (probability at most
``examples * screen_alpha`` in all) and then a false confirmation, so the bound holds over rounds.

A sampler fault (exception, hang, broken contract) on a case counts as an alarm too, so a crash is
also reported on the smallest case that shows it.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from hypothesis import find
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample, Unsatisfiable

from .._record.evidence import CaseRecord, DepthRecord, Evidence
from .._record.reach import Reach, merge, span_text
from .._record.result import CheckResult
from ..errors import SamplerFault
from ..stats import confirmation_alpha
from ._base import Context, Decision, fault_result
from ._hypothesis import ShrinkSpent, isolated_search, search_settings

__all__ = ["Depth", "Outcome", "SearchResult", "confirm_level", "decisions_from_search", "p_text", "search_and_confirm"]

C = TypeVar("C")

#: A search stops shrinking after this many screened cases: enough for a small case, bounded cost.
MAX_SCREENS_FACTOR = 12
#: After a statistical round's first alarm, at most ``SHRINK_SCREENS_FACTOR * examples + SHRINK_SCREENS_MIN``
#: new cases are screened to shrink it (later answers come from those already screened): a failure costs
#: a bounded number of calls more than a pass, whatever Hypothesis would try, and the bound is a
#: count, not a clock, so the case found is the same on any machine (stated in the evidence).
SHRINK_SCREENS_FACTOR = 1
SHRINK_SCREENS_MIN = 4
#: Searches go on past unconfirmed alarms; this many unconfirmed in a row is inconclusive.
MAX_ROUNDS = 3


def confirm_level(ctx: Context, examples: int | None = None) -> float:
    """The level :func:`search_and_confirm` holds a confirmation to, after ``examples`` screens
    (default the budget's), so that the decision keeps its share ``ctx.alpha``; a screen uses it to
    state the claim a confirmation would make."""
    screens = (examples or ctx.budget.examples) + ctx.budget.depth_examples  # the depth tier's screens count too
    return confirmation_alpha(ctx.alpha, screens, ctx.budget.screen_alpha, confirmations=2)


@dataclasses.dataclass
class Outcome:
    """One test of one case: the p-values of its decisions (several tests may share samples).

    Attributes:
        pvalues: decision id -> p-value (statistical checks).
        samples: sampler rows spent on the case.
        min_detectable_tv: decision id -> the smallest TV the test detects at the budget's power.
        evidence: decision id -> what the report shows about the case (merged into that
            decision's result); read by no control flow.
        fault: the sampler raised, hung or broke its contract on the case (an alarm for every check).
        mismatch: an exact check found output that is not the canonical one (an alarm that needs
            no confirmation).
        seed: the seed the case was evaluated with (set by the search), so a repro draws the same
            samples and fails the same way.
    """

    pvalues: dict[str, float]
    samples: int
    min_detectable_tv: dict[str, float]
    evidence: dict[str, Evidence] = dataclasses.field(default_factory=dict)
    fault: SamplerFault | None = None
    mismatch: bool = False
    seed: int | None = None

    def rejects(self, alpha: float, *, each: bool = False) -> bool:
        """Any decision rejects: at ``alpha`` shared among them (a screen alarm covers all of a
        case's decisions), or at ``alpha`` each (``each=True``: a confirmation, where every
        decision holds its own share of the budget)."""
        if self.fault is not None:
            return True
        level = alpha if each else alpha / max(1, len(self.pvalues))
        return any(p <= level for p in self.pvalues.values())


@dataclasses.dataclass
class SearchResult(Generic[C]):
    """What the search found.

    Attributes:
        examples: cases screened (generated and shrunk).
        screens: the outcomes of every distinct case screened.
        minimal: the smallest case that alarmed, or ``None``.
        first: the first case that alarmed, or ``None``.
        confirmed: the case and outcome that confirmed a failure (or showed a fault), or ``None``.
        unconfirmed: alarms that fresh samples did not confirm (the search went on past them).
        confirm_alpha: the level confirmations were held to.
        exhausted: every search round alarmed and none confirmed: a deviation near the detection
            limit is likely, and the check is inconclusive.
        shrink_screens: new cases screened to shrink alarms, over every round.
        shrink_limit: the most new cases one round may screen to shrink its alarm.
        shrink_cut: some round reached ``shrink_limit``: its case is the smallest found within it.
    """

    examples: int
    screens: list[Outcome]
    minimal: C | None = None
    first: C | None = None
    confirmed: tuple[C, Outcome] | None = None
    unconfirmed: list[tuple[C, Outcome]] = dataclasses.field(default_factory=list)
    confirm_alpha: float = 0.0
    exhausted: bool = False
    depth: Depth | None = None
    shrink_screens: int = 0
    shrink_limit: int = 0
    shrink_cut: bool = False


@dataclasses.dataclass
class Depth:
    """The depth tier of a search at a small TV (``Budget.depth_examples``): the coverage screens
    were sized for ``coverage_tv``, then ``outcomes`` retested the largest cases at the budget's TV.

    Attributes:
        coverage_tv: the TV the coverage screens (and their confirmations) were sized for.
        coverage_reach: what the coverage screens gave the sampler (the check's own reach is the
            deep tests', the only ones its claim is made on).
        outcomes: the deep tests, largest case first.
    """

    coverage_tv: float
    coverage_reach: Reach | None = None
    outcomes: list[Outcome] = dataclasses.field(default_factory=list)


def search_and_confirm(
    ctx: Context,
    check_id: str,
    strategy: st.SearchStrategy[C],
    evaluate: Callable[[C, int, float, str], Outcome],
    fingerprint: Callable[[C], str],
    *,
    examples: int | None = None,
    statistical: bool = True,
) -> SearchResult[C]:
    """Screen generated cases with ``evaluate(case, seed, alpha, stage)``; shrink and confirm.

    ``stage`` is ``"screen"`` or ``"confirm"`` so the evaluation can size its samples to the level.
    For exact evaluations (``statistical=False``) an alarm is final and needs no confirmation.
    """
    budget = ctx.budget
    examples = examples or budget.examples
    screen_alpha = budget.screen_alpha if statistical else 1.0
    seen: dict[str, Outcome] = {}
    cases: dict[str, C] = {}  # the case of each screen (the depth tier retests the largest)
    excluded: set[str] = set()  # alarms that fresh samples did not confirm
    result: SearchResult[C] = SearchResult(examples=0, screens=[])
    if statistical:
        result.confirm_alpha = confirm_level(ctx, examples)

    def screen(case: C) -> Outcome:
        key = fingerprint(case)
        if key not in seen:
            seed = ctx.seed_for(check_id, "screen", key)
            seen[key] = _guarded(evaluate, case, seed, screen_alpha, "screen")
            cases[key] = case
        return seen[key]

    deep = budget.depth_examples if statistical else 0
    coverage_tv = budget.coverage_tv if deep and budget.coverage_tv is not None else None
    with ctx.at_tv(coverage_tv):
        _search_rounds(
            ctx, check_id, strategy, evaluate, fingerprint, screen, seen, excluded, examples, result, statistical
        )
    if coverage_tv is not None and result.confirmed is None and not result.exhausted:
        result.depth = _deepen(ctx, check_id, evaluate, fingerprint, seen, cases, excluded, deep, coverage_tv, result)
    result.examples = len(seen)
    result.screens = list(seen.values())
    return result


def _search_rounds(
    ctx: Context,
    check_id: str,
    strategy: st.SearchStrategy[C],
    evaluate: Callable[[C, int, float, str], Outcome],
    fingerprint: Callable[[C], str],
    screen: Callable[[C], Outcome],
    seen: dict[str, Outcome],
    excluded: set[str],
    examples: int,
    result: SearchResult[C],
    statistical: bool,
) -> None:
    """Up to :data:`MAX_ROUNDS` rounds of generate, shrink and confirm, into ``result``."""
    budget = ctx.budget
    screen_alpha = budget.screen_alpha if statistical else 1.0
    limit = MAX_SCREENS_FACTOR * examples + 50
    # a statistical screen draws a test's samples: shrinking is bounded by its count; an exact one
    # (a few rows, audited) is cheap, so its search shrinks to the smallest case within ``limit``
    shrink_limit = SHRINK_SCREENS_FACTOR * examples + SHRINK_SCREENS_MIN if statistical else limit
    result.shrink_limit = shrink_limit

    generated = 0
    for round_ in range(MAX_ROUNDS):
        if generated >= examples:
            break
        state: dict[str, Any] = {
            "first": None,
            "last": None,
            "calls": 0,
            "generated": examples - generated,
            "shrunk": 0,
        }

        def alarms(case: C, state: dict[str, Any] = state) -> bool:
            state["calls"] += 1
            key = fingerprint(case)
            if key in excluded:
                return False
            if state["first"] is not None and key not in seen:
                if state["calls"] > limit or state["shrunk"] >= shrink_limit:
                    # Shrinking budget spent: the smallest alarm so far is the round's (Hypothesis
                    # would go on generating candidates, each a draw of the strategy, for nothing).
                    result.shrink_cut = True
                    raise ShrinkSpent
                state["shrunk"] += 1
                result.shrink_screens += 1
            alarm = _alarm(screen(case), screen_alpha, statistical)
            if alarm:
                state["last"] = case  # the shrinker tries only smaller cases: its best so far
            if alarm and state["first"] is None:
                state["first"] = case
                state["generated"] = state["calls"]  # generation stops at the first alarm
            return alarm

        rng = random.Random(ctx.seed_for(check_id, "search", round_))
        try:
            with isolated_search():
                minimal = find(strategy, alarms, settings=search_settings(examples - generated), random=rng)
        except (NoSuchExample, Unsatisfiable):
            break
        except ShrinkSpent:
            minimal = state["last"]
        generated += state["generated"]
        result.minimal, result.first = minimal, state["first"]
        candidates = [minimal]
        if state["first"] is not None and fingerprint(state["first"]) != fingerprint(minimal):
            candidates.append(state["first"])
        if not statistical:
            result.confirmed = (minimal, screen(minimal))
            break
        result.confirmed = _confirm(ctx, check_id, candidates, screen, evaluate, fingerprint, result)
        if result.confirmed is not None:
            break
        # Not confirmed: a screen false alarm (or a deviation near the limit). Search on, past it.
        excluded.update(fingerprint(case) for case in candidates)
    else:
        result.exhausted = True  # every round alarmed and none confirmed


def _deepen(
    ctx: Context,
    check_id: str,
    evaluate: Callable[[C, int, float, str], Outcome],
    fingerprint: Callable[[C], str],
    seen: dict[str, Outcome],
    cases: dict[str, C],
    excluded: set[str],
    deep: int,
    coverage_tv: float,
    result: SearchResult[C],
) -> Depth:
    """The depth tier: the ``deep`` largest cases screened (most samples at the coverage TV: the
    most cells and groups), in screen order among equals, tested again on fresh samples at the
    budget's TV (stage ``deep``: a screen, at the screen level); an alarm is confirmed on fresh
    samples at the budget's TV.  The check's reach becomes the deep tests' own."""
    mark = len(ctx.reached)
    # the screens' calls: units' reaches, and what the sampler recorded itself (one worker's
    # streamed units, the screens' own calls), set apart so the check's reach is the deep tests'
    depth = Depth(coverage_tv, merge([*ctx.reached, ctx.sut.reach.snapshot()]))
    ctx.sut.reach.reset()
    order = {key: i for i, key in enumerate(seen)}
    ranked = sorted(
        (k for k, o in seen.items() if o.fault is None and k not in excluded),
        key=lambda k: (-seen[k].samples, order[k]),
    )
    for key in ranked[:deep]:
        outcome = _guarded(evaluate, cases[key], ctx.seed_for(check_id, "deep", key), ctx.budget.screen_alpha, "deep")
        depth.outcomes.append(outcome)
        if _alarm(outcome, ctx.budget.screen_alpha, True):
            result.minimal = result.first = cases[key]
            result.confirmed = _confirm(
                ctx, check_id, [cases[key]], lambda _: outcome, evaluate, fingerprint, result, tag="deep-confirm"
            )
            if result.confirmed is not None:
                break
    del ctx.reached[:mark]  # the claim is the deep tests'; the coverage screens' reach is kept in depth
    return depth


def _confirm(
    ctx: Context,
    check_id: str,
    candidates: list[C],
    screen: Callable[[C], Outcome],
    evaluate: Callable[[C, int, float, str], Outcome],
    fingerprint: Callable[[C], str],
    result: SearchResult[C],
    *,
    tag: str = "confirm",
) -> tuple[C, Outcome] | None:
    """Confirm the smallest alarming case, then the first, on fresh samples (seeded by ``tag``)."""
    for case in candidates:
        outcome = screen(case)
        if outcome.fault is not None:
            return (case, outcome)
        seed = ctx.seed_for(check_id, tag, fingerprint(case))
        confirmation = _guarded(evaluate, case, seed, result.confirm_alpha, "confirm")
        if confirmation.rejects(result.confirm_alpha, each=True):
            return (case, confirmation)
        result.unconfirmed.append((case, confirmation))
    return None


def _alarm(outcome: Outcome, alpha: float, statistical: bool) -> bool:
    if not statistical:
        return outcome.fault is not None or outcome.mismatch
    return outcome.rejects(alpha)


def _guarded(
    evaluate: Callable[[C, int, float, str], Outcome], case: C, seed: int, alpha: float, stage: str
) -> Outcome:
    try:
        outcome = evaluate(case, seed, alpha, stage)
    except SamplerFault as fault:
        outcome = Outcome(pvalues={}, samples=0, min_detectable_tv={}, fault=fault)
    outcome.seed = seed
    return outcome


def decisions_from_search(
    ctx: Context,
    decisions: list[Decision],
    found: SearchResult[Any],
    describe: Callable[[Any], CaseRecord],
    repro: Callable[[Any, Outcome, Decision], str],
) -> list[Any]:
    """Turn a search into one :class:`~specverify.CheckResult` per decision (``repro(case, outcome,
    decision)`` writes the snippet that reproduces that decision's failure)."""
    results = []
    screens = found.screens
    base_evidence: Evidence = {
        "examples": found.examples,
        "screen_alpha": ctx.budget.screen_alpha,
        "confirm_alpha": found.confirm_alpha,
        "alpha_share": ctx.alpha,  # what screen and confirmation together spend of the run's budget
    }
    depth = found.depth
    claimed = screens if depth is None else depth.outcomes  # with a depth tier the claim is the deep tests'
    total_samples = sum(o.samples for o in screens) + (0 if depth is None else sum(o.samples for o in depth.outcomes))
    if depth is not None:
        base_evidence["depth"] = _depth_record(depth, screens, [d.id for d in decisions])
    confirmed_ids = set()
    if found.confirmed is not None and found.confirmed[1].fault is None:
        confirmed_ids = {d.id for d in decisions if (found.confirmed[1].pvalues.get(d.id, 1.0) <= found.confirm_alpha)}
    for decision in decisions:
        key = decision.id
        pvalues = [o.pvalues[key] for o in screens if key in o.pvalues]
        claims = [o.min_detectable_tv[key] for o in claimed if key in o.min_detectable_tv]
        claim = max(claims) if claims else None
        common: dict[str, Any] = dict(
            id=decision.id, family=decision.family, case=decision.case, proves=decision.finding
        )
        if confirmed_ids and key not in confirmed_ids:
            results.append(_sibling_result(ctx, decision, found, base_evidence, describe, sorted(confirmed_ids)))
            continue
        if found.confirmed is not None:
            case, outcome = found.confirmed
            evidence: Evidence = {
                **base_evidence,
                "minimal_example": describe(case),
                "shrink": {"screens": found.shrink_screens, "limit": found.shrink_limit, "cut": found.shrink_cut},
                "repro": repro(case, outcome, decision),
            }
            if outcome.fault is not None:
                result = fault_result(decision, outcome.fault, evidence=evidence)
                result.message = f"on the smallest failing case: {result.message}"
                results.append(result)
                continue
            p = outcome.pvalues.get(key)
            if p is not None and p <= found.confirm_alpha:
                evidence.update(outcome.evidence.get(key, {}))
                results.append(
                    CheckResult(
                        **common,
                        status="fail",
                        finding=decision.finding,
                        p_value=p,
                        alpha=found.confirm_alpha,
                        samples=total_samples + outcome.samples,
                        min_detectable_tv=outcome.min_detectable_tv.get(key),
                        message=_failure_message(decision, p, found.confirm_alpha, outcome.evidence.get(key, {})),
                        evidence=evidence,
                    )
                )
                continue
        status, message = _unfailed(ctx, found, claim)
        evidence = base_evidence.copy()
        if pvalues:
            evidence["smallest_screen_pvalue"] = min(pvalues)
        if found.unconfirmed:
            evidence["unconfirmed_alarms"] = [
                {"example": describe(case), "confirm_pvalue": o.pvalues.get(key)} for case, o in found.unconfirmed
            ]
            message += f"; {len(found.unconfirmed)} screen alarm(s) not confirmed on fresh samples"
        results.append(
            CheckResult(
                **common,
                status=status,
                alpha=ctx.alpha,
                samples=total_samples,
                min_detectable_tv=claim,
                message=message,
                evidence=evidence,
            )
        )
    return results


def _depth_record(depth: Depth, screens: list[Outcome], ids: list[str]) -> DepthRecord:
    """What the depth tier did: the coverage screens' TV, claim and reach, the deep tests' claim."""

    def worst(outcomes: list[Outcome]) -> float | None:
        claims = [o.min_detectable_tv[i] for o in outcomes for i in ids if i in o.min_detectable_tv]
        return max(claims) if claims else None

    return {
        "coverage_tv": depth.coverage_tv,
        "coverage_examples": len(screens),
        "coverage_claim": worst(screens),
        "coverage_reach": None if depth.coverage_reach is None else span_text(depth.coverage_reach),
        "deep_examples": len(depth.outcomes),
        "deep_claim": worst(depth.outcomes),
        "deep_samples": sum(o.samples for o in depth.outcomes),
        "deep_stopped": _stopped(depth.outcomes),
    }


def _stopped(outcomes: list[Outcome]) -> int:
    """How many of these tests a futility look ended early (evidence ``futility``)."""
    return sum(
        any("futility" in e and e["futility"]["stopped_at"] is not None for e in o.evidence.values()) for o in outcomes
    )


def _unfailed(ctx: Context, found: SearchResult[Any], claim: float | None) -> tuple[str, str]:
    """Status and message of a decision the search found no confirmed deviation for: a pass only
    when cases were tested and the budget's ceiling was reached."""
    if found.examples == 0:
        return "inconclusive", "no case could be generated"
    if found.exhausted:
        return "inconclusive", (
            f"{len(found.unconfirmed)} screen alarms in {MAX_ROUNDS} search rounds, none confirmed on fresh "
            "samples: a deviation near the detection limit is likely; rerun with a larger budget"
        )
    if claim is None:
        return "inconclusive", "no case could be tested"
    if claim > ctx.budget.ceiling_tv:
        return (
            "inconclusive",
            f"could only detect TV >= {claim:.3g}, above the budget's ceiling {ctx.budget.ceiling_tv:.3g}",
        )
    if found.depth is not None:
        stopped = _stopped(found.depth.outcomes)
        return "pass", (
            f"{found.examples} cases screened at TV {found.depth.coverage_tv:g}, the {len(found.depth.outcomes)} "
            f"largest tested again at TV {ctx.budget.tv:g}; no deviation found"
            + (f" ({stopped} ended early by a futility look)" if stopped else "")
        )
    return "pass", f"{found.examples} cases, no deviation found"


def _sibling_result(
    ctx: Context,
    decision: Decision,
    found: SearchResult[Any],
    base_evidence: Evidence,
    describe: Callable[[Any], CaseRecord],
    failed: list[str],
) -> Any:
    """A decision of a search that another decision failed: the search stopped at that case, so
    this one was decided by its own test on the confirmation's samples, and claims what that test
    detects (never the screens' claim over cases it did not go on to see)."""
    from .._record.result import CheckResult

    assert found.confirmed is not None  # a sibling of a confirmed failure
    case, outcome = found.confirmed
    key = decision.id
    p = outcome.pvalues.get(key)
    claim = outcome.min_detectable_tv.get(key)
    status = "pass"
    message = (
        f"not confirmed on the smallest case where {', '.join(failed)} failed ({p_text(p)} > "
        f"{found.confirm_alpha:.3g}); the search stopped there, after {found.examples} cases"
    )
    if claim is None:
        status, message = "inconclusive", message + "; this decision had no test of its own there"
    elif claim > ctx.budget.ceiling_tv:
        status, message = (
            "inconclusive",
            message
            + f"; that test detects only TV >= {claim:.3g}, above the budget's ceiling {ctx.budget.ceiling_tv:.3g}",
        )
    else:
        message += f"; that test detects TV >= {claim:.3g}"
    evidence: Evidence = {**base_evidence, "decided_on": describe(case), **outcome.evidence.get(key, {})}
    return CheckResult(
        id=decision.id,
        family=decision.family,
        case=decision.case,
        proves=decision.finding,
        status=status,
        p_value=p,
        alpha=found.confirm_alpha,
        samples=outcome.samples,
        min_detectable_tv=claim,
        message=message,
        evidence=evidence,
    )


def p_text(p: float | None) -> str:
    """``p = 0.0123``, or ``p < 1e-300`` for a p-value below what a double holds (never ``p = 0``)."""
    if p is None:
        return "no p-value"
    return "p < 1e-300" if p < 1e-300 else f"p = {p:.3g}"


def _failure_message(decision: Decision, p: float, alpha: float, evidence: Evidence) -> str:
    tv = evidence.get("tv")
    where = evidence.get("where")
    text = f"law differs from the exact law ({p_text(p)} <= {alpha:.3g})"
    if tv:
        text += f"; estimated TV {tv['estimate']:.3g} [{tv['low']:.3g}, {tv['high']:.3g}]"
    if where:
        text += f"; {where}"
    return text
