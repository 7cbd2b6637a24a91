"""One errors module and one root: every error specverify defines lives in ``specverify.errors``
and derives from ``specverify.SpecverifyError``.

Evidence about a sampler is not an error: ``SamplerFault`` (it becomes a failing result and never
leaves a run) and the pytest plugin's ``CheckFailed`` (a test failure) stay outside the root.
"""

from __future__ import annotations

import ast
import importlib
import pathlib

import pytest

import specverify
from specverify import errors
from specverify._calling.sut import SamplerUnderTest
from specverify._run import plan

EVIDENCE = {"specverify.errors.SamplerFault", "specverify.errors.CheckFailed"}
#: What the worker process says of the sampler: private, turned into a SamplerFault (or a
#: SamplerSpecError) by the caller, so it never leaves the package.
WORKER = {
    "specverify._worker.wire.WorkerLoadError",
    "specverify._worker.wire.WorkerRaised",
    "specverify._worker.wire.WorkerDied",
    "specverify._worker.wire.WorkerHung",
    # a smallest-case search's control flow: raised to end Hypothesis's shrinking, caught where it ends
    "specverify.checks._hypothesis.ShrinkSpent",
}
#: Control flow, not errors: Ctrl-C carrying the results of what finished (a KeyboardInterrupt).
INTERRUPTS = {"specverify.errors.Interrupted"}


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
    assert EVIDENCE | INTERRUPTS <= set(exceptions)
    assert {"specverify.errors.SamplerSpecError", "specverify.errors.UsageError"} <= set(exceptions)
    for name, cls in exceptions.items():
        assert issubclass(cls, specverify.SpecverifyError) == (name not in EVIDENCE | INTERRUPTS | WORKER), name


def test_every_exception_lives_in_the_errors_module_and_is_exported_and_documented():
    """One module: the public exceptions are ``specverify.errors.__all__``, each named in its tree."""
    exceptions = defined_exceptions()
    public = {name for name in exceptions if name not in WORKER}
    assert public == {f"specverify.errors.{name}" for name in errors.__all__}
    tree = errors.__doc__ or ""
    for name in errors.__all__:
        assert f"── {name} " in tree, f"{name} is missing from the tree in specverify.errors' docstring"
        assert getattr(errors, name).__doc__, name
    # what a run raises is also in the facade
    for name in ("Interrupted", "SamplerFault", "SamplerSpecError", "SpecverifyError", "UsageError"):
        assert getattr(specverify, name) is getattr(errors, name)


def test_the_tree_in_the_docstring_is_the_class_tree():
    """Each class is drawn under its base: indentation is inheritance."""
    lines = [line for line in (errors.__doc__ or "").splitlines() if "── " in line]
    for line in lines:
        name = line.split("── ")[1].split()[0]
        depth = line.index("── ")
        parents = [p for p in lines[: lines.index(line)] if p.index("── ") < depth]
        if parents:
            base = parents[-1].split("── ")[1].split()[0]
            assert issubclass(getattr(errors, name), getattr(errors, base)), (name, base)


def test_a_loop_fault_is_a_sampler_fault():
    """One class for what a chain, tree or loop sampler did wrong (no LoopFault beside it)."""
    from specverify._contract import Violation

    fault = errors.SamplerFault(Violation("hang", "no return within 1 s"), {"traceback": "..."})
    assert str(fault) == "no return within 1 s" and fault.violation.rule == "hang"
    assert fault.details == {"traceback": "..."}
    assert not hasattr(importlib.import_module("specverify._calling.direct"), "LoopFault")


def test_usage_errors_are_value_errors_too():
    with pytest.raises(specverify.UsageError, match="no check matches") as raised:
        plan(SamplerUnderTest(specverify.reference), specverify.BUDGETS["quick"], ["no-such-check"])
    assert isinstance(raised.value, ValueError)
    with pytest.raises(specverify.UsageError, match="unknown budget"):
        specverify.check(specverify.reference, budget="no-such-budget")
    with pytest.raises(specverify.SpecverifyError, match="not of the form"):
        specverify.load_sampler("no-colon")
