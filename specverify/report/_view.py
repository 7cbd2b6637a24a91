"""What a report page shows, computed from a run's JSON; the templates only lay it out.

Everything here reads the JSON form of a :class:`~specverify.RunResult` (``RunResult.to_json()``),
so a page from a live run and a page from a JSON file are the same page.  Every evidence field is
optional: what a check recorded is shown, what it did not is left out, and fields this module
does not know are listed as they are.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, cast

from markupsafe import Markup

from .._record.evidence import (
    CallShape,
    CaseRecord,
    EventSize,
    Evidence,
    FirstMismatch,
    PositionPValue,
    TVRecord,
    UnconfirmedAlarm,
)
from .._record.evidence import Warps as WarpsRecord
from .._record.families import FAMILIES
from .._record.reach import Reach, claims, span_text
from .._record.result import FINDINGS
from .._record.vocabulary import Finding, Status, Verdict, lossless
from .._warps.findings import WarpFinding, warp_finding
from ._example import Example, example, shape_summary, size_key
from ._format import anchor, compact, count, detects, number, timestamp
from ._plots import comparison, comparison_svg
from ._rerun import rerun
from ._tree_rows import TreeRows, tree_rows
from ._tree_svg import tree_case_svg

__all__ = ["APART", "STATUSES", "VERDICT_TEXT", "cell_colour", "CheckView", "Guarantee", "RunView", "run_view"]

#: Worst first: the order sections and matrix cells rank statuses in.
STATUSES = tuple(s.value for s in sorted(Status, key=lambda s: s.severity))  # the most severe first
#: The matrix row of checks that run on no particular case (``case`` is ``None``).
NO_CASE = "(any case)"

VERDICT_TEXT = {v.value: v.text for v in Verdict}
FINDING_TEXT = {f.value: f.text for f in Finding}
#: Evidence shown in its own place on a check; every other field goes to the generic list.
_PLACED = {
    "tv", "where", "minimal_example", "model", "repro", "observed", "expected", "outcome_labels",
    "observed_counts", "expected_law", "expected_accepted", "observed_accepted", "ratio",
    "min_detectable_drop", "min_detectable_deficit", "power", "first_mismatch", "positions", "unconfirmed_alarms",
    "traceback", "violation", "warps", "tree_case", "event",
}  # fmt: skip


@dataclasses.dataclass
class Warps:
    """A logits sampler's failing case: the law to preserve beside the raw target's, by position."""

    row: str
    params: str
    positions: list[tuple[str, list[str], list[str], int | None]]  # title, warped, unwarped, emitted token
    columns: int
    emitted: bool


@dataclasses.dataclass
class Efficiency:
    observed: str
    optimum: str
    ratio: str
    ratio_percent: float | None
    detectable_drop: str
    samples: str
    power: str


@dataclasses.dataclass
class CheckView:
    """One check as shown: its result, its evidence, and (for failures) its plot."""

    id: str
    anchor: str
    family: str
    case: str | None
    status: str
    finding: str | None
    finding_text: str | None
    message: str
    p_value: Any
    alpha: Any
    samples: Any
    min_detectable_tv: Any
    duration_s: Any
    tv: dict[str, Any] | None
    event: dict[str, str] | None  # a law finding's two sizes (given its event, in the emitted law)
    where: str | None
    violation: str | None
    example: Example | None
    example_title: str
    model: Example | None
    repro: str | None
    plot: Markup | None
    plot_note: str | None
    tree: Markup | None
    tree_rows: TreeRows | None  # the failing path's target and draft rows, beside the tree
    first_mismatch: dict[str, str] | None
    warps: Warps | None
    positions: list[tuple[str, str]]
    unconfirmed: list[tuple[str, str]]
    traceback: str | None
    efficiency: Efficiency | None
    other: list[tuple[str, str]]
    case_size: tuple[int, int]

    @property
    def smallest_case(self) -> str:
        return self.example.summary if self.example else ""


@dataclasses.dataclass
class Guarantee:
    """The banner's promise: a lead sentence, one line per reach class (the TV its checks detect,
    where they tested it: a budget affords a coarser TV at V = 262,144 than at V = 8), a tail."""

    lead: str
    classes: list[tuple[str, str]]  # ("TV ≥ 0.0166", "V in 2..8, K in 1..4" or "" where unrecorded)
    tail: str


@dataclasses.dataclass(frozen=True)
class _Claim:
    """A check's claim as its JSON records it, for :func:`specverify._record.reach.claims`."""

    status: str
    min_detectable_tv: float | None
    reach: Reach | None


