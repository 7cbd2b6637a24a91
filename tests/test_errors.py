"""One exception root: every error specverify defines derives from ``specverify.SpecverifyError``.

Evidence about a sampler is not an error: ``SamplerFault`` (it becomes a failing result and never
leaves a run) and the pytest plugin's ``CheckFailed`` (a test failure) stay outside the root.
"""

from __future__ import annotations

import ast
import importlib
import pathlib

import pytest

import specverify
from specverify._calling import SamplerUnderTest
from specverify._run import plan

EVIDENCE = {
    "specverify._calling.SamplerFault",
    "specverify._pytest.CheckFailed",
    "specverify._loop_calling.LoopFault",  # a loop's broken contract, as SamplerFault for steps
    # what the worker process says of the sampler, turned into a SamplerFault by the caller
    "specverify._worker.WorkerLoadError",
    "specverify._worker.WorkerRaised",
    "specverify._worker.WorkerDied",
    "specverify._worker.WorkerHung",
}
#: Control flow, not errors: Ctrl-C carrying the results of what finished (a KeyboardInterrupt).
INTERRUPTS = {"specverify._runner.Interrupted"}


def defined_exceptions() -> dict[str, type]:
    """Every class in the package that derives from an exception, found by reading the source."""
    root = pathlib.Path(specverify.__file__).parent
    found = {}
    for path in sorted(root.rglob("*.py")):
        module = ".".join(("specverify", *path.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")
        if module.startswith("specverify.samplers._triton"):
            continue  # imports triton; defines no exception
        classes = [n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)]
        if not classes:
            continue
        loaded = importlib.import_module(module)
        for name in classes:
            cls = getattr(loaded, name, None)
            if isinstance(cls, type) and issubclass(cls, BaseException) and cls.__module__ == module:
                found[f"{module}.{name}"] = cls
    return found


def test_every_error_derives_from_the_root_and_evidence_does_not():
    exceptions = defined_exceptions()
    assert EVIDENCE <= set(exceptions)
    assert {"specverify._contract.SamplerSpecError", "specverify._errors.UsageError"} <= set(exceptions)
    for name, cls in exceptions.items():
        assert issubclass(cls, specverify.SpecverifyError) == (name not in EVIDENCE | INTERRUPTS), name


def test_usage_errors_are_value_errors_too():
    with pytest.raises(specverify.UsageError, match="no check matches") as raised:
        plan(SamplerUnderTest(specverify.reference), specverify.BUDGETS["quick"], ["no-such-check"])
    assert isinstance(raised.value, ValueError)
    with pytest.raises(specverify.UsageError, match="unknown budget"):
        specverify.check(specverify.reference, budget="no-such-budget")
    with pytest.raises(specverify.SpecverifyError, match="not of the form"):
        specverify.load_sampler("no-colon")
