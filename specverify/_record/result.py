"""Results: one :class:`CheckResult` per check, one :class:`RunResult` per run, and the verdict.

A failing check says what its failure *proves* (its ``finding``), and only :func:`verdict` turns
findings into a verdict, so no check decides the outcome of the run on its own:

* ``contract`` or ``support``: the sampler broke its contract or emitted an impossible token
  (exact, no statistics) -> ``non-conformant``;
* ``renormalisation``: it declares ``unnormalised=True`` but does not renormalise its inputs (its
  law on rows far from normalised is wrong) -> ``non-conformant``, a finding of its own: it says
  nothing of the law on the rows engines pass;
* ``loss``: the emitted tokens do not follow the target's law -> ``lossy``;
* ``non-canonical``: the law given the drafts differs from the canonical algorithm's.  Together with
  lower acceptance and no ``loss`` it is a different lossless algorithm (``lossless-suboptimal``);
  with measurably *more* acceptance than declared (a tree verifier's ``evidence["accepts_more"]``)
  likewise a different lossless algorithm where the target's law was tested; otherwise it is a bias
  the marginal checks were too weak to see (``lossy``);
* ``suboptimal``: fewer accepted drafts than the canonical algorithm -> ``lossless-suboptimal``.

A law difference seen given an event so rare that it moves the emitted law by less than the
resolution (1e-9; ``specverify.checks._event``) has the status ``float-edge``, not ``fail``: it is
reported on its own and decides nothing, the verdict comes from the other checks.  A support
violation is a fault of the calling layer, never sized away.

A lossless verdict needs evidence for it: at least one check whose failure would have proved a
``loss`` (a test of the emitted tokens against the target's own law) must have passed, and where the
sampler differs from the canonical algorithm (a ``non-canonical`` or ``suboptimal`` failure), a
passing target-law test must have covered that very shape ``(K, V)`` and case kind (its
:class:`~specverify._record.reach.Reach`): a different algorithm is lossless only where the target's law
was seen to hold.  Otherwise the verdict is ``inconclusive``, and says where the evidence is
missing (:attr:`RunResult.verdict_reason`).

A run of a subset of the battery (``--only``) can fail a sampler but never pass it: its best verdict
is ``inconclusive``, naming what was left out.  A run that was interrupted and a check that could
not reach its promised power are ``inconclusive`` too, never a pass; a check the harness itself could
not run is an ``error``.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import math
from collections.abc import Iterable, Mapping
from typing import Any, Generic, TypeVar, overload

from .evidence import Evidence
from .info import RunInfo
from .reach import Reach
from .vocabulary import Finding, Status, Verdict

__all__ = [
    "CheckResult",
    "EXIT_CODES",
    "Judgement",
    "RunResult",
    "SCHEMA_VERSION",
    "judge",
    "left_out",
    "summarise",
    "verdict",
]

SCHEMA_VERSION = 1
STATUSES = tuple(s.value for s in Status)
FINDINGS = tuple(f.value for f in Finding)  # the most severe first
VERDICTS = tuple(v.value for v in Verdict)
EXIT_CODES = {v.value: v.exit_code for v in Verdict}

_W = TypeVar("_W", bound=enum.Enum)


class _Word(Generic[_W]):
    """A field that holds a word of the vocabulary, given as the word or its string (``"fail"``):
    ``CheckResult(status="fail").status is Status.FAIL``; an unknown string is a ``ValueError``."""

    def __init__(self, kind: type[_W]) -> None:
        self.kind = kind

    def __set_name__(self, owner: type, name: str) -> None:
        self.name, self.slot = name, f"_{name}"

    @overload
    def __get__(self, obj: None, owner: Any) -> _Word[_W]: ...
    @overload
    def __get__(self, obj: object, owner: Any) -> _W: ...
    def __get__(self, obj: object | None, owner: Any) -> _W | _Word[_W]:
        if obj is None:
            raise AttributeError(self.name)  # no class-level default: the field is required
        return getattr(obj, self.slot)

    def __set__(self, obj: object, value: _W | str) -> None:
        try:
            setattr(obj, self.slot, self.kind(value))
        except ValueError:
            raise ValueError(f"unknown {self.name} {value!r}") from None


class _MaybeWord(Generic[_W]):
    """:class:`_Word`, or ``None`` (its default)."""

    def __init__(self, kind: type[_W]) -> None:
        self.kind = kind

    def __set_name__(self, owner: type, name: str) -> None:
        self.name, self.slot = name, f"_{name}"

    @overload
    def __get__(self, obj: None, owner: Any) -> None: ...
    @overload
    def __get__(self, obj: object, owner: Any) -> _W | None: ...
    def __get__(self, obj: object | None, owner: Any) -> _W | None:
        return None if obj is None else getattr(obj, self.slot)

    def __set__(self, obj: object, value: _W | str | None) -> None:
        try:
            setattr(obj, self.slot, None if value is None else self.kind(value))
        except ValueError:
            raise ValueError(f"unknown {self.name} {value!r}") from None


#: What :func:`left_out` names for a selection whose left-out results were not recorded.
UNKNOWN_LEFT_OUT = "(results not recorded: a result of an older form, not migrated)"


@dataclasses.dataclass
class CheckResult:
    """The outcome of one check, with its evidence.

    ``p_value``, ``samples`` and ``min_detectable_tv`` are ``None`` where they do not apply (exact
    checks have no p-value); a ``p_value`` is always compared with the ``alpha`` beside it.
    ``finding`` says what a failure proves; ``proves`` says what this check's failure *would* prove
    (set on passes too, so a verdict can tell which laws were tested).  ``evidence`` holds what a
    person needs to believe the result: counts, the TV estimate, the minimal example and a repro
    (its keys: :class:`~specverify._record.evidence.Evidence`).
    ``reach`` is what the sampler was given while the check ran (shapes, dtypes, kinds): the claim
    holds there and nowhere else.
    """

    id: str
    family: str
    status: _Word[Status] = _Word(Status)
    case: str | None = None
    finding: _MaybeWord[Finding] = _MaybeWord(Finding)
    p_value: float | None = None
    alpha: float | None = None
    samples: int | None = None
    min_detectable_tv: float | None = None
    message: str | None = None
    evidence: Evidence = dataclasses.field(default_factory=Evidence)
    duration_s: float = 0.0
    proves: _MaybeWord[Finding] = _MaybeWord(Finding)
    reach: Reach | None = None

    def __post_init__(self) -> None:
        if self.status == "fail" and self.finding is None:
            raise ValueError(f"a failing check must say what its failure proves ({self.id})")
        if self.status == "fail" and self.proves is None:
            self.proves = self.finding

    def to_json(self) -> dict[str, Any]:
        data = _jsonable({f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "reach"})
        data["reach"] = None if self.reach is None else _jsonable(self.reach.to_json())
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CheckResult:
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in fields}
        if values.get("reach") is not None:
            values["reach"] = Reach.from_json(values["reach"])
        return cls(**values)


@dataclasses.dataclass
class RunResult:
    """A whole run: what was run on what, every check, and the verdict."""

    run: RunInfo
    checks: list[CheckResult]
    finished: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.run, RunInfo):  # the JSON's form (or a part of it) is read as the record
            self.run = RunInfo.from_json(self.run)

    @property
    def judgement(self) -> Judgement:
        """The verdict and why (see :func:`judge`); a subset of the battery is never a pass."""
        return judge(self.checks, finished=self.finished, left_out=left_out(self.run))

    @property
    def verdict(self) -> str:
        return self.judgement.verdict

    @property
    def verdict_reason(self) -> str | None:
        """Why the verdict is no better than it is (``None`` for a plain pass or failure)."""
        return self.judgement.reason

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    def to_json(self) -> dict[str, Any]:
        judgement = self.judgement
        return {
            "schema_version": SCHEMA_VERSION,
            "verdict": judgement.verdict,
            "verdict_reason": judgement.reason,
            "finished": self.finished,
            "run": _jsonable(self.run.to_json()),
            "summary": summarise(self.checks),
            "checks": [c.to_json() for c in self.checks],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunResult:
        if data.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(f"unsupported schema_version {data.get('schema_version')!r}")
        checks = [CheckResult.from_json(c) for c in data["checks"]]
        return cls(run=data["run"], checks=checks, finished=data.get("finished", True))


def _non_canonical_reason(checks: list[CheckResult]) -> str:
    """Why a law difference with no acceptance deficit is a loss: says what the acceptance checks
    found (a case's own acceptance may well be low: only a ``suboptimal`` finding makes the
    difference that of a lossless-suboptimal verifier)."""
    differing = [c.id for c in checks if c.status == "fail" and c.finding == "non-canonical"]
    shown = differing[0] + (f" and {len(differing) - 1} more" if len(differing) > 1 else "")
    acceptance = [c for c in checks if c.proves == "suboptimal" and c.status in ("pass", "inconclusive")]
    if not acceptance:
        found = "no acceptance check ran to show it accepting fewer drafts than the canonical algorithm"
    else:
        passed = sum(c.status == "pass" for c in acceptance)
        found = (
            f"no acceptance check found it accepting fewer drafts than the canonical algorithm ({passed} of "
            f"{len(acceptance)} passed)"
        )
    return (
        f"the law given the drafts is not the canonical algorithm's ({shown}), and {found}: not the difference of a "
        "lossless-suboptimal verifier"
    )


def summarise(checks: list[CheckResult]) -> dict[str, int]:
    """Count of checks by status."""
    return {status: sum(c.status == status for c in checks) for status in STATUSES}


@dataclasses.dataclass(frozen=True)
class Judgement:
    """A verdict, and the reason it is no better (``None`` when the checks speak for themselves)."""

    verdict: str
    reason: str | None = None


def verdict(checks: list[CheckResult], *, finished: bool = True) -> str:
    """The run's verdict from its checks' statuses and findings (see the module docstring)."""
    return judge(checks, finished=finished).verdict


def judge(checks: list[CheckResult], *, finished: bool = True, left_out: Iterable[str] = ()) -> Judgement:
    """The verdict and its reason; ``left_out``: ids of the battery's results a subset did not run."""
    failing = {c.finding for c in checks if c.status == "fail"}
    if failing & {"contract", "support"}:
        return Judgement("non-conformant")
    if "renormalisation" in failing:
        return Judgement("non-conformant", "does not renormalise its inputs, though it declares unnormalised=True")
    if "loss" in failing:
        return Judgement("lossy")
    # accepting measurably more than the declared algorithm (a tree verifier can beat its algorithm,
    # specverify.checks._trees) speaks, as accepting fewer does, for a different lossless algorithm
    accepts_more = any(c.status == "pass" and c.evidence.get("accepts_more") is True for c in checks)
    if "non-canonical" in failing and "suboptimal" not in failing and not accepts_more:
        return Judgement("lossy", _non_canonical_reason(checks))
    if any(c.status == "error" for c in checks):
        return Judgement("error")
    # a loop whose history parameters count the prompt as another engine does (specverify._history.conventions)
    conventions = sorted(
        {c.evidence["convention"] for c in checks if c.status == "inconclusive" and "convention" in c.evidence}
    )
    if conventions:
        return Judgement(
            "inconclusive",
            f"the history parameters count tokens by the {' or '.join(conventions)} convention, not by the history "
            "law judged by: a convention finding, not a speculation bug",
        )
    left = list(left_out)
    if left:
        shown = ", ".join(left[:6]) + (f" and {len(left) - 6} more" if len(left) > 6 else "")
        reason = (
            f"a subset of the battery ran: {len(left)} results left out ({shown}); a subset can fail a sampler, not "
            "pass it"
        )
        return Judgement("inconclusive", reason)
    if not finished:
        return Judgement("inconclusive", "the run was interrupted: not every planned check ran")
    undecided = [c.id for c in checks if c.status == "inconclusive"]
    # an undeclared sampler that warps as another engine does (specverify._warps.declared): the preset
    # that explains the most checks is the one to declare
    explained = collections.Counter(
        c.evidence["explained_by"] for c in checks if c.status == "inconclusive" and "explained_by" in c.evidence
    )
    if explained:
        ranked = sorted(explained, key=lambda name: (-explained[name], name))
        return Judgement(
            "inconclusive",
            f"judged by transformers' warp, but the output fits the {' or '.join(ranked)} preset's: declare "
            f"warp={ranked[0]!r}",
        )
    if undecided:
        return Judgement("inconclusive", f"undecided at this budget: {', '.join(undecided)}")
    laws = [c for c in checks if c.status == "pass" and c.proves == "loss"]
    if not laws:
        return Judgement("inconclusive", "no test of the target's own law passed")
    if failing & {"suboptimal", "non-canonical"}:
        missing = _uncovered(checks, laws)
        if missing:
            return Judgement(
                "inconclusive",
                "the sampler differs from the canonical algorithm where no target-law test ran, so its law there is "
                "unknown: " + "; ".join(missing),
            )
        if "suboptimal" not in failing:  # non-canonical, and accepting more: lossless where its law was tested
            return Judgement(
                "lossless-suboptimal",
                "a different lossless algorithm from the declared one: its law given the candidates differs, the "
                "target's law holds, and it accepts more",
            )
        return Judgement("lossless-suboptimal")
    return Judgement("conformant")