@dataclasses.dataclass
class Cell:
    counts: list[tuple[str, int]]
    worst: str
    href: str
    title: str


@dataclasses.dataclass
class Matrix:
    """Status counts by (case, family); the totals are (passed, counted, apart) per family: skips
    and float-edge findings are counted apart (:data:`APART`), never as checks that did not pass."""

    families: list[str]
    cases: list[str]
    cells: dict[tuple[str, str], Cell]
    family_totals: dict[str, tuple[int, int, list[tuple[str, int]]]]


@dataclasses.dataclass
class RunView:
    """A whole page."""

    sampler: str
    spec: str | None
    verdict: str
    verdict_text: str
    verdict_reason: str | None
    finished: bool
    summary: list[tuple[str, int]]
    guarantee: Guarantee | None
    headline: CheckView | None
    failures: list[CheckView]
    differences: list[CheckView]
    warp: WarpFinding | None
    float_edges: list[CheckView]
    errors: list[CheckView]
    inconclusive: list[CheckView]
    passed: list[CheckView]
    skipped: list[CheckView]
    efficiency: list[CheckView]
    matrix: Matrix
    environment: list[tuple[str, list[tuple[str, str]]]]
    run_line: list[str]
    rerun: str | None
    selection: list[str] | None
    not_posed: list[str]  # trees the sampler's declared tree limits kept out, "<check>: <what>: <why>"


def run_view(data: Mapping[str, Any], *, plots: bool = True) -> RunView:
    """The view of a run's JSON (``RunResult.to_json()``); ``plots=False`` skips matplotlib."""
    run = data.get("run") or {}
    sampler = run.get("sampler") or {}
    checks_json = list(data.get("checks") or [])
    anchors: set[str] = set()
    views = [_check_view(c, i, anchors, plots) for i, c in enumerate(checks_json)]
    by_status = {s: [v for v in views if v.status == s] for s in STATUSES}
    position = {id(v): i for i, v in enumerate(views)}
    # Most decisive finding first (the order the verdict weighs them in), then the smallest case.
    failures = sorted(by_status["fail"], key=lambda v: (_rank(v.finding, FINDINGS), v.case_size, position[id(v)]))
    verdict = str(data.get("verdict") or "error")
    # For a lossless-suboptimal verdict the conditional-law and acceptance differences are the
    # expected evidence for it, shown as such, not as failures.
    differences = [
        v for v in failures if verdict == Verdict.LOSSLESS_SUBOPTIMAL and v.finding in ("non-canonical", "suboptimal")
    ]
    failures = [v for v in failures if v not in differences]
    summary = [(s, len(by_status[s])) for s in STATUSES if by_status[s]]
    return RunView(
        sampler=str(sampler.get("name") or "unnamed sampler"),
        spec=run.get("spec"),
        verdict=verdict,
        verdict_text=VERDICT_TEXT.get(verdict, ""),
        verdict_reason=_text(data.get("verdict_reason")),
        finished=bool(data.get("finished", True)),
        summary=summary,
        guarantee=_guarantee(verdict, run, views, checks_json),
        headline=next(iter(failures or by_status["error"] or by_status["inconclusive"]), None),
        failures=failures,
        differences=differences,
        warp=warp_finding(run.get("warp")),
        float_edges=by_status["float-edge"],
        errors=by_status["error"],
        inconclusive=by_status["inconclusive"],
        passed=by_status["pass"],
        skipped=by_status["skip"],
        efficiency=[v for v in views if v.efficiency is not None],
        matrix=_matrix(views),
        environment=_environment(run),
        run_line=_run_line(run),
        rerun=rerun(run),
        selection=[str(p) for p in run["select"]] if isinstance(run.get("select"), list) and run["select"] else None,
        not_posed=[str(p) for p in run["not_posed"]] if isinstance(run.get("not_posed"), list) else [],
    )


