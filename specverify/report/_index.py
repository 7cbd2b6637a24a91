"""Several runs side by side: one page per run and an index comparing them, sampler by family.

Laid out like the compliance matrices readers know (wpt.fyi, OpenTelemetry's): one row per
sampler, one column per check family, each cell "passed/total" coloured by its worst status.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._record.families import FAMILIES
from .._record.info import RunInfo
from .._record.result import RunResult
from .._record.vocabulary import lossless
from ..errors import RunFileError
from ._format import detects, slug, timestamp
from ._html import render, write_text
from ._page import render_report
from ._view import APART, STATUSES, VERDICT_TEXT, cell_colour

__all__ = ["build_index", "load_run"]


@dataclasses.dataclass
class FamilyCell:
    """A family's checks in one run: passed out of those that ran and decide (a skip tested
    nothing, a float-edge finding decides no verdict: both are counted apart, never as failures)."""

    passed: int
    ran: int
    worst: str
    counts: list[tuple[str, int]]

    @property
    def marked(self) -> list[tuple[str, int]]:
        """The counts drawn under "passed/ran": every status but pass."""
        return [(s, n) for s, n in self.counts if s != "pass"]


@dataclasses.dataclass
class IndexRow:
    sampler: str
    href: str
    verdict: str
    verdict_text: str
    finished: bool
    summary: list[tuple[str, int]]
    cells: list[FamilyCell | None]
    facts: list[str]
    detects: str | None


def load_run(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A run's JSON, checked and normalised through :class:`~specverify.RunResult`."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise RunFileError(f"cannot read {os.fspath(path)}: {getattr(exc, 'strerror', None) or exc}") from exc
    except json.JSONDecodeError as exc:
        raise RunFileError(f"{os.fspath(path)} is not JSON: {exc.msg} at line {exc.lineno}") from exc
    if not isinstance(raw, dict):
        raise RunFileError(
            f"{os.fspath(path)} is not a run result (a JSON object written by 'specverify check --json')"
        )
    run = raw.get("run")
    if isinstance(run, dict) and run.get("select") and run.get("left_out") is None:
        from .._run import migrate  # a result of an older form: planned again (the battery needs torch)

        raw = migrate(raw)
    try:
        return RunResult.from_json(raw).to_json()
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        reason = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
        raise RunFileError(f"{os.fspath(path)} is not a valid run result: {reason}") from exc


def build_index(json_paths: Sequence[str | os.PathLike[str]], output: str | os.PathLike[str]) -> int:
    """Write each run's page next to ``output`` (named from its sampler) and the index at ``output``.

    Returns the exit status: 0, or 2 after a one-line error if any input cannot be read (then
    nothing is written).
    """
    try:
        runs = [load_run(path) for path in json_paths]
    except RunFileError as exc:
        print("specverify: error: " + " ".join(str(exc).split()), file=sys.stderr)
        return 2
    index = Path(output)
    names = page_names(runs, reserved={index.name})
    for run, name in zip(runs, names):
        write_text(index.parent / name, render_report(run))
    families = [f for f in FAMILIES if any(c.get("family") == f for run in runs for c in run["checks"])]
    families += list(
        dict.fromkeys(c.get("family") for run in runs for c in run["checks"] if c.get("family") not in families)
    )
    rows = [_row(run, name, families) for run, name in zip(runs, names)]
    write_text(index, render("index.html.j2", rows=rows, families=families))
    print(f"index: {index} ({len(runs)} run{'s' if len(runs) != 1 else ''}: {', '.join(names)})")
    return 0


def page_names(runs: Sequence[Mapping[str, Any]], *, reserved: Collection[str] = ()) -> list[str]:
    """A distinct file name per run, from its sampler's name."""
    taken = set(reserved)
    names = []
    for run in runs:
        base = slug(str(((run.get("run") or {}).get("sampler") or {}).get("name") or "")) or "run"
        name, n = f"{base}.html", 1
        while name in taken:
            n += 1
            name = f"{base}-{n}.html"
        taken.add(name)
        names.append(name)
    return names


def _row(run: Mapping[str, Any], href: str, families: list[str]) -> IndexRow:
    checks = run["checks"]
    record = RunInfo.from_json(run.get("run") or {})  # load_run checked it
    cells: list[FamilyCell | None] = []
    for family in families:
        members = [c for c in checks if c.get("family") == family]
        if not members:
            cells.append(None)
            continue
        counts = [(s, sum(c.get("status") == s for c in members)) for s in STATUSES]
        counts = [(s, n) for s, n in counts if n]
        ran = sum(c.get("status") not in APART for c in members)
        cells.append(FamilyCell(dict(counts).get("pass", 0), ran, cell_colour(counts), counts))
    versions = record.versions if isinstance(record.versions, Mapping) else {}
    facts = [
        f"budget {record.budget.get('name')}"
        if isinstance(record.budget, Mapping) and record.budget.get("name")
        else "",
        f"seed {record.seed}" if record.seed is not None else "",
        f"{record.device}, {record.dtype}" if record.device else "",
        f"torch {versions['torch']}" if versions.get("torch") else "",
        timestamp(record.started) if record.started else "",
    ]
    claims = [
        c.get("min_detectable_tv")
        for c in checks
        if c.get("status") == "pass" and isinstance(c.get("min_detectable_tv"), (int, float))
    ]
    summary = [(s, sum(c.get("status") == s for c in checks)) for s in STATUSES]
    return IndexRow(
        sampler=str(record.sampler.name or "unnamed sampler"),
        href=href,
        verdict=str(run.get("verdict")),
        verdict_text=VERDICT_TEXT.get(str(run.get("verdict")), ""),
        finished=bool(run.get("finished", True)),
        summary=[(s, n) for s, n in summary if n],
        cells=cells,
        facts=[f for f in facts if f],
        detects=detects(max(claims)) if claims and lossless(run.get("verdict")) else None,
    )