def deviations(check: CheckResult) -> list[tuple[int, int, str | None]]:
    """Where a failing check saw the sampler differ, as ``(K, V, kind)``: its smallest failing case
    (every case of a failing batch), else every shape it gave the sampler."""
    example = check.evidence.get("minimal_example")
    items = example.get("cases", [example]) if isinstance(example, Mapping) else []
    found = [
        (int(e["K"]), int(e["V"]), e.get("label") or check.case)
        for e in items
        if isinstance(e, Mapping) and "K" in e and "V" in e
    ]
    if found:
        return found
    if check.reach is not None:
        return [(k, v, check.case) for k, v in check.reach.shapes]
    return []


def _uncovered(checks: list[CheckResult], laws: list[CheckResult]) -> list[str]:
    """Each place a ``non-canonical`` or ``suboptimal`` failure was seen that no passing target-law
    test covered, in words.  A kind no target-law check of the run generates (an edge kind of the
    conditional checks, a fixed model) is matched on its shape alone (docs/statistics.md)."""
    law_kinds = {c.case for c in checks if c.proves == "loss" and c.case}
    missing: list[str] = []
    for check in checks:
        if check.status != "fail" or check.finding not in ("non-canonical", "suboptimal"):
            continue
        for k, vocab, kind in dict.fromkeys(deviations(check)):
            wanted = kind if kind in law_kinds else None
            if not any(c.reach is not None and c.reach.covers(k, vocab, wanted) for c in laws):
                where = f"K={k}, V={vocab}" + (f", kind {wanted}" if wanted else "")
                missing.append(f"{check.id} at {where}")
    return missing


def left_out(run: RunInfo | Mapping[str, Any]) -> list[str]:
    """The ids of the battery's results a run with ``run["select"]`` did not plan (empty for a whole run).

    A run records them as ``run["left_out"]`` when it starts, so reading its JSON needs no battery.
    A result of an older form that has a selection but no ``left_out`` is brought up to date where
    it is read (:func:`specverify._run.migrate`); read as it is, its selection counts as a subset of
    unknown reach (:data:`UNKNOWN_LEFT_OUT`), so it can fail a sampler, never pass it.
    """
    record = RunInfo.from_json(run)
    if record.left_out is not None:
        return list(record.left_out)
    return [UNKNOWN_LEFT_OUT] if record.select else []


def _jsonable(value: Any) -> Any:
    """Plain JSON types only: numpy scalars to Python; NaN and infinities (an impossible outcome's
    statistic, a ratio to zero) become null."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, enum.Enum):
        return _jsonable(value.value)
    if hasattr(value, "tolist"):
        return _jsonable(value.tolist())
    if isinstance(value, float):
        return value if math.isfinite(value) else None  # JSON has no NaN or infinity
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)