def _rank(value: Any, order: tuple[str, ...]) -> int:
    return order.index(value) if value in order else len(order)


def _check_view(data: Mapping[str, Any], index: int, anchors: set[str], plots: bool) -> CheckView:
    # JSON read back: the record's keys, its values as the file has them (each reader checks them)
    evidence = cast(Evidence, _mapping(data.get("evidence")))
    check_id = str(data.get("id") or f"check {index}")
    name = anchor(check_id)
    while name in anchors:
        name += "-"
    anchors.add(name)
    status = str(data.get("status")) if data.get("status") in STATUSES else "error"
    finding = data.get("finding")
    plot, note = None, None
    if plots and status in ("fail", "error"):
        data_to_plot = comparison(evidence)
        if data_to_plot is not None:
            plot = Markup(
                comparison_svg(data_to_plot, f"plot-{name}", label=f"observed versus expected counts, {check_id}")
            )
            note = data_to_plot.note
    tree, rows = None, None
    if status in ("fail", "error") and isinstance(evidence.get("tree_case"), Mapping):
        drawn = (
            tree_case_svg(evidence["tree_case"], f"tree-{name}", label=f"the failing tree case of {check_id}")
            if plots
            else None
        )
        tree, rows = (Markup(drawn) if drawn is not None else None), tree_rows(evidence["tree_case"])
    minimal: CaseRecord | CallShape | None = evidence.get("minimal_example")
    example_title, placed = "Smallest failing case", _PLACED
    if minimal is None and isinstance(evidence.get("shape"), Mapping):
        minimal, example_title, placed = evidence["shape"], "Failing call", _PLACED | {"shape"}
    where = _text(evidence.get("where"))
    return CheckView(
        id=check_id,
        anchor=name,
        family=str(data.get("family") or check_id.split(".", 1)[0]),
        case=data.get("case"),
        status=status,
        finding=finding,
        finding_text=FINDING_TEXT.get(finding) if finding else None,
        message=str(data.get("message") or ""),
        p_value=data.get("p_value"),
        alpha=data.get("alpha"),
        samples=data.get("samples"),
        min_detectable_tv=data.get("min_detectable_tv"),
        duration_s=data.get("duration_s"),
        tv=_tv(evidence.get("tv")),
        event=_event(evidence.get("event")),
        where=where if where and where not in str(data.get("message") or "") else None,
        violation=_text(evidence.get("violation")),
        example=example(minimal) if minimal is not None else None,
        example_title=example_title,
        model=example(evidence["model"]) if "model" in evidence and status != "pass" else None,
        repro=_text(evidence.get("repro")),
        plot=plot,
        plot_note=note,
        tree=tree,
        tree_rows=rows,
        first_mismatch=_first_mismatch(evidence.get("first_mismatch")),
        warps=_warps(evidence.get("warps")),
        positions=_positions(evidence.get("positions")),
        unconfirmed=_unconfirmed(evidence.get("unconfirmed_alarms")),
        traceback=_text(evidence.get("traceback")),
        efficiency=_efficiency(evidence, data.get("samples")),
        other=[(str(k), compact(v)) for k, v in evidence.items() if k not in placed],
        case_size=size_key(minimal),
    )


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _mapping(value: Any) -> Mapping[str, Any]:
    """``value`` if it is a mapping, else an empty one (JSON from an older or foreign writer)."""
    return value if isinstance(value, Mapping) else {}


