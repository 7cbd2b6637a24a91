"""specverify: prove or refute that a speculative-decoding sampler preserves the target's law.

Put a sampler through the battery::

    import specverify
    result = specverify.check(my_sampler, budget="quick")
    print(result.verdict)

or from the shell: ``specverify check mypackage.module:sampler``.

The names below are imported on first use, so ``import specverify`` is cheap and reading a run's
JSON (``specverify report``, :mod:`specverify.report`) never imports torch or Hypothesis.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._errors import SpecverifyError, UsageError
from ._version import __version__

if TYPE_CHECKING:
    from ._budgets import BUDGETS, Budget
    from ._cases import ModelCase, StepCase
    from ._contract import Capabilities, Sampler, SamplerSpecError, sampler
    from ._layout import load_sampler
    from ._exact import completed_law, emitted_law, step_law, target_law
    from ._loop import MarkovLM, generation_law, loop
    from ._models import ChainModel, Model, TableModel
    from ._pytest import battery as pytest_battery
    from ._replay import LawTest, SamplerFault, call_sampler, model_law_test, step_law_test
    from ._result import CheckResult, RunResult
    from ._runner import check
    from ._seeds import derive_seed
    from ._warp import SamplingParams, warp
    from ._runner import check_loop
    from .samplers import reference

__all__ = [
    "BUDGETS",
    "Budget",
    "Capabilities",
    "ChainModel",
    "CheckResult",
    "LawTest",
    "MarkovLM",
    "Model",
    "ModelCase",
    "RunResult",
    "Sampler",
    "SamplerFault",
    "SamplerSpecError",
    "SamplingParams",
    "SpecverifyError",
    "StepCase",
    "TableModel",
    "UsageError",
    "__version__",
    "call_sampler",
    "check",
    "check_loop",
    "completed_law",
    "derive_seed",
    "emitted_law",
    "generation_law",
    "load_sampler",
    "loop",
    "model_law_test",
    "pytest_battery",
    "reference",
    "sampler",
    "step_law",
    "step_law_test",
    "target_law",
    "warp",
]

#: Where each public name lives: (module, attribute).
_LAZY = {
    "BUDGETS": ("._budgets", "BUDGETS"),
    "Budget": ("._budgets", "Budget"),
    "Capabilities": ("._contract", "Capabilities"),
    "ChainModel": ("._models", "ChainModel"),
    "CheckResult": ("._result", "CheckResult"),
    "LawTest": ("._replay", "LawTest"),
    "MarkovLM": ("._loop", "MarkovLM"),
    "Model": ("._models", "Model"),
    "ModelCase": ("._cases", "ModelCase"),
    "RunResult": ("._result", "RunResult"),
    "Sampler": ("._contract", "Sampler"),
    "SamplerFault": ("._replay", "SamplerFault"),
    "SamplerSpecError": ("._contract", "SamplerSpecError"),
    "SamplingParams": ("._warp", "SamplingParams"),
    "StepCase": ("._cases", "StepCase"),
    "TableModel": ("._models", "TableModel"),
    "call_sampler": ("._replay", "call_sampler"),
    "check": ("._runner", "check"),
    "check_loop": ("._runner", "check_loop"),
    "completed_law": ("._exact", "completed_law"),
    "derive_seed": ("._seeds", "derive_seed"),
    "emitted_law": ("._exact", "emitted_law"),
    "generation_law": ("._loop", "generation_law"),
    "load_sampler": ("._layout", "load_sampler"),
    "loop": ("._loop", "loop"),
    "model_law_test": ("._replay", "model_law_test"),
    "pytest_battery": ("._pytest", "battery"),  # imports pytest
    "reference": (".samplers", "reference"),
    "sampler": ("._contract", "sampler"),
    "step_law": ("._exact", "step_law"),
    "step_law_test": ("._replay", "step_law_test"),
    "target_law": ("._exact", "target_law"),
    "warp": ("._warp", "warp"),
}

#: Subpackages reachable as attributes after a bare ``import specverify``, as before the names were lazy.
_SUBPACKAGES = ("adapters", "checks", "report", "samplers", "stats", "strategies", "zoo")


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attribute = _LAZY[name]
        value = getattr(importlib.import_module(module, __name__), attribute)
        globals()[name] = value
        return value
    if name in _SUBPACKAGES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'specverify' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*__all__, *_SUBPACKAGES})
