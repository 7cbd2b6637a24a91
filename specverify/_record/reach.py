"""Reach: the shapes, precisions and case kinds a check actually gave the sampler.

A claim holds where it was tested and nowhere else.  The harness records every call it makes
(:class:`ReachRecorder`, fed by :class:`~specverify._calling.sut.SamplerUnderTest`), so a check's
:class:`Reach` is what the sampler saw, never what the check meant to give it; the run's printed
guarantee (:func:`guarantee`) names that reach.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

__all__ = ["Reach", "ReachRecorder", "claims", "guarantee", "merge", "span_text"]

#: Distinct (K, V) shapes kept per check; beyond this only the ranges grow.
MAX_SHAPES = 64


@dataclasses.dataclass(frozen=True)
class Reach:
    """What one check covered.

    Attributes:
        vocab: smallest and largest vocabulary size given to the sampler.
        k: smallest and largest number of draft tokens.
        batch: smallest and largest number of rows in one call.
        rows: rows given in all.
        dtypes: probability dtypes the inputs were passed in.
        shapes: distinct ``(K, V)`` pairs, sorted (at most :data:`MAX_SHAPES`; ``shapes_complete``
            says whether every pair is listed).
        kinds: the case kinds the check generated (``random``, ``zero-residual``, ...).
    """

    vocab: tuple[int, int]
    k: tuple[int, int]
    batch: tuple[int, int]
    rows: int
    dtypes: tuple[str, ...]
    shapes: tuple[tuple[int, int], ...]
    shapes_complete: bool = True
    kinds: tuple[str, ...] = ()

    def covers(self, k: int, vocab: int, kind: str | None = None) -> bool:
        """Whether the shape ``(k, vocab)`` (and ``kind``, if given) was tested exactly."""
        shape_seen = (k, vocab) in self.shapes or (
            not self.shapes_complete and self.k[0] <= k <= self.k[1] and self.vocab[0] <= vocab <= self.vocab[1]
        )
        return shape_seen and (kind is None or not self.kinds or kind in self.kinds)

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["shapes"] = [list(s) for s in self.shapes]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Reach:
        return cls(
            vocab=tuple(data["vocab"]),
            k=tuple(data["k"]),
            batch=tuple(data["batch"]),
            rows=int(data["rows"]),
            dtypes=tuple(data["dtypes"]),
            shapes=tuple(tuple(s) for s in data["shapes"]),
            shapes_complete=bool(data.get("shapes_complete", True)),
            kinds=tuple(data.get("kinds", ())),
        )


def merge(reaches: Iterable[Reach | None]) -> Reach | None:
    """The union of several reaches (``None`` where none has any)."""
    items = [r for r in reaches if r is not None]
    if not items:
        return None
    shapes = sorted({s for r in items for s in r.shapes})
    return Reach(
        vocab=(min(r.vocab[0] for r in items), max(r.vocab[1] for r in items)),
        k=(min(r.k[0] for r in items), max(r.k[1] for r in items)),
        batch=(min(r.batch[0] for r in items), max(r.batch[1] for r in items)),
        rows=sum(r.rows for r in items),
        dtypes=tuple(sorted({d for r in items for d in r.dtypes})),
        shapes=tuple(shapes[:MAX_SHAPES]),
        shapes_complete=all(r.shapes_complete for r in items) and len(shapes) <= MAX_SHAPES,
        kinds=tuple(sorted({kind for r in items for kind in r.kinds})),
    )


class ReachRecorder:
    """Accumulates the calls made while one check runs (cheap: a few integers per call)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._vocab: list[int] = []
        self._k: list[int] = []
        self._batch: list[int] = []
        self._rows = 0
        self._dtypes: set[str] = set()
        self._shapes: set[tuple[int, int]] = set()
        self._overflow = False

    def record(self, *, batch: int, k: int, vocab: int, dtype: str, rows: int | None = None) -> None:
        """Calls of ``batch`` rows each, ``rows`` in all (default: one call)."""
        if not self._vocab:
            self._vocab, self._k, self._batch = [vocab, vocab], [k, k], [batch, batch]
        else:
            self._vocab = [min(self._vocab[0], vocab), max(self._vocab[1], vocab)]
            self._k = [min(self._k[0], k), max(self._k[1], k)]
            self._batch = [min(self._batch[0], batch), max(self._batch[1], batch)]
        self._rows += batch if rows is None else rows
        self._dtypes.add(dtype)
        if len(self._shapes) < MAX_SHAPES or (k, vocab) in self._shapes:
            self._shapes.add((k, vocab))
        else:
            self._overflow = True

    def snapshot(self, kinds: Iterable[str] = ()) -> Reach | None:
        """What was recorded since the last reset, or ``None`` if the sampler was not called."""
        if not self._vocab:
            return None
        return Reach(
            vocab=(self._vocab[0], self._vocab[1]),
            k=(self._k[0], self._k[1]),
            batch=(self._batch[0], self._batch[1]),
            rows=self._rows,
            dtypes=tuple(sorted(self._dtypes)),
            shapes=tuple(sorted(self._shapes)),
            shapes_complete=not self._overflow,
            kinds=tuple(sorted(set(kinds))),
        )