def _event(value: EventSize | None) -> dict[str, str] | None:
    """The two sizes as shown: TV given the event, the event's probability, the bound on the
    emitted law (powers of ten where a float underflows: JSON holds the logarithms too)."""
    if not isinstance(value, Mapping) or "log10_tv_bound" not in value:
        return None

    def power(key: str) -> str:
        log10 = value.get(key)
        if not isinstance(log10, (int, float)):
            return "0"  # -inf is null in JSON: an impossible event
        return f"{10.0**log10:.2g}" if log10 > -300 else f"1e{math.floor(log10)}"

    bound, resolution = value.get("log10_tv_bound"), value.get("resolution")
    below = not isinstance(bound, (int, float)) or (
        isinstance(resolution, (int, float)) and bound < math.log10(resolution)
    )
    return {
        "tv_given": number(value.get("tv_given")),
        "event": str(value.get("event") or ""),
        "probability": power("log10_probability"),
        "bound": power("log10_tv_bound"),
        "resolution": number(resolution),
        "float_edge": "yes" if below else "",
    }


def _tv(value: TVRecord | None) -> dict[str, Any] | None:
    if not isinstance(value, Mapping) or "estimate" not in value:
        return None
    confidence = value.get("confidence")
    return {
        "estimate": number(value.get("estimate")),
        "low": number(value.get("low")) if "low" in value else None,
        "high": number(value.get("high")) if "high" in value else None,
        "confidence": f"{float(confidence):.0%}" if isinstance(confidence, (int, float)) else None,
        "plug_in": number(value.get("plug_in")) if "plug_in" in value else None,
    }


def _warps(value: WarpsRecord | None) -> Warps | None:
    if (
        not isinstance(value, Mapping)
        or not isinstance(value.get("warped"), list)
        or not isinstance(value.get("unwarped"), list)
    ):
        return None
    params = _mapping(value.get("params"))
    emitted = _mapping(value.get("emitted"))
    positions = []
    for i, (warped, unwarped) in enumerate(zip(value["warped"], value["unwarped"])):
        token = emitted.get("token") if emitted.get("position") == i else None
        positions.append((f"position {i}", [number(x) for x in warped], [number(x) for x in unwarped], token))
    columns = max((len(w) for _, w, _, _ in positions), default=0)
    text = ", ".join(f"{k} {number(v) if isinstance(v, float) else v}" for k, v in params.items()) or "none"
    return Warps(
        row=str(value.get("row", "")), params=text, positions=positions, columns=columns, emitted=bool(emitted)
    )


def _first_mismatch(value: FirstMismatch | None) -> dict[str, str] | None:
    if not isinstance(value, Mapping):
        return None
    rows = {}
    if "uniforms" in value:
        rows["uniforms"] = compact(value["uniforms"])
    for key, label in (("expected", "canonical algorithm"), ("got", "sampler")):
        out = value.get(key)
        if isinstance(out, Mapping):
            rows[label] = f"tokens {compact(out.get('tokens'))}, {out.get('num_accepted')} accepted"
        elif out is not None:
            rows[label] = compact(out)
    if "mismatched_volume" in value:
        rows["mismatched volume of uniforms"] = number(value["mismatched_volume"])
    rows.update(
        {str(k): compact(v) for k, v in value.items() if k not in ("uniforms", "expected", "got", "mismatched_volume")}
    )
    return rows


def _positions(value: list[PositionPValue] | None) -> list[tuple[str, str]]:
    if not isinstance(value, list):
        return []
    return [
        (str(p.get("position")), number(p.get("pvalue"))) if isinstance(p, Mapping) else ("", compact(p)) for p in value
    ]


def _unconfirmed(value: list[UnconfirmedAlarm] | None) -> list[tuple[str, str]]:
    if not isinstance(value, list):
        return []
    rows = []
    for alarm in value:
        if isinstance(alarm, Mapping):
            rows.append(
                (
                    shape_summary(alarm.get("example")) or compact(alarm.get("example")),
                    number(alarm.get("confirm_pvalue")),
                )
            )
        else:
            rows.append((compact(alarm), ""))
    return rows


