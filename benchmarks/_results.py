"""Where a benchmark's figures go: the machine they were measured on, and the JSON and Markdown
files under ``benchmarks/results`` (one stem, both forms), written the same way by every script."""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def machine() -> dict[str, Any]:
    """The machine as a benchmark records it, with the load at the moment it is asked."""
    return {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "python": platform.python_version(),
    }


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """A Markdown table's lines."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]


def write(out: str | Path, stem: str, data: dict[str, Any], lines: Sequence[str]) -> Path:
    """``data`` as ``<out>/<stem>.json`` and ``lines`` as ``<out>/<stem>.md``; the Markdown's path."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{stem}.json").write_text(json.dumps(data, indent=2) + "\n")
    page = folder / f"{stem}.md"
    page.write_text("\n".join(lines) + "\n")
    return page
