"""What the ``specverify`` command prints: each result as it finishes, and the verdict line.

Kept apart from :mod:`specverify._cli` (what each command does) so the run's console output
reads in one place.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._record.vocabulary import Status, Verdict, lossless
from .._warps.findings import warp_finding

if TYPE_CHECKING:
    from .._record.result import CheckResult

__all__ = ["case_lines", "detects", "failure_lines", "print_verdict", "repro_lines", "result_printer"]

_STATUS_STYLE = {s.value: s.style for s in Status}
_VERDICT_STYLE = {v.value: v.style for v in Verdict}


#: A repro up to this many characters is printed whole under its failing line, flush left between two
#: comment lines, so that it runs as pasted; a longer one (a vocabulary of thousands written out) is
#: shown abridged, and whole in the JSON's ``evidence.repro`` and the HTML report's Copy button.
REPRO_CHARS = 8000
#: The abridged form's lines at most.
REPRO_LINES = 14


def detects(min_detectable_tv: float | None, p_value: float | None = None) -> str:
    """What a check's test detects, in words: an exact check any deviation, a test that flags
    outcomes the exact law forbids (a claim of 0 with a p-value) such an outcome, a statistical
    one a TV; never "TV >= 0"."""
    if min_detectable_tv is None:
        return ""
    if min_detectable_tv == 0:
        return " (exact: any deviation)" if p_value is None else " (exact: any outcome of probability 0)"
    return f" (detects TV >= {min_detectable_tv:.3g})"


def failure_lines(result: CheckResult) -> list[tuple[int, str]]:
    """What is printed under a failing line, each line with its indent: the smallest case, its
    probabilities when they are small enough to read, the repro (whole and flush left, as the JSON's
    ``evidence.repro``, unless it is too long to read), then the sampler's traceback and output
    (their last lines)."""
    lines = [(0, line) for line in case_lines(result)]
    evidence = result.evidence
    repro = str(evidence.get("repro") or "").strip()
    if repro:
        lines += repro_lines(result.id, repro)
    for label, text in (("traceback", evidence.get("traceback")), ("sampler output", evidence.get("sampler_output"))):
        tail = str(text or "").strip().splitlines()[-4:]
        if tail:
            lines.append((0, f"{label} (last lines; all in the JSON):"))
            lines += [(2, line[:200]) for line in tail]
    return lines


def repro_lines(check_id: str, repro: str) -> list[tuple[int, str]]:
    """The repro as printed: whole, flush left, between two comment lines (pasted with them or
    without, it runs), or abridged where it is longer than :data:`REPRO_CHARS`."""
    if len(repro) > REPRO_CHARS:
        return _short_repro(repro.splitlines())
    return [
        (
            0,
            "repro (paste it into a file and run it with python: it exits 1 the same way; "
            "also the JSON's evidence.repro):",
        ),
        (-1, f"# --- repro of {check_id} ---"),
        *[(-1, line) for line in repro.splitlines()],
        (-1, f"# --- end of the repro of {check_id} ---"),
    ]


def case_lines(result: CheckResult) -> list[str]:
    """The smallest failing case in a few lines: its shape, and its probabilities where they are
    small enough to read (at most 8 tokens and 5 rows a table)."""
    from ..report._example import example

    case = result.evidence.get("minimal_example")
    if not case:
        return []
    shown = example(case)
    lines = [f"smallest case: {shown.summary or 'in the JSON (evidence.minimal_example)'}"]
    for part in shown.parts or [shown]:
        for table in part.tables[:4]:
            if table.columns <= 8 and len(table.rows) <= 5:
                lines += [
                    f"  {table.title} {label}: [{', '.join(row)}]" for label, row in zip(table.row_labels, table.rows)
                ]
    return lines


def _short_repro(repro: list[str]) -> list[tuple[int, str]]:
    """The repro's abridged form, not runnable as it stands: its set-up (tensors too long to read
    left out, at most :data:`REPRO_LINES` lines in all), then always the call that fails and the
    lines after it."""
    kept = [line for line in repro if line and not line.startswith(("import ", "#"))]
    calls = ("specverify.replay.step_law_test(", "specverify.replay.model_law_test(", "specverify.replay.call_sampler(")
    at = next((i for i, line in enumerate(kept) if any(c in line for c in calls)), len(kept))
    setup, tail = kept[:at], kept[at:]
    shown: list[str] = []
    for line in setup:
        if len(line) > 160 or len(shown) >= max(2, REPRO_LINES - len(tail)):
            if shown[-1:] != ["..."]:
                shown.append("...")
            continue
        shown.append(line)
    shown += tail
    head = (
        f"repro (abridged: {len(chr(10).join(repro)):,} characters in full; "
        "the whole, which exits 1 the same way: the JSON's evidence.repro):"
    )
    return [(0, head)] + [(2, line) for line in shown]


def result_printer(console: Any) -> Callable[[CheckResult], None]:
    from rich.markup import escape

    def show(result: CheckResult) -> None:
        style = _STATUS_STYLE[result.status]
        console.print(
            f"[{style}]{result.status:>12}[/] {escape(result.id)}{detects(result.min_detectable_tv, result.p_value)}  "
            f"[dim]{escape(result.message or '')}[/]"
        )
        if result.status in ("fail", "error"):
            for indent, line in failure_lines(result):
                if indent < 0:  # the repro, flush left and verbatim: it runs as pasted
                    console.print(line, style="dim", markup=False, emoji=False, highlight=False)
                else:
                    console.print(f"{'':>{15 + indent}}[dim]{escape(line)}[/]")

    return show


def print_verdict(console, result, args) -> None:
    from rich.markup import escape

    from .._record.reach import guarantee

    summary = ", ".join(f"{n} {s}" for s, n in result.to_json()["summary"].items() if n)
    verdict = result.verdict
    line = f"[{_VERDICT_STYLE[verdict]}]{verdict}[/]  {escape(result.run['sampler']['name'])}  ({summary})"
    console.print(line)
    reason = getattr(result, "verdict_reason", None)  # why the verdict is no better (an inconclusive subset, ...)
    if reason:
        console.print(f"  why: {escape(reason)}")
    for left in getattr(result.run, "not_posed", None) or []:  # what the sampler's declared tree limits kept out
        console.print(f"  not posed: {escape(left)}")
    finding = warp_finding(result.run.get("warp"))  # which law it was judged by; another preset's, apart
    for text in finding.lines() if finding is not None else ():
        console.print(f"[dim]{escape(text)}[/]" if text.startswith("  ") else escape(text))
    for check in result.checks:  # on their own lines: real differences that decide nothing
        if check.status == "float-edge" and "event" in check.evidence:
            from ..checks._event import sizes_text

            console.print(
                f"[{_STATUS_STYLE['float-edge']}]float-edge[/] {escape(check.id)}: "
                f"{escape(sizes_text(check.evidence['event']))}"
            )
    if any("throughput" in check.evidence for check in result.checks):  # an engine's speed in each mode
        from ..checks._engine import throughput_line

        speed = throughput_line(result.checks)
        if speed:
            console.print(escape(speed))
    promise = guarantee(result.checks, power=result.run["power"], alpha=result.run["family_wise_alpha"])
    if promise is not None and lossless(verdict):
        console.print(escape(promise))
    for path, what in ((args.json, "JSON"), (args.report, "report")):
        if path:
            console.print(f"{what}: {escape(str(path))}")
