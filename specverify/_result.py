"""Results: one :class:`CheckResult` per check, one :class:`RunResult` per run, and the verdict.

A failing check says what its failure *proves* (its ``finding``), and only :func:`verdict` turns
findings into a verdict, so no check decides the outcome of the run on its own:

* ``contract`` or ``support``: the sampler broke its contract or emitted an impossible token
  (exact, no statistics) -> ``non-conformant``;
* ``loss``: the emitted tokens do not follow the target's law -> ``lossy``;
* ``non-canonical``: the law given the drafts differs from the canonical algorithm's.  Together with
  lower acceptance and no ``loss`` it is a different lossless algorithm (``lossless-suboptimal``);
  otherwise it is a bias the marginal checks were too weak to see (``lossy``);
* ``suboptimal``: fewer accepted drafts than the canonical algorithm -> ``lossless-suboptimal``.

A lossless verdict needs evidence for it: at least one check whose failure would have proved a
``loss`` (a test of the emitted tokens against the target's own law) must have passed.  A run of a
subset of the battery that holds none, a run that was interrupted, and a check that could not reach
its promised power are ``inconclusive``, never a pass; a check the harness itself could not run is
an ``error``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from ._reach import Reach

__all__ = ["CheckResult", "EXIT_CODES", "RunResult", "SCHEMA_VERSION", "summarise", "verdict"]

SCHEMA_VERSION = 1
STATUSES = ("pass", "fail", "skip", "inconclusive", "error")
FINDINGS = ("contract", "support", "loss", "non-canonical", "suboptimal")
VERDICTS = ("conformant", "lossless-suboptimal", "lossy", "non-conformant", "inconclusive", "error")
EXIT_CODES = {
    "conformant": 0,
    "lossless-suboptimal": 0,
    "lossy": 1,
    "non-conformant": 1,
    "error": 2,
    "inconclusive": 3,
}


@dataclasses.dataclass
class CheckResult:
    """The outcome of one check, with its evidence.

    ``p_value``, ``samples`` and ``min_detectable_tv`` are ``None`` where they do not apply (exact
    checks have no p-value); a ``p_value`` is always compared with the ``alpha`` beside it.
    ``finding`` says what a failure proves; ``proves`` says what this check's failure *would* prove
    (set on passes too, so a verdict can tell which laws were tested).  ``evidence`` holds what a
    person needs to believe the result: counts, the TV estimate, the minimal example and a repro.
    ``reach`` is what the sampler was given while the check ran (shapes, dtypes, kinds): the claim
    holds there and nowhere else.
    """

    id: str
    family: str
    status: str
    case: str | None = None
    finding: str | None = None
    p_value: float | None = None
    alpha: float | None = None
    samples: int | None = None
    min_detectable_tv: float | None = None
    message: str | None = None
    evidence: dict[str, Any] = dataclasses.field(default_factory=dict)
    duration_s: float = 0.0
    proves: str | None = None
    reach: Reach | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}")
        for name in ("finding", "proves"):
            value = getattr(self, name)
            if value is not None and value not in FINDINGS:
                raise ValueError(f"unknown {name} {value!r}")
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

    run: dict[str, Any]
    checks: list[CheckResult]
    finished: bool = True

    @property
    def verdict(self) -> str:
        return verdict(self.checks, finished=self.finished)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "verdict": self.verdict,
            "finished": self.finished,
            "run": _jsonable(self.run),
            "summary": summarise(self.checks),
            "checks": [c.to_json() for c in self.checks],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunResult:
        if data.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(f"unsupported schema_version {data.get('schema_version')!r}")
        checks = [CheckResult.from_json(c) for c in data["checks"]]
        return cls(run=data["run"], checks=checks, finished=data.get("finished", True))


def summarise(checks: list[CheckResult]) -> dict[str, int]:
    """Count of checks by status."""
    return {status: sum(c.status == status for c in checks) for status in STATUSES}


def verdict(checks: list[CheckResult], *, finished: bool = True) -> str:
    """The run's verdict from its checks' statuses and findings (see the module docstring)."""
    failing = {c.finding for c in checks if c.status == "fail"}
    if failing & {"contract", "support"}:
        return "non-conformant"
    if "loss" in failing:
        return "lossy"
    if "non-canonical" in failing and "suboptimal" not in failing:
        return "lossy"
    if any(c.status == "error" for c in checks):
        return "error"
    law_tested = any(c.status == "pass" and c.proves == "loss" for c in checks)
    if not finished or not law_tested or any(c.status == "inconclusive" for c in checks):
        return "inconclusive"
    if failing & {"suboptimal", "non-canonical"}:
        return "lossless-suboptimal"
    return "conformant"


def _jsonable(value: Any) -> Any:
    """Plain JSON types only: numpy scalars to Python; NaN and infinities (an impossible outcome's
    statistic, a ratio to zero) become null."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "tolist"):
        return _jsonable(value.tolist())
    if isinstance(value, float):
        return value if math.isfinite(value) else None  # JSON has no NaN or infinity
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)
