"""Several samplers under test sharing one experiment: its units spread over them, results in order.

An experiment (a tally of many rows) is cut into **units** of :data:`UNIT_ROWS` rows, each with a
seed of its own derived from the experiment's seed and the unit's index (:func:`unit_seed`), never
from the worker that runs it.  Results are reduced in unit order and a sequential decision looks at
them in that order, so for a given run seed the counts, the p-values and the verdict are the same
whether one worker ran the units or eight did, in whatever order they landed.  (That holds for a
sampler that draws its randomness from the generator it is given, as the chain contract asks; one
that draws from a global stream is caught by the contract's generator checks.)

* :class:`LocalPool`: the run's sampler under test and ``N - 1`` more, each in its own supervised
  process; one harness thread per worker sends it units, which it runs and tallies itself (only
  the counts travel back, so the harness's share of the work is spread over the workers too: the
  CLI's ``--workers N``, ``--devices``).
* :class:`SerialPool`: the one sampler under test, units one after another (the default).
* ``specverify._calling.ray_pool.RayPool``: the same units on Ray actors (``--executor ray``).

A unit is a picklable value and a module-level function of ``(sampler under test, unit)``
(:func:`run_unit` wraps it), so the same units run in a harness thread or on a Ray actor.  A work
function may have a ``streamed`` form, ``streamed(sut, units)`` yielding the units' results in
order from one stream of calls (the next unit's first call sent while the last one's output is
tallied): the serial pool runs units so, keeping its one sampler process busy between units.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import queue
import threading
from collections.abc import Callable, Generator, Iterable
from typing import Any, Protocol, TypeVar

from .._record.reach import Reach, ReachRecorder
from .._seeds import derive_seed
from ..errors import SamplerFault

__all__ = [
    "COUNTERS",
    "IN_FLIGHT_PER_WORKER",
    "LocalPool",
    "Pool",
    "SerialPool",
    "UNIT_ROWS",
    "UnitDone",
    "run_unit",
    "unit_seed",
    "unit_spans",
]

#: Rows in one unit of an experiment: the grain at which work is spread and seeds derive.  Not a
#: function of the worker count, nor of the sampler's ``max_batch`` (a unit is cut into its calls).
UNIT_ROWS = 65_536

#: Units a pool keeps in flight for each worker (:attr:`LocalPool.depth`; Ray actors queue as many).
IN_FLIGHT_PER_WORKER = 2

#: What a sampler under test counts as it is called; a pool sums them over its workers.
COUNTERS = ("calls", "rows", "seconds", "crashes", "hangs", "worker_starts")

U = TypeVar("U")


def unit_seed(seed: int, index: int) -> int:
    """The seed of unit ``index`` of an experiment seeded ``seed``: unit 0 keeps the experiment's
    seed, so an experiment of one unit draws exactly what it drew before units existed."""
    return seed if index == 0 else derive_seed(seed, "unit", index)


def unit_spans(total: int, rows: int = UNIT_ROWS) -> list[tuple[int, int, int]]:
    """``(index, start, stop)`` of each unit of an experiment of ``total`` rows."""
    return [(i, start, min(start + rows, total)) for i, start in enumerate(range(0, total, rows))]


@dataclasses.dataclass
class UnitDone:
    """A unit's result, with what its worker recorded while running it: the shapes it was given
    (merged into the check's reach) and its counters' growth."""

    result: Any
    reach: Reach | None
    usage: dict[str, float]


def run_unit(sut: Any, work: Callable[[Any, Any], Any], unit: Any) -> UnitDone:
    """Run ``work(sut, unit)`` with a reach recorder of its own, so what it gave the sampler travels
    back with its result from whichever worker (thread or actor) ran it."""
    if not hasattr(sut, "reach"):  # a bare callable (a loop given as it is): nothing recorded
        return UnitDone(work(sut, unit), None, dict.fromkeys(COUNTERS, 0))
    before = {name: getattr(sut, name, 0) for name in COUNTERS}
    kept, sut.reach = sut.reach, ReachRecorder()
    try:
        result = work(sut, unit)
        return UnitDone(result, sut.reach.snapshot(), {name: getattr(sut, name, 0) - before[name] for name in COUNTERS})
    finally:
        sut.reach = kept


class Pool(Protocol):
    """Where an experiment's units run."""

    size: int

    def map(self, work: Callable[[Any, U], Any], units: Iterable[U]) -> Generator[UnitDone, None, None]:
        """``work(sut, unit)`` for each unit (:func:`run_unit`), yielded in unit order; leaving the
        loop early drops the units in flight (a pool may wait for those already running).  A
        :class:`SamplerFault` of a unit is raised in its place (the units after it are dropped)."""
        ...

    def usage(self) -> dict[str, float]:
        """The counters (:data:`COUNTERS`) of every worker, summed."""
        ...

    def close(self) -> None: ...

    def kill(self) -> None: ...


class SerialPool:
    """The run's one sampler under test: units one after another, in this thread."""

    size = 1

    def __init__(self, sut: Any) -> None:
        self.primary = sut

    def map(self, work: Callable[[Any, U], Any], units: Iterable[U]) -> Generator[UnitDone, None, None]:
        streamed = getattr(work, "streamed", None)
        if streamed is not None and hasattr(
            self.primary, "reach"
        ):  # what it gives the sampler is recorded in the sampler's own reach
            for result in streamed(self.primary, units):
                yield UnitDone(result, None, dict.fromkeys(COUNTERS, 0))
            return
        for unit in units:
            yield run_unit(self.primary, work, unit)

    def usage(self) -> dict[str, float]:
        return {name: getattr(self.primary, name, 0) for name in COUNTERS}

    def close(self) -> None:
        self.primary.close()

    def kill(self) -> None:
        self.primary.kill()


class LocalPool:
    """``N`` samplers under test on this machine, one supervised process each, fed by one harness
    thread each; ``members[0]`` is the run's own, which also runs every check that is not cut into
    units (the contract's calls, the uniform grids, the full-domain law, searches).

    Each worker is isolated, time-limited and restarted on a fault exactly as the one worker is
    (:class:`~specverify._calling.sut.SamplerUnderTest`): a fault in a unit is the check's fault.
    """

    def __init__(self, members: list[Any]) -> None:
        if not members:
            raise ValueError("a pool needs at least one sampler under test")
        self.members = members
        self.size = len(members)
        self.primary = members[0]
        self._free: queue.SimpleQueue[Any] = queue.SimpleQueue()
        for member in members:
            self._free.put(member)
        self._threads = concurrent.futures.ThreadPoolExecutor(
            max_workers=self.depth, thread_name_prefix="specverify-unit"
        )

    @property
    def depth(self) -> int:
        """Units in flight: two a worker, so a worker that finishes first starts its next unit at
        once instead of waiting for the oldest unit, whose result is taken first (in unit order)."""
        return IN_FLIGHT_PER_WORKER * self.size

    def _on_free_member(self, work: Callable[[Any, U], Any], unit: U, left: threading.Event) -> UnitDone | None:
        member = self._free.get()  # waits while every worker runs a unit
        try:
            if left.is_set():  # the map was left before this unit started: dropped unrun
                return None
            if hasattr(member, "unit"):  # tallied in the worker's process: the harness's work is spread too
                done: UnitDone = member.unit(work, unit, there=True)
                return done
            return run_unit(member, work, unit)
        except SamplerFault as fault:
            fault.member = member  # type: ignore[attr-defined]  # whose fault details to keep
            raise
        finally:
            self._free.put(member)

    def map(self, work: Callable[[Any, U], Any], units: Iterable[U]) -> Generator[UnitDone, None, None]:
        if self.size == 1:
            yield from SerialPool(self.primary).map(work, units)
            return
        flying: collections.deque[concurrent.futures.Future[UnitDone | None]] = collections.deque()
        pending, left = iter(units), threading.Event()
        try:
            for unit in pending:
                flying.append(self._threads.submit(self._on_free_member, work, unit, left))
                if len(flying) == self.depth:
                    yield self._landed(flying.popleft())
            while flying:
                yield self._landed(flying.popleft())
        except KeyboardInterrupt:
            self.kill()  # Ctrl-C waits for no unit: what was in flight ends with the processes
            raise
        finally:  # left early or a unit failed: the units behind it are dropped, those running waited for
            left.set()
            concurrent.futures.wait(flying)

    def _landed(self, future: concurrent.futures.Future[UnitDone | None]) -> UnitDone:
        try:
            done = future.result()
            assert done is not None, "a unit is dropped only once its map is left"
            return done
        except SamplerFault as fault:
            member = getattr(fault, "member", None)
            if member is not None and member is not self.primary:
                self.primary.last_fault = member.last_fault  # the run reads the details from its own
            raise

    def usage(self) -> dict[str, float]:
        return {name: sum(getattr(m, name, 0) for m in self.members) for name in COUNTERS}

    def close(self) -> None:
        self._threads.shutdown(wait=True)
        for member in self.members:
            member.close()

    def kill(self) -> None:
        for member in self.members:
            member.kill()
        self._threads.shutdown(wait=False)
