"""``specverify adapters``, the exit status of unloadable specs, and the adapters' import rules."""

from __future__ import annotations

import ast
import importlib
import pathlib
import sys

import pytest
import torch

import specverify.adapters as adapters
from specverify._cli import main
from specverify._seeds import derive_seed
from specverify.adapters import ADAPTERS, readiness

PACKAGE = pathlib.Path(adapters.__file__).parent


def test_every_listed_spec_names_a_zero_argument_factory():
    for adapter in ADAPTERS:
        module_name, _, attribute = adapter.spec.partition(":")
        factory = getattr(importlib.import_module(module_name), attribute)
        assert callable(factory) and factory.__code__.co_argcount == 0, adapter.spec


def test_print_adapters_lists_every_spec_and_whether_it_can_run(capsys):
    assert main(["adapters"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for adapter in ADAPTERS:
        state = readiness(adapter)
        row = next(i for i, line in enumerate(lines) if adapter.spec in line)
        assert lines[row].startswith("yes " if state.ready else "no  ")
        assert state.reason in lines[row + 2]


def test_readiness_needs_the_library_and_for_gpu_libraries_a_gpu():
    transformers_ready = readiness(next(a for a in ADAPTERS if a.library == "transformers"))
    assert transformers_ready.ready == (importlib.util.find_spec("transformers") is not None)
    for adapter in ADAPTERS:
        if adapter.needs_gpu and not torch.cuda.is_available():
            state = readiness(adapter)
            assert not state.ready
            assert "not installed" in state.reason or "needs an NVIDIA GPU" in state.reason


@pytest.mark.parametrize("adapter", [a for a in ADAPTERS if a.needs_gpu], ids=lambda a: a.spec)
def test_check_exits_2_with_a_one_line_reason_where_a_gpu_adapter_cannot_run(adapter, capsys):
    if readiness(adapter).ready:
        pytest.skip(f"{adapter.spec} can run here")
    assert main(["check", adapter.spec, "--budget", "quick", "--no-progress"]) == 2
    err = " ".join(capsys.readouterr().err.split())  # the console may wrap the line
    assert "AdapterUnavailable" in err and ("pip install" in err or "needs an NVIDIA GPU" in err)


def test_adapters_never_import_the_checks():
    for path in PACKAGE.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
                assert "checks" not in module.split("."), f"{path.name} imports {module}"
            elif isinstance(node, ast.Import):
                assert not any(".checks" in alias.name for alias in node.names), path.name


def test_adapter_modules_import_their_libraries_only_inside_functions():
    """Loading a spec, not importing the module, pulls in the library (and fails with a reason): at
    module level an adapter imports the standard library and the package's own dependencies only."""
    allowed = set(sys.stdlib_module_names) | {"torch", "numpy"}
    for path in PACKAGE.glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Import):
                roots = {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                roots = set() if node.level else {(node.module or "").split(".")[0]}
            else:
                continue
            assert roots <= allowed, f"{path.name} imports {roots - allowed} at module level"


@pytest.mark.parametrize("adapter", [a for a in ADAPTERS if a.needs_gpu], ids=lambda a: a.spec)
def test_gpu_adapters_run_on_the_real_library_where_they_can(adapter):
    """On a machine with a GPU and the library: a real batch through the real kernel, audited."""
    state = readiness(adapter)
    if not state.ready:
        pytest.skip(f"{adapter.spec}: {state.reason}")
    from specverify import load_sampler
    from specverify._calling.sut import SamplerUnderTest

    sut = SamplerUnderTest(load_sampler(adapter.spec))
    generator = torch.Generator().manual_seed(derive_seed("tests", "adapters", "gpu", adapter.spec))
    target = torch.rand((256, 4, 1000), generator=generator, dtype=torch.float64)
    draft = torch.rand((256, 3, 1000), generator=generator, dtype=torch.float64)
    drafts = torch.multinomial(draft.reshape(-1, 1000), 1, generator=generator).reshape(256, 3)
    tokens, accepted = sut.step(target, draft, drafts, generator=sut.generator(0))  # raises on any contract breach
    again = sut.step(target, draft, drafts, generator=sut.generator(0))
    assert torch.equal(tokens, again[0]) and torch.equal(accepted, again[1])
    if adapter.claim != "lossless":
        return  # a lossy mode may accept a draft the target forbids: the battery measures that
    forced = torch.zeros((8, 4, 5), dtype=torch.float64)
    forced[..., 1] = 1
    one_hot_draft = torch.zeros((8, 3, 5), dtype=torch.float64)
    one_hot_draft[..., 0] = 1
    tokens, accepted = sut.step(
        forced, one_hot_draft, torch.zeros((8, 3), dtype=torch.int64), generator=sut.generator(1)
    )
    assert tokens.tolist() == [[1, -1, -1, -1]] * 8 and accepted.tolist() == [0] * 8
