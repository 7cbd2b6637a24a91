"""The command that repeats a run: what the report's "Repeat this run" line holds.

It is built from the run's record alone, so a report rendered from an old JSON says it too, and it
must be a command the CLI takes that gives the run's budget back (a custom ``--tv`` budget has no
``--budget`` name of its own).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from .._budgets import BUDGETS, Budget

__all__ = ["rerun"]

#: The run records' contracts that have a subcommand of their own.
_SUBCOMMANDS = ("loop", "engine")


def rerun(run: Mapping[str, Any]) -> str | None:
    """The command that repeats this run exactly (same spec, budget, seed, α and power)."""
    spec = run.get("spec")
    if not spec:
        return None
    # a loop's and an engine's runs are repeated by their own subcommands, named as their contracts
    command = run.get("contract") if run.get("contract") in _SUBCOMMANDS else "check"
    words = ["specverify", str(command), shlex.quote(str(spec))]
    budget = _budget_words(run.get("budget"))
    if budget is None:  # a budget built in code: no option gives it, so no command repeats the run
        return None
    words += budget
    if "seed" in run:
        words += ["--seed", shlex.quote(str(run["seed"]))]
    alpha = run.get("family_wise_alpha")
    if alpha is not None:  # the budget records the alpha used, not its default: always state it
        words += ["--alpha", shlex.quote(str(alpha))]
    device = run.get("device")
    if device and device != "cpu":
        words += ["--device", shlex.quote(str(device))]
    if isinstance(run.get("select"), list):
        for pattern in run["select"]:
            words += ["--only", shlex.quote(str(pattern))]
    return " ".join(words)


def _budget_words(budget: Any) -> list[str] | None:
    """The options that give a run its recorded budget: a preset by name; a custom one as ``--tv``,
    after ``--budget BASE`` unless its base is standard (``--budget standard --tv`` takes the nearest
    preset, and a standard base is one only when standard is the nearest); ``--power`` where it is
    not the default; ``None`` for a budget no option names."""
    if not isinstance(budget, Mapping) or not budget.get("name"):
        return []
    name, tv = str(budget["name"]), budget.get("tv")
    if name in BUDGETS:
        words = ["--budget", name]
    elif name.startswith("tv=") and isinstance(tv, (int, float)):
        base = budget.get("base")
        words = (["--budget", shlex.quote(str(base))] if base in BUDGETS and base != "standard" else []) + [
            "--tv",
            f"{tv:g}",
        ]
    else:
        return None
    power = budget.get("power")
    if isinstance(power, (int, float)) and power != Budget.power:
        words += ["--power", f"{power:g}"]
    return words
