"""The line for a sampler spec whose module is nowhere, saying where it was looked for.

Torch-free, so the CLI says it before torch loads or the sampler's process starts (a typo costs no
seconds), in the words the full import gives (:func:`specverify._contract.resolve_sampler`).
"""

from __future__ import annotations

import importlib.util
import os
import sys

__all__ = ["missing_module", "not_found"]


def missing_module(spec: str) -> str | None:
    """:func:`not_found`'s line where the spec's top-level module is on no ``sys.path`` entry (found
    without importing anything), else ``None``: what is found, or cannot be told without running
    code, is the full import's to judge."""
    top = spec.partition(":")[0].split(".")[0]
    try:
        if not top or importlib.util.find_spec(top) is not None:
            return None
    except (ImportError, ValueError):
        return None
    return not_found(spec, top)


def not_found(spec: str, missing: str) -> str:
    """The one line for a spec whose module ``missing`` is nowhere, with where it was looked for:
    the entries of ``sys.path`` (the current directory first where the command put it there), or
    the package that has no such submodule."""
    module_name = spec.partition(":")[0]
    parent, _, _ = missing.rpartition(".")
    if parent and parent in sys.modules:
        where = f"package {parent!r} at {', '.join(getattr(sys.modules[parent], '__path__', [])) or '?'}"
    else:
        cwd = os.getcwd()
        places = [entry or cwd for entry in sys.path if os.path.exists(entry or cwd)]  # not an import hook's name
        where = "sys.path: " + ", ".join(f"{p} (the current directory)" if p == cwd else p for p in places)
    return f"cannot import module {module_name!r} of spec {spec!r}: no module named {missing!r} (searched {where})"
