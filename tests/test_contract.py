"""The sampler contract: specs, factories, capabilities and their one-line errors."""

from __future__ import annotations

import sys
import types

import pytest
import torch

import specverify
from specverify import Capabilities, SamplerSpecError, load_sampler
from specverify._contract import capabilities_of, name_of


@pytest.fixture
def fake_module(monkeypatch):
    module = types.ModuleType("fake_samplers")

    def plain(target_probs, draft_probs, draft_tokens, generator):
        return specverify.reference(target_probs, draft_probs, draft_tokens, generator)

    def factory():
        return plain

    def broken_factory():
        raise RuntimeError("no GPU here\nsecond line")

    module.plain = plain
    module.factory = factory
    module.broken_factory = broken_factory
    module.not_callable = 42
    module.returns_int = lambda: 3
    module.bad_caps = types.SimpleNamespace(capabilities="fast")
    module.bad_caps.__call__ = None
    monkeypatch.setitem(sys.modules, "fake_samplers", module)
    return module


def test_reference_spec_loads():
    assert load_sampler("specverify.samplers:reference") is specverify.reference


def test_factory_is_called(fake_module):
    assert load_sampler("fake_samplers:factory") is fake_module.plain


def test_plain_sampler_is_returned(fake_module):
    assert load_sampler("fake_samplers:plain") is fake_module.plain


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("no_colon", "not of the form"),
        (":attr", "not of the form"),
        ("mod:", "not of the form"),
        ("definitely_not_a_module_xyz:sampler", "no module named 'definitely_not_a_module_xyz'"),
        ("fake_samplers:missing", "has no attribute 'missing'"),
        ("fake_samplers:not_callable", "is a int, not a sampler"),
        ("fake_samplers:broken_factory", "factory 'fake_samplers:broken_factory' raised RuntimeError: no GPU here"),
        ("fake_samplers:returns_int", "returned a int, which is not callable"),
    ],
)
def test_bad_specs_give_one_line_errors(fake_module, spec, fragment):
    with pytest.raises(SamplerSpecError) as info:
        load_sampler(spec)
    message = str(info.value)
    assert fragment in message
    assert "\n" not in message


def test_import_error_inside_module_is_reported(tmp_path, monkeypatch):
    (tmp_path / "raises_on_import.py").write_text("raise ValueError('boom at import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(SamplerSpecError, match="raised ValueError: boom at import"):
        load_sampler("raises_on_import:sampler")


def test_capabilities_default_and_declared():
    def bare(t, d, y, g):
        return None

    assert capabilities_of(bare) == Capabilities()

    @specverify.sampler(name="mine", max_k=4, dtypes=(torch.float32,))
    def declared(t, d, y, g):
        return None

    assert name_of(declared) == "mine"
    assert capabilities_of(declared).max_k == 4
    assert capabilities_of(declared).unsupported(k=5, vocab=10) == "needs K=5, sampler declares max_k=4"
    assert capabilities_of(declared).unsupported(k=4, vocab=10) is None


def test_wrong_capabilities_type_is_an_error():
    def bad(t, d, y, g):
        return None

    bad.capabilities = {"device": "cuda"}
    with pytest.raises(SamplerSpecError, match="expected specverify.Capabilities"):
        capabilities_of(bad)


def test_capabilities_validate():
    with pytest.raises(ValueError):
        Capabilities(max_k=0)
    with pytest.raises(ValueError):
        Capabilities(dtypes=())


def test_a_one_row_function_declared_batched_is_told_to_declare_batched_false():
    import torch

    import specverify
    from specverify._contract import malformed

    def one_row(t, d, y, g):  # handles row 0 only, declared nothing (batched by default)
        tokens, accepted = specverify.reference(t[:1], d[:1], y[:1], g)
        return tokens, accepted

    t = torch.full((3, 3, 4), 0.25, dtype=torch.float64)
    d = torch.full((3, 2, 4), 0.25, dtype=torch.float64)
    y = torch.zeros((3, 2), dtype=torch.int64)
    problems = malformed(one_row(t, d, y, torch.Generator().manual_seed(0)), 3, 2)
    assert problems and "tokens has shape (1, 3), expected (3, 3)" in problems[0].message
    assert "declare batched=False" in problems[0].message
    wrong_k = malformed((torch.zeros((3, 2), dtype=torch.int64), torch.zeros(3, dtype=torch.int64)), 3, 2)
    assert "batched=False" not in wrong_k[0].message  # no hint where the cause is another