def _efficiency(evidence: Evidence, samples: Any = None) -> Efficiency | None:
    if "expected_accepted" not in evidence and "observed_accepted" not in evidence:
        return None
    ratio, deficit = evidence.get("ratio"), evidence.get("min_detectable_deficit")
    return Efficiency(
        observed=number(evidence.get("observed_accepted"), 4),
        optimum=number(evidence.get("expected_accepted"), 4),
        ratio=number(ratio, 4),
        ratio_percent=100 * ratio if isinstance(ratio, (int, float)) and not isinstance(ratio, bool) else None,
        detectable_drop=number(evidence.get("min_detectable_drop"))
        + (f" ({100 * deficit:.2g}%)" if isinstance(deficit, (int, float)) else ""),
        samples=count(samples) if samples is not None else "",
        power=number(evidence.get("power")) if evidence.get("power") is not None else "",
    )


def _guarantee(verdict: str, run: Mapping[str, Any], views: list[CheckView], checks: list[Any]) -> Guarantee | None:
    alpha, power = run.get("family_wise_alpha"), run.get("power")
    classes = claims(_claim(c) for c in checks if isinstance(c, Mapping))
    shown = [(detects(tv), span_text(reach) if reach is not None else "") for tv, reach in classes]
    if lossless(verdict):
        if classes and alpha is not None and power is not None:
            return Guarantee(
                lead=f"With probability ≥ {number(power)}, every statistical check detects a deviation in "
                "total variation (TV) "
                + (
                    "of at least:"
                    if len(classes) == 1
                    else f"of at least its reach class's bound ({len(classes)} classes, by the shapes their checks "
                    "tested):"
                ),
                classes=shown,
                tail=f"The probability of any false alarm in this run is ≤ {number(alpha)}.",
            )
        return None
    if any(v.status == "fail" for v in views) and alpha is not None:
        # what the checks that passed rule out, by reach class: where the sampler was not seen to fail
        passed = (
            f" With probability ≥ {number(power)}, the statistical checks that passed detect a deviation in TV of at "
            "least:"
            if shown and power is not None
            else ""
        )
        return Guarantee(
            lead="Contract and support failures are exact: no statistics. A statistical failure is a false alarm with "
            f"probability ≤ {number(alpha)} for the whole run." + passed,
            classes=shown if passed else [],
            tail="",
        )
    return None


def _claim(data: Mapping[str, Any]) -> _Claim:
    tv, reach = data.get("min_detectable_tv"), data.get("reach")
    try:
        recorded = Reach.from_json(dict(reach)) if isinstance(reach, Mapping) else None
    except (KeyError, TypeError, ValueError):  # a foreign or older writer's reach: unrecorded
        recorded = None
    number_tv = float(tv) if isinstance(tv, (int, float)) and not isinstance(tv, bool) else None
    return _Claim(status=str(data.get("status")), min_detectable_tv=number_tv, reach=recorded)


def _matrix(views: list[CheckView]) -> Matrix:
    """Case by family: status counts per cell, coloured by the worst status in it.

    Families are the columns, as on the index page, so a page and the index read the same way.
    """
    families = [f for f in FAMILIES if any(v.family == f for v in views)]
    families += list(dict.fromkeys(v.family for v in views if v.family not in FAMILIES))
    cases = list(dict.fromkeys(v.case or NO_CASE for v in views))
    cells = {}
    for family in families:
        for case in cases:
            members = [v for v in views if v.family == family and (v.case or NO_CASE) == case]
            if not members:
                continue
            counts = [(s, sum(v.status == s for v in members)) for s in STATUSES]
            counts = [(s, n) for s, n in counts if n]
            worst = cell_colour(counts)
            first = next(v for v in members if v.status == worst)
            title = "\n".join(f"{v.status}: {v.id}" for v in members)
            cells[(case, family)] = Cell(counts, worst, f"#{first.anchor}", title)
    totals = {}
    for f in families:
        statuses = [v.status for v in views if v.family == f]
        apart = [(s, statuses.count(s)) for s in APART if s in statuses]
        totals[f] = (statuses.count("pass"), len(statuses) - sum(n for _, n in apart), apart)
    return Matrix(families, cases, cells, totals)


