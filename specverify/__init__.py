"""specverify: prove or refute that a speculative-decoding sampler preserves the target's law.

Put a sampler through the battery::

    import specverify
    result = specverify.check(my_sampler, budget="quick")
    print(result.verdict)

or from the shell: ``specverify check mypackage.module:sampler``.
"""

from __future__ import annotations

from ._budgets import BUDGETS, Budget
from ._cases import ModelCase, StepCase
from ._contract import Capabilities, Sampler, SamplerSpecError, load_sampler, sampler
from ._errors import SpecverifyError, UsageError
from ._exact import completed_law, emitted_law, step_law, target_law
from ._loop import MarkovLM, generation_law, loop
from ._models import ChainModel, Model, TableModel
from ._replay import LawTest, model_law_test, step_law_test
from ._result import CheckResult, RunResult
from ._runner import check
from ._seeds import derive_seed
from ._version import __version__
from ._warp import SamplingParams, warp
from .checks._loop import check_loop
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
    "SamplerSpecError",
    "SamplingParams",
    "SpecverifyError",
    "StepCase",
    "TableModel",
    "UsageError",
    "__version__",
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


def __getattr__(name: str):
    # pytest_battery imports pytest: only when asked for.
    if name == "pytest_battery":
        from ._pytest import battery

        return battery
    raise AttributeError(f"module 'specverify' has no attribute {name!r}")
