"""The time a run has left, weighed by what each check costs, not by how many checks are done.

Checks differ in cost by orders of magnitude (an exact check, a search's few screens, a fit drawing
200k rows), so counting checks done put the estimate off by 5x and more.  Each planned check is
weighed by the rows the plan gives it (rehearsed where ``--plan`` or ``--max-time`` rehearsed the
plan, else each check's own sample-size rule or its decisions at the cap) plus one fixed share
for the harness's own work on it.  As the run goes the estimate learns two things from the checks
that finished: how many of their planned rows they really drew (a cap is rarely reached; a failing
check stops early, and what it did not draw leaves the total), and the seconds a unit of weight
takes on this machine.  Time left is the weight left at that pace.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["Estimate", "planned_costs", "replay"]


def planned_costs(planned: Sequence[Any], budget: Any, cost: Any = None) -> list[list[Any]]:
    """``[id, rows, skipped, by volume]`` of each planned check: the rows of ``cost`` (a rehearsed
    plan's :class:`~specverify._run._cost.RunCost`) where given, else the plan's own count (at the
    cap, of which a check draws about ``DRAWN_SHARE``); a check of the shapes family (sized by the
    budget's volume of elements, not rows) counts the small-case rows its volume would buy."""
    from .._run._cost import NOT_CALIBRATED, plan_cost

    rehearsed = cost is not None
    checks = (cost if rehearsed else plan_cost(planned, budget, NOT_CALIBRATED)).checks
    out = []
    for p, c in zip(planned, checks):
        volume = p.check.family == "shapes" and c.samples > 0
        rows = c.samples if rehearsed else c.samples * DRAWN_SHARE
        if volume:
            rows = _volume(p.check, budget) / SMALL_ROW_ELEMENTS
        out.append([c.id, round(rows), bool(c.skipped), volume])
    return out


def _volume(check: Any, budget: Any) -> float:
    """Elements a shapes check draws, about: the budget's volume of each of its shapes, half used
    on average (a shape's rows are capped by the volume, sized below it), or its float-edge cases'
    fixed rows."""
    if hasattr(check, "kinds") and hasattr(check, "rows"):  # the float-edge cases: fixed rows at K = 2
        return float(len(check.kinds) * check.rows * 3 * check.vocab)
    return SHAPE_VOLUMES * budget.shape_volume * len(getattr(check, "shapes", ()) or (1,))


class Estimate:
    """Seconds left in a run, from its planned checks' rows, updated as checks start, draw rows and end.

    Args:
        costs: ``[id, rows, skipped, by volume]`` of each planned check, in plan order (:func:`planned_costs`).
    """

    def __init__(self, costs: Sequence[Sequence[Any]]) -> None:
        self._planned = {str(c[0]): float(c[1]) for c in costs if not c[2]}
        self._volume = {str(c[0]) for c in costs if len(c) > 3 and c[3]}  # weighed by volume, not rows
        rows = [r for r in self._planned.values() if r > 0]
        # the harness's own share of a check, in rows: a small check still costs its set-up and statistics
        self._fixed = (sum(rows) / len(rows) if rows else 1.0) * FIXED_SHARE
        self._begun: float | None = None
        self._current: str | None = None
        self._drawn = 0  # rows of the check under way
        self._started = 0.0  # when it started
        self._done: dict[str, int] = {}  # finished checks: the rows they drew

    def begin(self, now: float) -> None:
        self._begun = now

    def advance(self, check: str, rows: int, now: float) -> None:
        """``rows`` more rows drawn by ``check`` (0: it starts) at time ``now``."""
        if check != self._current:
            self._end_current()
            self._current, self._drawn, self._started = check, 0, now
        self._drawn += rows

    def result(self) -> None:
        """A result of the check under way: it has ended."""
        self._end_current()

    def _end_current(self) -> None:
        if self._current is not None and self._current not in self._done:
            self._done[self._current] = self._drawn
        self._current, self._drawn = None, 0

    def left(self, now: float) -> float | None:
        """Seconds left (``None``: no check with any weight has finished yet)."""
        if self._begun is None:
            return None
        counted = [c for c in self._done if c not in self._volume]
        planned_done = sum(self._planned.get(c, 0) for c in counted)
        # the share of its planned rows a finished check really drew (a failing one stops early)
        ratio = sum(self._done[c] for c in counted) / planned_done if planned_done else 1.0
        done = sum(self._weight(c) for c in self._done)
        until = self._started if self._current is not None else now  # when the last finished check ended
        if done <= 0 or until <= self._begun:
            return None
        pace = (until - self._begun) / done  # seconds a unit of weight took, on the checks that finished
        ahead = 0.0
        for check, rows in self._planned.items():
            if check not in self._done and check != self._current:
                ahead += self._expected(check, rows, ratio)
        current = 0.0
        if self._current is not None and self._current in self._planned:
            expected = self._expected(self._current, self._planned[self._current], ratio)
            if self._current in self._volume:  # a shapes check's rows are not its cost: its time so far is
                current = max(expected * pace - (now - until), 0.0)
            else:
                current = max(expected - self._drawn, 0.0) * pace
        return ahead * pace + current

    def _expected(self, check: str, rows: float, ratio: float) -> float:
        return (rows if check in self._volume else rows * ratio) + self._fixed

    def _weight(self, check: str) -> float:
        return (self._planned.get(check, 0.0) if check in self._volume else self._done[check]) + self._fixed


def replay(
    events: Sequence[Sequence[Any]], costs: Sequence[Sequence[Any]], end: float, *, floor: float = 1.0
) -> list[tuple[float, float, float]]:
    """A recorded run's estimate against the truth: ``(time, estimated left, left in fact)`` at
    every event after the first 10% of the bar's time (from the plan to ``end``; the bar is not
    drawn while the sampler loads), both read at the bar's resolution (``floor`` seconds; an
    estimate not yet known is infinite).  ``events``: ``[time, "plan", ...]``, ``[time, "rows",
    check, rows]`` (0 rows: the check starts) and ``[time, "result", id]``, as the bar is given them."""
    begun = next(e[0] for e in events if e[1] == "plan")
    estimate: Estimate | None = None
    out = []
    for event in events:
        now, what = float(event[0]), event[1]
        if what == "plan":
            estimate = Estimate(costs)
            estimate.begin(now)
        elif estimate is None:
            continue
        elif what == "rows":
            estimate.advance(str(event[2]), int(event[3]), now)
        else:
            estimate.result()
        if estimate is not None and now >= begun + 0.1 * (end - begun):
            left = estimate.left(now)
            out.append((now, float("inf") if left is None else max(left, floor), max(end - now, floor)))
    return out


#: The share of the budget's ``shape_volume`` a shape of the shapes family draws, on average.
SHAPE_VOLUMES = 0.15
#: Elements of a small case's row whose cost a row of the plan's count stands for.
SMALL_ROW_ELEMENTS = 64

#: The share of the rows the plan counts at the cap a check draws, about (a cap is rarely reached).
DRAWN_SHARE = 0.3

#: A check's fixed cost, as a share of the mean planned rows of a check that draws any.
FIXED_SHARE = 0.5