#: Checks whose claims are within this factor of each other share one clause of the guarantee.
MERGE_FACTOR = 2.0
#: A clause also ends where the largest vocabulary tested grows past this factor.
VOCAB_FACTOR = 64


def guarantee(checks: Iterable[Any], *, power: float, alpha: float) -> str | None:
    """The run's promise in one line, naming the reach each claim was tested on; ``None`` if no
    statistical check passed.  Takes :class:`~specverify.CheckResult` objects.

    Checks are grouped by the largest vocabulary they tested: a budget affords a coarser TV at
    V = 262,144 than at V = 8, and one number for all would either overstate the large shapes or
    understate the small ones.  Groups whose claims lie within :data:`MERGE_FACTOR` of each other
    are merged; each clause claims the largest detectable TV of its checks, on their merged reach,
    so no clause says more than its checks tested.
    """
    groups = claims(checks)
    if not groups:
        return None
    tail = f"false-alarm probability of the run <= {alpha:g}"
    if len(groups) == 1:
        detect, reach = groups[0]
        return f"every statistical check detects {_tv(detect)} with probability >= {power}{_where(reach)}; {tail}"
    clauses = "; ".join(f"{_tv(detect)}{_where(reach)}" for detect, reach in groups)
    return f"every statistical check detects, with probability >= {power}: {clauses}; {tail}"


def claims(checks: Iterable[Any]) -> list[tuple[float, Reach | None]]:
    """The guarantee's reach classes: ``(detectable TV, merged reach)`` of the passing statistical
    checks, by increasing vocabulary (``[]`` if none passed), as :func:`guarantee` states them and
    the HTML report's banner lists them.  Takes objects with ``status``, ``min_detectable_tv`` and
    ``reach`` (:class:`~specverify.CheckResult`)."""
    passed = [c for c in checks if c.status == "pass" and c.min_detectable_tv is not None]
    return _claim_groups(passed) if passed else []


def _tv(detect: float) -> str:
    """A clause's claim: a TV, or in words where only exact checks make it (never "TV >= 0")."""
    return "any deviation (exact)" if detect == 0 else f"TV >= {detect:.3g}"


def span_text(reach: Reach) -> str:
    """A reach as the guarantee names it: ``V in 2..8, K in 1..4``."""
    return f"{_span('V', reach.vocab)}, {_span('K', reach.k)}"


def _claim_groups(passed: list[Any]) -> list[tuple[float, Reach | None]]:
    """``(claim, reach)`` clauses, by increasing largest vocabulary tested.

    Checks sorted by the largest V they tested; a clause ends where the running worst claim has
    grown past :data:`MERGE_FACTOR` times the claim the clause began with, or the largest V past
    :data:`VOCAB_FACTOR` times the clause's first, but never between checks of the same largest V
    (two clauses on one vocabulary would each claim a different TV for it).  Each clause claims the
    worst claim of every check up to its end (so the claims grow with V and each holds for all
    checks it speaks for) on the merged reach of its own checks.
    """
    known = sorted((c for c in passed if c.reach is not None), key=lambda c: (c.reach.vocab[1], c.min_detectable_tv))
    unknown = [c for c in passed if c.reach is None]
    groups: list[list[Any]] = []
    start = worst = 0.0
    for c in known:
        worst = max(worst, c.min_detectable_tv)
        same_vocab = (
            bool(groups) and c.reach.vocab[1] == groups[-1][-1].reach.vocab[1]
        )  # two clauses on one V would contradict
        if groups and (
            same_vocab
            or (worst <= MERGE_FACTOR * start and c.reach.vocab[1] <= VOCAB_FACTOR * groups[-1][0].reach.vocab[1])
        ):
            groups[-1].append(c)
        else:
            groups.append([c])
            start = worst
    if unknown:  # a claim with no recorded reach joins the last clause, which then names no reach
        groups = groups or [[]]
        groups[-1].extend(unknown)
    clauses, running = [], 0.0
    for g in groups:
        running = max(running, *(c.min_detectable_tv for c in g))
        clauses.append((running, None if any(c.reach is None for c in g) else merge(c.reach for c in g)))
    return clauses


def _where(reach: Reach | None) -> str:
    if reach is None:
        return ""
    return f" on {span_text(reach)}"


def _span(name: str, bounds: tuple[int, int]) -> str:
    """``V in 1025..4097`` (no thousands separators: a comma inside a range reads as a list), or ``V = 8``."""
    low, high = bounds
    return f"{name} = {low}" if low == high else f"{name} in {low}..{high}"
