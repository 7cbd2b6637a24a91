"""The kill matrix: every zoo member through the battery, which family caught it, at what cost.

With ``loops`` (``specverify zoo --loops``) the generation-loop members join it, each through the
loop family, its loop in a supervised worker.

``specverify zoo`` runs it.  A member *meets* its declaration when the run's verdict is the
declared one; a *false alarm* is a run that calls a member worse than it is (a conformant sampler
found lossy or non-conformant, a lossless one found lossy); a *miss* is a run that calls a member
better than it is.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import fnmatch
import json
import time
from pathlib import Path
from typing import Any

from .._budgets import Budget, get_budget, resolve_budget
from .._record.families import FAMILIES, LOOP_FAMILY
from .._record.vocabulary import Verdict

__all__ = ["MatrixRow", "in_work_order", "kill_matrix", "matrix_work", "render_markdown", "write_matrix"]


@dataclasses.dataclass
class MatrixRow:
    """One member on one seed."""

    member: str
    seed: int
    declared: str
    declared_budget: str
    expected_families: list[str]
    verdict: str
    caught_by: dict[str, int]  # family -> failing checks
    first_failure: str | None
    first_failure_seconds: float | None
    samples: int
    seconds: float
    float_edges: list[str] = dataclasses.field(default_factory=list)  # float-edge results: shown, deciding nothing
    # the verdict the member is, where it is below a preset's reach and declared conformant within it
    truth: str | None = None

    @property
    def meets(self) -> bool:
        return self.verdict in (self.declared, self.truth or self.declared)

    @property
    def beyond_reach(self) -> bool:
        """Found to be what it is by a run its bug is declared beyond the reach of."""
        return self.truth is not None and self.truth != self.declared and self.verdict == self.truth

    @property
    def false_alarm(self) -> bool:
        worst = max(Verdict(self.declared).severity, Verdict(self.truth or self.declared).severity)
        return Verdict(self.verdict).severity > worst and self.verdict != Verdict.INCONCLUSIVE

    @property
    def miss(self) -> bool:
        return Verdict(self.verdict).severity < Verdict(self.declared).severity

    def due(self, budget: str) -> bool:
        """Declared catchable at ``budget`` (or a smaller one)."""
        return _budget_rank(self.declared_budget) <= _budget_rank(budget)


def _run_member(name: str, seed: int, budget: Budget) -> MatrixRow:
    from .._run._driver import check
    from . import member_named

    member = member_named(name)
    start = time.perf_counter()
    first: list[float] = []

    def note(result: Any) -> None:
        if result.status in ("fail", "error") and not first:
            first.append(time.perf_counter() - start)

    result = check(member, budget=budget, seed=seed, spec=f"specverify.zoo:{name.replace('-', '_')}", on_result=note)
    failing = [c for c in result.checks if c.status in ("fail", "error")]
    caught: dict[str, int] = {}
    for c in failing:
        caught[c.family] = caught.get(c.family, 0) + 1
    declared, declared_budget = member.declared_at(budget.tv) if budget.derivation else (member.verdict, member.budget)
    return MatrixRow(
        member=name,
        seed=seed,
        declared=declared,
        declared_budget=declared_budget,
        expected_families=list(member.caught_by),
        verdict=result.verdict,
        caught_by=caught,
        first_failure=failing[0].id if failing else None,
        first_failure_seconds=first[0] if first else None,
        samples=sum(c.samples or 0 for c in result.checks),
        seconds=time.perf_counter() - start,
        float_edges=[c.id for c in result.checks if c.status == "float-edge"],
        truth=member.at_tv[1] if member.at_tv is not None else None,
    )


def _run_loop_member(name: str, seed: int, budget: Budget) -> MatrixRow:
    """A loop member (``loop:<name>``) through the loop family, its loop in a worker of its own."""
    from .._run._driver import check_loop
    from ._loops import LOOP_MEMBERS

    member = LOOP_MEMBERS[name.removeprefix(LOOP_PREFIX)]
    start = time.perf_counter()
    first: list[float] = []

    def note(result: Any) -> None:
        if result.status in ("fail", "error") and not first:
            first.append(time.perf_counter() - start)

    spec = f"specverify.zoo._loops:loop_{member.name.replace('-', '_')}"
    result = check_loop(spec, budget=budget, seed=seed, timeout=budget.timeout, on_result=note)
    failing = [c for c in result.checks if c.status in ("fail", "error")]
    declared, declared_budget = member.declared_at(budget.tv if budget.derivation else None)
    return MatrixRow(
        member=name,
        seed=seed,
        declared=declared,
        declared_budget=declared_budget,
        expected_families=[LOOP_FAMILY] if member.caught_by else [],
        verdict=result.verdict,
        caught_by={LOOP_FAMILY: len(failing)} if failing else {},
        first_failure=failing[0].id if failing else None,
        first_failure_seconds=first[0] if first else None,
        samples=sum(c.samples or 0 for c in result.checks),
        seconds=time.perf_counter() - start,
        truth=member.at_tv[1] if member.at_tv is not None else None,
    )


#: How the matrix names a generation-loop member (``loop:seeds-ignored``), apart from the step ones.
LOOP_PREFIX = "loop:"


def kill_matrix(
    budget: str | Budget = "standard",
    *,
    tv: float | None = None,
    members: list[str] | None = None,
    seeds: int = 1,
    jobs: int = 1,
    timeout: float = 60.0,
    on_row: Any = None,
    loops: bool = False,
) -> list[MatrixRow]:
    """Run the selected members (glob patterns on names) on ``seeds`` run seeds each: the step and
    tree members, and with ``loops`` the generation-loop members (named ``loop:<name>``) through
    the loop family; ``tv``: a budget sized for that TV (``--tv``), members judged by what they
    declare at it (``ZooSampler.at_tv``)."""
    chosen = resolve_budget(budget, tv=tv) if isinstance(budget, str) else budget
    chosen = chosen.with_(timeout=timeout)
    work = matrix_work(members, seeds=seeds, loops=loops)
    rows: list[MatrixRow] = []

    def runner(name: str) -> Any:
        return _run_loop_member if name.startswith(LOOP_PREFIX) else _run_member

    if jobs <= 1:
        for name, seed in work:
            rows.append(runner(name)(name, seed, chosen))
            if on_row:
                on_row(rows[-1])
        return rows
    pool = concurrent.futures.ProcessPoolExecutor(max_workers=jobs)
    try:
        futures = [pool.submit(runner(name), name, seed, chosen) for name, seed in work]
        for future in concurrent.futures.as_completed(futures):
            rows.append(future.result())
            if on_row:
                on_row(rows[-1])
    except BaseException:
        # Ctrl-C (or a failed run): nothing more is started, and the runs under way are not waited
        # for; their processes had the terminal's SIGINT too, and their samplers' processes end
        # with them
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return in_work_order(rows, work)


def matrix_work(members: list[str] | None = None, *, seeds: int = 1, loops: bool = False) -> list[tuple[str, int]]:
    """The (member, seed) runs of a matrix, in the order they are started and listed."""
    from . import TREE_MEMBERS, ZOO
    from ._loops import LOOP_MEMBERS

    every = [*ZOO, *TREE_MEMBERS, *(LOOP_PREFIX + n for n in LOOP_MEMBERS if loops)]
    names = [n for n in every if not members or any(fnmatch.fnmatchcase(n, p) for p in members)]
    return [(n, s) for s in range(seeds) for n in names]


def in_work_order(rows: list[MatrixRow], work: list[tuple[str, int]]) -> list[MatrixRow]:
    order = {key: i for i, key in enumerate(work)}
    return sorted(rows, key=lambda r: order[(r.member, r.seed)])


def render_markdown(rows: list[MatrixRow], budget: str) -> str:
    """The matrix as a markdown table, with the totals that matter (a ``loop`` column when it
    holds loop members)."""
    families = (*FAMILIES, LOOP_FAMILY) if any(r.member.startswith(LOOP_PREFIX) for r in rows) else FAMILIES
    head = (
        "| member | declared (budget) | verdict | "
        + " | ".join(families)
        + " | first failing check | seconds to it | samples | seconds | float-edge |"
    )
    lines = [head, "|" + "---|" * (len(families) + 8)]
    for r in rows:
        cells = [str(r.caught_by.get(f, "")) if r.caught_by.get(f) else "" for f in families]
        mark = (
            " (found beyond its declared reach)"
            if r.beyond_reach
            else ""
            if r.meets
            else (
                " **FALSE ALARM**"
                if r.false_alarm
                else (" **missed**" if r.due(budget) else f" (not due: caught from {r.declared_budget})")
                if r.miss
                else " **differs**"
            )
        )
        lines.append(
            f"| {r.member}{'' if len({x.seed for x in rows}) == 1 else f' (seed {r.seed})'} | {r.declared} "
            f"({r.declared_budget}) | {r.verdict}{mark} | "
            + " | ".join(cells)
            + f" | {r.first_failure or ''} | "
            + (f"{r.first_failure_seconds:.1f}" if r.first_failure_seconds is not None else "")
            + f" | {r.samples:,} | {r.seconds:.1f} | {len(r.float_edges) or ''} |"
        )
    correct = [r for r in rows if Verdict(r.truth or r.declared).lossless]
    due = [r for r in rows if not Verdict(r.declared).lossless and r.due(budget)]
    lines += [
        "",
        f"Budget `{budget}`: {sum(r.meets for r in rows)} of {len(rows)} runs reach the declared verdict; "
        f"{sum(not r.miss for r in due)} of {len(due)} runs of bugs declared catchable at this budget are caught; "
        f"false alarms: {sum(r.false_alarm for r in correct)} in {len(correct)} runs of correct samplers "
        f"({len({r.seed for r in rows})} seed(s)).",
    ]
    return "\n".join(lines) + "\n"


def _budget_rank(name: str) -> int:
    """Presets in order; a custom reach (``tv<=EPS``, ``tv-EPS``) ranks by its TV among them."""
    presets = {"quick": 0, "standard": 1, "thorough": 2}
    if name in presets:
        return presets[name]
    try:
        tv = float(name.removeprefix("tv<=").removeprefix("tv-"))
    except ValueError:
        return 3
    return sum(1 for preset, rank in presets.items() if get_budget(preset).tv >= tv)


def write_matrix(
    rows: list[MatrixRow],
    budget: str,
    directory: str | Path,
    command: str,
    *,
    planned: int | None = None,
    ended: str | None = None,
) -> tuple[Path, Path]:
    """Write ``kill-matrix-<budget>.md`` and ``.json`` into ``directory``; ``command`` made them.

    With ``planned`` larger than the rows (a matrix still running, or ``ended`` early: "interrupted"),
    both say it is partial: its totals are those of the rows finished, and no more.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    partial = planned is not None and len(rows) < planned
    note = (
        f"**Partial: {len(rows)} of {planned} runs finished ({ended or 'still running'}).** The totals below count "
        "those runs only.\n\n"
        if partial
        else ""
    )
    markdown = directory / f"kill-matrix-{budget}.md"
    data = directory / f"kill-matrix-{budget}.json"
    entries = [{**dataclasses.asdict(r), "meets": r.meets, "false_alarm": r.false_alarm, "miss": r.miss} for r in rows]
    # each file is replaced whole (a reader never sees half a matrix), the JSON first
    for path, text in (
        (
            data,
            json.dumps(
                {"partial": partial, "planned": planned or len(rows), "rows": entries} if partial else entries, indent=2
            ),
        ),
        (
            markdown,
            f"# Kill matrix, budget `{budget}`\n\nGenerated by `{command}`.\n\n{note}" + render_markdown(rows, budget),
        ),
    ):
        scratch = path.with_name(path.name + ".tmp")
        scratch.write_text(text)
        scratch.replace(path)
    return markdown, data
