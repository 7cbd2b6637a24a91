"""The SGLang adapter's chain encoding, against a stand-in that walks the tree as the kernel does."""

from __future__ import annotations

import pytest
import torch

import specverify
from specverify._contract import audit_output
from specverify._seeds import derive_seed
from specverify.adapters import AdapterUnavailable
from specverify.adapters.sglang import SGLangChainSampler

SEED = derive_seed("tests", "adapters", "sglang")


def _step(batch=8, k=3, vocab=6, salt="step"):
    generator = torch.Generator().manual_seed(derive_seed(SEED, salt))
    target = torch.rand((batch, k + 1, vocab), generator=generator, dtype=torch.float64)
    draft = torch.rand((batch, k, vocab), generator=generator, dtype=torch.float64)
    tokens = torch.multinomial(draft.reshape(-1, vocab), 1, generator=generator).reshape(batch, k)
    return target.float(), draft.float(), tokens


def test_a_chain_is_encoded_as_a_tree_with_one_child_per_node(fake_sglang):
    sampler = SGLangChainSampler.load(device="cpu")
    target, draft, tokens = _step(batch=2, k=3)
    generator = torch.Generator().manual_seed(9)
    sampler(target, draft, tokens, generator)
    call = fake_sglang.last
    assert call["candidates"].tolist() == [[0, *row] for row in tokens.tolist()]
    assert call["retrive_index"].tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert call["retrive_next_token"].tolist() == [[1, 2, 3, -1]] * 2
    assert call["retrive_next_sibling"].tolist() == [[-1] * 4] * 2
    assert torch.equal(call["target_probs"], target)
    assert not call["draft_probs"].any()  # zeroed scratch, as SGLang allocates it
    assert call["threshold_single"] == call["threshold_acc"] == 1.0
    replay = torch.Generator().manual_seed(9)
    assert torch.equal(call["uniform_samples"], torch.rand((2, 4), generator=replay))
    assert torch.equal(call["uniform_samples_for_final_sampling"], torch.rand((2,), generator=replay))


def test_output_meets_the_contract_and_follows_accept_index(fake_sglang):
    sampler = SGLangChainSampler.load(device="cpu")
    target, draft, tokens = _step(batch=32)
    out, accepted = sampler(target, draft, tokens, torch.Generator().manual_seed(1))
    assert out.dtype == accepted.dtype == torch.int64
    assert audit_output((out, accepted), target, tokens) == []
    assert torch.equal(accepted, fake_sglang.last["accept_token_num"].long())
    assert 0 < int(accepted.sum()) < 32 * 3


def test_one_hot_target_forces_its_tokens_and_the_bonus(fake_sglang):
    sampler = SGLangChainSampler.load(device="cpu")
    target = torch.zeros((3, 3, 4))
    target[:, 0, 2] = 1
    target[:, 1, 3] = 1
    target[:, 2, 0] = 1
    draft = torch.full((3, 2, 4), 0.25)
    out, accepted = sampler(target, draft, torch.tensor([[2, 3], [2, 1], [0, 3]]), torch.Generator().manual_seed(0))
    assert accepted.tolist() == [2, 1, 0]
    assert out.tolist() == [[2, 3, 0], [2, 3, -1], [2, -1, -1]]


def test_relaxed_thresholds_are_passed_and_named(fake_sglang):
    sampler = SGLangChainSampler.load(device="cpu", threshold_single=0.8, threshold_acc=0.5)
    target, draft, tokens = _step(batch=2, k=1)
    sampler(target, draft, tokens, torch.Generator().manual_seed(0))
    assert (fake_sglang.last["threshold_single"], fake_sglang.last["threshold_acc"]) == (0.8, 0.5)
    assert "threshold_single=0.8, threshold_acc=0.5" in sampler.name


def test_thresholds_outside_the_unit_interval_are_refused(fake_sglang):
    with pytest.raises(ValueError, match="threshold_acc must lie in"):
        SGLangChainSampler.load(device="cpu", threshold_acc=1.5)


def test_a_kernel_without_the_tree_arguments_is_refused(monkeypatch, fake_sglang):
    import sys

    monkeypatch.setattr(
        sys.modules["sgl_kernel"],
        "tree_speculative_sampling_target_only",
        lambda predicts, candidates, target_probs: None,
    )
    with pytest.raises(AdapterUnavailable, match="lacks"):
        SGLangChainSampler.load(device="cpu")


def test_without_a_gpu_the_spec_fails_to_load_with_the_reason(fake_sglang):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the spec would load")
    with pytest.raises(specverify.SamplerSpecError, match="needs an NVIDIA GPU"):
        specverify.load_sampler("specverify.adapters.sglang:relaxed")


def test_without_the_library_the_spec_fails_to_load_with_the_install_hint(no_library):
    no_library("sgl_kernel")
    with pytest.raises(specverify.SamplerSpecError, match=r"pip install sgl-kernel"):
        specverify.load_sampler("specverify.adapters.sglang:sampler")
