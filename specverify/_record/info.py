"""The run's record, typed: what a run was (the JSON's ``run``), as :class:`RunInfo` and its parts.

A run's JSON has always held its record as an object of plain keys; the readers of a
:class:`~specverify.RunResult` read it by attribute (``result.run.isolation.mode``), and its JSON is
the same object as before (:meth:`RunInfo.to_json`, key for key; a key an older or newer writer
added and this one does not know is kept as it was, in ``extra``).  A :class:`RunInfo` is also a
read-only mapping of that JSON (``result.run["isolation"]["mode"]``), for code that reads the JSON's
keys.  No torch here: the report reads records without it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["VOLATILE_KEYS", "Isolation", "RunInfo", "SamplerInfo", "Timing", "reproducible"]


@dataclasses.dataclass
class SamplerInfo:
    """The subject: its name, and what it declares (a sampler's capabilities, a tree's algorithm,
    a loop's sampling parameters)."""

    name: str | None = None
    capabilities: dict[str, Any] | None = None
    algorithm: str | None = None
    parameters: list[str] | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def is_loop(self) -> bool:
        return self.parameters is not None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name}
        if self.parameters is not None:  # a loop declares parameters, never capabilities
            data["parameters"] = list(self.parameters)
        else:
            data["capabilities"] = self.capabilities
        if self.algorithm is not None:
            data["algorithm"] = self.algorithm
        return {**data, **self.extra}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SamplerInfo:
        return cls(**_known(cls, data))


@dataclasses.dataclass
class Isolation:
    """Where the subject ran (``mode``), why there (``reason``), its time limits, and what its
    process went through."""

    mode: str | None = None
    reason: str | None = None
    timeout: float | None = None
    first_timeout: float | None = None  # a sampler's first call (a loop has none)
    crashes: int | None = None
    hangs: int | None = None
    worker_starts: int | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"mode": self.mode, "reason": self.reason, "timeout": self.timeout}
        if self.first_timeout is not None:
            data["first_timeout"] = self.first_timeout
        for name in ("crashes", "hangs", "worker_starts"):
            if getattr(self, name) is not None:
                data[name] = getattr(self, name)
        return {**data, **self.extra}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Isolation:
        return cls(**_known(cls, data))


@dataclasses.dataclass
class Timing:
    """Where the run's time went: the whole, the sampler's share (a loop's: its generations,
    each timed whole, with the model calls it makes) and the harness's (``None`` where the
    sampler ran elsewhere)."""

    total_seconds: float | None = None
    sampler_seconds: float | None = None
    harness_seconds: float | None = None
    harness_share: float | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"total_seconds": self.total_seconds}
        if self.sampler_seconds is not None:
            data.update(
                sampler_seconds=self.sampler_seconds,
                harness_seconds=self.harness_seconds,
                harness_share=self.harness_share,
            )
        return {**data, **self.extra}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Timing:
        return cls(**_known(cls, data))


#: The plan's keys: a run that was planned records all four, a load failure none.
_PLAN_KEYS = ("planned_checks", "select", "left_out", "alpha_per_decision")
#: Keys written only where they say something (a tree's or loop's contract, a loop's reach, what a
#: tree sampler's declared limits kept from being posed, an interruption, a sampler's counters).
_SPARSE = ("contract", "reach", "not_posed", "interrupted", "sampler_calls", "sampler_rows", "sampler_seconds")


