"""specverify: prove or refute that a speculative-decoding sampler preserves the target's law.

Put a sampler through the battery::

    import specverify
    result = specverify.check(my_sampler, budget="quick")
    print(result.verdict)

or from the shell: ``specverify check mypackage.module:sampler``.

This facade holds what a run needs: :func:`check`, :func:`check_loop` and :func:`check_engine`,
the declarations (:func:`sampler`, :func:`loop`, :func:`engine`, :func:`tree_sampler`,
:class:`Capabilities`), the budgets, the
results and the errors (:mod:`specverify.errors`).  The rest lives in public submodules:
:mod:`specverify.laws` (exact laws), :mod:`specverify.models` (models with exact laws),
:mod:`specverify.replay` (rerunning a finding by hand), :mod:`specverify.trees` (the tree contract,
its converters and references), :mod:`specverify.samplers`, :mod:`specverify.adapters`,
:mod:`specverify.strategies`, :mod:`specverify.report`.

Every name is imported on first use, so ``import specverify`` is cheap and reading a run's JSON
(``specverify report``, :mod:`specverify.report`) never imports torch or Hypothesis.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from ._version import __version__ as __version__

if TYPE_CHECKING:  # the same names as _PUBLIC, spelled out for type checkers (tests/test_public_api.py)
    from ._budgets import BUDGETS as BUDGETS
    from ._budgets import Budget as Budget
    from ._calling.tree import tree_sampler as tree_sampler
    from ._contract import Capabilities as Capabilities
    from ._contract import Sampler as Sampler
    from ._contract import sampler as sampler
    from ._kinds import load_sampler as load_sampler
    from ._kinds.engine import engine as engine
    from ._loop import loop as loop
    from ._pytest import battery as pytest_battery  # noqa: F401 - public under this name
    from ._record.result import CheckResult as CheckResult
    from ._record.result import RunResult as RunResult
    from ._record.vocabulary import Verdict as Verdict
    from ._run._driver import check as check
    from ._run._driver import check_engine as check_engine
    from ._run._driver import check_loop as check_loop
    from ._warps.rules import SamplingParams as SamplingParams
    from .errors import Interrupted as Interrupted
    from .errors import SamplerFault as SamplerFault
    from .errors import SamplerSpecError as SamplerSpecError
    from .errors import SpecverifyError as SpecverifyError
    from .errors import UsageError as UsageError
    from .samplers import reference as reference

#: The one list of public names: name -> (module, attribute).  ``__all__`` and the lazy loading
#: follow from it; the ``TYPE_CHECKING`` imports above must agree (a test compares them).
_PUBLIC: dict[str, tuple[str, str]] = {
    "BUDGETS": ("._budgets", "BUDGETS"),
    "Budget": ("._budgets", "Budget"),
    "Capabilities": ("._contract", "Capabilities"),
    "CheckResult": ("._record.result", "CheckResult"),
    "Interrupted": (".errors", "Interrupted"),
    "RunResult": ("._record.result", "RunResult"),
    "Sampler": ("._contract", "Sampler"),
    "SamplerFault": (".errors", "SamplerFault"),
    "SamplerSpecError": (".errors", "SamplerSpecError"),
    "SamplingParams": ("._warps.rules", "SamplingParams"),
    "SpecverifyError": (".errors", "SpecverifyError"),
    "UsageError": (".errors", "UsageError"),
    "Verdict": ("._record.vocabulary", "Verdict"),
    "check": ("._run._driver", "check"),
    "check_engine": ("._run._driver", "check_engine"),
    "check_loop": ("._run._driver", "check_loop"),
    "engine": ("._kinds.engine", "engine"),
    "load_sampler": ("._kinds", "load_sampler"),
    "loop": ("._loop", "loop"),
    "pytest_battery": ("._pytest", "battery"),  # imports pytest
    "reference": (".samplers", "reference"),
    "sampler": ("._contract", "sampler"),
    "tree_sampler": ("._calling.tree", "tree_sampler"),
}

__all__ = sorted([*_PUBLIC, "__version__"])

#: Public submodules, reachable as attributes after a bare ``import specverify``.
_SUBMODULES = (
    "adapters",
    "checks",
    "errors",
    "laws",
    "models",
    "replay",
    "report",
    "samplers",
    "stats",
    "strategies",
    "trees",
    "warps",
    "zoo",
)

#: Names the facade held before they moved to a submodule: still found there, with a warning, so
#: old scripts and the repro snippets of old run files keep working.
_MOVED = {
    **dict.fromkeys(("completed_law", "emitted_law", "generation_law", "step_law", "target_law", "warp"), "laws"),
    **dict.fromkeys(("ChainModel", "MarkovLM", "Model", "TableModel"), "models"),
    **dict.fromkeys(
        ("LawTest", "ModelCase", "StepCase", "call_sampler", "derive_seed", "model_law_test", "step_law_test"), "replay"
    ),
}


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        module, attribute = _PUBLIC[name]
        value = getattr(importlib.import_module(module, __name__), attribute)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in _MOVED:
        where = f"specverify.{_MOVED[name]}"
        warnings.warn(f"specverify.{name} moved to {where}.{name}", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(where), name)
    raise AttributeError(f"module 'specverify' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*__all__, *_SUBMODULES})
