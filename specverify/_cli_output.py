"""What the ``specverify`` command prints: each result as it finishes, and the verdict line.

Kept apart from :mod:`specverify._cli` (what each command does) so the run's console output
reads in one place.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._vocabulary import Status, Verdict, lossless

if TYPE_CHECKING:
    from ._result import CheckResult

__all__ = ["print_verdict", "result_printer"]

_STATUS_STYLE = {s.value: s.style for s in Status}
_VERDICT_STYLE = {v.value: v.style for v in Verdict}


def result_printer(console: Any) -> Callable[[CheckResult], None]:
    from rich.markup import escape

    def show(result: CheckResult) -> None:
        style = _STATUS_STYLE[result.status]
        tv = f" TV>={result.min_detectable_tv:.3g}" if result.min_detectable_tv is not None else ""
        console.print(f"[{style}]{result.status:>12}[/] {escape(result.id)}{tv}  [dim]{escape(result.message or '')}[/]")
        if result.status in ("fail", "error"):
            for label, text in (("traceback", result.evidence.get("traceback")), ("sampler output", result.evidence.get("sampler_output"))):
                lines = str(text or "").strip().splitlines()[-4:]
                if lines:
                    console.print(f"{'':>12}   [dim]{label} (last lines; all in the JSON):[/]")
                    for line in lines:
                        console.print(f"{'':>12}     [dim]{escape(line[:200])}[/]")

    return show


def print_verdict(console, result, args) -> None:
    from rich.markup import escape

    from ._reach import guarantee

    summary = ", ".join(f"{n} {s}" for s, n in result.to_json()["summary"].items() if n)
    verdict = result.verdict
    line = f"[{_VERDICT_STYLE[verdict]}]{verdict}[/]  {escape(result.run['sampler']['name'])}  ({summary})"
    console.print(line)
    for check in result.checks:  # on their own lines: real differences that decide nothing
        if check.status == "float-edge" and "event" in check.evidence:
            from .checks._event import sizes_text

            console.print(f"[{_STATUS_STYLE['float-edge']}]float-edge[/] {escape(check.id)}: {escape(sizes_text(check.evidence['event']))}")
    promise = guarantee(result.checks, power=result.run["power"], alpha=result.run["family_wise_alpha"])
    if promise is not None and lossless(verdict):
        console.print(escape(promise))
    for path, what in ((args.json, "JSON"), (args.report, "report")):
        if path:
            console.print(f"{what}: {escape(str(path))}")