@dataclasses.dataclass
class RunInfo(Mapping[str, Any]):
    """What a run was: the subject, budget and seed, where it ran, its plan, and what it cost.

    ``left_out`` holds the ids of the battery's results a ``select`` left out (``[]`` for a whole
    run); ``None`` where the run did not record them (a result of an older form).  ``not_posed``:
    the trees a tree sampler's declared limits (``max_children``, ...) kept its checks from posing,
    ``"<check id>: <what>: <why>"`` each (``None`` where nothing was left out).
    """

    sampler: SamplerInfo = dataclasses.field(default_factory=SamplerInfo)
    spec: str | None = None
    seed: int | None = None
    budget: dict[str, Any] | None = None
    family_wise_alpha: float | None = None
    power: float | None = None
    tv: float | None = None
    device: str | None = None
    dtype: str | None = None
    platform: str | None = None
    versions: dict[str, str] | None = None
    started: str | None = None
    isolation: Isolation | None = None
    contract: str | None = None
    reach: str | None = None
    not_posed: list[str] | None = None
    planned_checks: int | None = None
    select: list[str] | None = None
    left_out: list[str] | None = None
    alpha_per_decision: float | None = None
    interrupted: bool | None = None
    sampler_calls: int | None = None
    sampler_rows: int | None = None
    sampler_seconds: float | None = None
    timing: Timing | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def planned(self) -> bool:
        """Whether the run got as far as a plan (a sampler that could not load did not)."""
        return any(getattr(self, key) is not None for key in _PLAN_KEYS)

    def to_json(self) -> dict[str, Any]:
        """The record as the JSON's ``run`` holds it (plain values, as they were written)."""
        data: dict[str, Any] = {"sampler": self.sampler.to_json()}
        for key in (
            "spec",
            "seed",
            "budget",
            "family_wise_alpha",
            "power",
            "tv",
            "device",
            "dtype",
            "platform",
            "versions",
            "started",
        ):
            data[key] = getattr(self, key)
        if self.isolation is not None:
            data["isolation"] = self.isolation.to_json()
        if self.planned:
            data.update({key: getattr(self, key) for key in _PLAN_KEYS})
        data.update({key: getattr(self, key) for key in _SPARSE if getattr(self, key) is not None})
        if self.timing is not None:
            data["timing"] = self.timing.to_json()
        return {**data, **self.extra}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunInfo:
        """The record of the JSON's ``run`` (a partial one too: what it lacks is ``None``)."""
        if isinstance(data, RunInfo):
            return data
        values = _known(cls, data)
        parts = {"sampler": SamplerInfo, "isolation": Isolation, "timing": Timing}
        for key, part in parts.items():
            if isinstance(values.get(key), Mapping):
                values[key] = part.from_json(values[key])  # type: ignore[attr-defined]
            elif values.get(key) is not None:
                raise TypeError(f"run.{key} is a {type(values[key]).__name__}, not an object")
        return cls(**values)

    # --- the JSON's view, for readers of its keys ---------------------------------------------

    def __getitem__(self, key: str) -> Any:
        return self.to_json()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_json())

    def __len__(self) -> int:
        return len(self.to_json())


def _known(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """``data``'s keys that are fields of ``cls``, and the rest under ``extra``."""
    fields = {f.name for f in dataclasses.fields(cls)} - {"extra"}
    values = {key: value for key, value in data.items() if key in fields}
    values["extra"] = {key: value for key, value in data.items() if key not in fields}
    return values


#: A run JSON's keys that differ between two runs of one seed by nature (when and how fast it ran,
#: on what, with how many workers; the sampler's own counters, since several workers run units
#: ahead and a stop drops those not started but not those running): everything else, every
#: check's samples and counts included, a rerun of the seed must reproduce.
VOLATILE_KEYS = frozenset(
    {
        "duration_s",
        "started",
        "finished_at",
        "timing",
        "sampler_seconds",
        "sampler_rows",
        "sampler_calls",
        "versions",
        "platform",
        "workers",
        "worker_starts",
    }
)


def reproducible(value: Any) -> Any:
    """``value`` (a run's JSON, or part of one) without its :data:`VOLATILE_KEYS`, at any depth:
    what two runs of the same seed must agree on, whatever the worker count or machine."""
    if isinstance(value, Mapping):
        return {key: reproducible(item) for key, item in value.items() if key not in VOLATILE_KEYS}
    if isinstance(value, list):
        return [reproducible(item) for item in value]
    return value