#: Statuses counted apart from "passed of those run": a skip tested nothing, a float-edge finding
#: decides no verdict; neither is a check that did not pass.
APART = ("float-edge", "skip")


def cell_colour(counts: list[tuple[str, int]]) -> str:
    """The status a cell is coloured by: its worst, but a skip only where nothing else ran (a
    cell of passes and a skip is a passing cell with a skip in it, not a skipped one)."""
    ran = [s for s, _ in counts if s != "skip"]
    return ran[0] if ran else "skip"


def _environment(run: Mapping[str, Any]) -> list[tuple[str, list[tuple[str, str]]]]:
    """Sampler, run, budget and software, each as (label, value) rows; unknown keys kept."""
    sampler = _mapping(run.get("sampler"))
    sections = []
    rows = [("name", str(sampler.get("name", "")))]
    if run.get("spec"):
        rows.append(("spec", str(run["spec"])))
    capabilities = sampler.get("capabilities")
    if isinstance(capabilities, Mapping):
        rows += [(str(k), _value(v)) for k, v in capabilities.items()]
    rows += [(str(k), _value(v)) for k, v in sampler.items() if k not in ("name", "capabilities")]
    sections.append(("Sampler", rows))

    labels = {
        "seed": "seed",
        "family_wise_alpha": "family-wise false-alarm probability α",
        "alpha_per_decision": "α per statistical decision",
        "power": "power",
        "tv": "target total variation",
        "device": "device",
        "dtype": "dtype",
        "planned_checks": "planned checks",
        "select": "only checks matching",
        "started": "started",
        "sampler_calls": "sampler calls",
        "sampler_rows": "sampler rows",
        "sampler_seconds": "seconds inside the sampler",
    }
    rows = [(label, _value(run[key])) for key, label in labels.items() if key in run]
    budget = run.get("budget")
    if isinstance(budget, Mapping):
        rows.insert(0, ("budget", str(budget.get("name", ""))))
        sections.append(("Run", rows))
        sections.append(("Budget", [(str(k), _value(v)) for k, v in budget.items() if k != "name"]))
    else:
        if budget is not None:
            rows.insert(0, ("budget", _value(budget)))
        sections.append(("Run", rows))
    software = []
    if isinstance(run.get("versions"), Mapping):
        software = [(str(k), _value(v)) for k, v in run["versions"].items()]
    if "platform" in run:
        software.append(("platform", _value(run["platform"])))
    sections.append(("Software", software))
    known = set(labels) | {"sampler", "spec", "budget", "versions", "platform"}
    extra = [(str(k), _value(v)) for k, v in run.items() if k not in known]
    if extra:
        sections.append(("Other", extra))
    return [(title, rows) for title, rows in sections if rows]


def _value(value: Any) -> str:
    if isinstance(value, (list, dict)):
        return compact(value, 400)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10_000:
        return count(value)
    if isinstance(value, float):
        return number(value, 4)
    return number(value) if not isinstance(value, str) else value


def _run_line(run: Mapping[str, Any]) -> list[str]:
    """The few facts a reader checks first: budget, seed, device, dtype, torch, date."""
    budget = run.get("budget")
    versions = _mapping(run.get("versions"))
    parts = [
        f"budget {budget.get('name')}" if isinstance(budget, Mapping) and budget.get("name") else None,
        f"seed {run['seed']}" if "seed" in run else None,
        f"device {run['device']}" if run.get("device") else None,
        f"dtype {run['dtype']}" if run.get("dtype") else None,
        f"torch {versions['torch']}" if versions.get("torch") else None,
        f"specverify {versions['specverify']}" if versions.get("specverify") else None,
        timestamp(run["started"]) if run.get("started") else None,
    ]
    return [p for p in parts if p]
