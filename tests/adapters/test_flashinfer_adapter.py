"""The FlashInfer adapter's argument mapping, against a stand-in with FlashInfer's signatures."""

from __future__ import annotations

import pytest
import torch

import specverify
from specverify._contract import audit_output
from specverify._seeds import derive_seed
from specverify.adapters import AdapterUnavailable
from specverify.adapters.flashinfer import FlashInferSampler

SEED = derive_seed("tests", "adapters", "flashinfer")


def _step(batch=16, k=3, vocab=6, salt="step"):
    generator = torch.Generator().manual_seed(derive_seed(SEED, salt))
    target = torch.rand((batch, k + 1, vocab), generator=generator, dtype=torch.float64)
    draft = torch.rand((batch, k, vocab), generator=generator, dtype=torch.float64)
    tokens = torch.multinomial(draft.reshape(-1, vocab), 1, generator=generator).reshape(batch, k)
    return target.float(), draft.float(), tokens


def test_arguments_go_by_name_in_float32_and_int32(fake_flashinfer):
    sampler = FlashInferSampler.load(device="cpu")
    target, draft, tokens = _step()
    generator = torch.Generator().manual_seed(3)
    sampler(target, draft, tokens, generator)
    call = fake_flashinfer.last
    assert torch.equal(call["draft_probs"], draft) and call["draft_probs"].dtype == torch.float32
    assert torch.equal(call["target_probs"], target) and call["target_probs"].shape == (16, 4, 6)
    assert call["draft_token_ids"].dtype == torch.int32 and torch.equal(call["draft_token_ids"].long(), tokens)
    assert call["generator"] is generator and call["seed"] is None and call["offset"] is None
    assert call["deterministic"] is True


def test_output_is_int64_with_padding_and_flashinfers_own_count(fake_flashinfer):
    sampler = FlashInferSampler.load(device="cpu")
    target, draft, tokens = _step(batch=64)
    out, accepted = sampler(target, draft, tokens, torch.Generator().manual_seed(0))
    assert out.dtype == accepted.dtype == torch.int64
    assert audit_output((out, accepted), target, tokens) == []
    assert torch.equal(accepted, (out != -1).sum(-1) - 1)
    assert 0 < int(accepted.sum()) < 64 * 3


def test_one_hot_laws_force_the_tokens_so_p_and_q_are_not_swapped(fake_flashinfer):
    # FlashInfer calls the draft p and the target q.  Target one-hot on 1, draft one-hot on 0:
    # every draft must be rejected; with the laws swapped every draft would be accepted.
    sampler = FlashInferSampler.load(device="cpu")
    target = torch.zeros((4, 3, 3))
    target[..., 1] = 1
    draft = torch.zeros((4, 2, 3))
    draft[..., 0] = 1
    out, accepted = sampler(target, draft, torch.zeros((4, 2), dtype=torch.int64), torch.Generator().manual_seed(0))
    assert accepted.tolist() == [0] * 4 and out.tolist() == [[1, -1, -1]] * 4


def test_older_flashinfer_gets_uniforms_drawn_from_the_generator(fake_flashinfer_uniforms):
    sampler = FlashInferSampler.load(device="cpu")
    target, draft, tokens = _step(batch=8, k=2)
    first = sampler(target, draft, tokens, torch.Generator().manual_seed(5))
    uniforms = fake_flashinfer_uniforms.last["uniform_samples"]
    assert uniforms.shape == (8, 3) and uniforms.dtype == torch.float32
    assert torch.equal(uniforms, torch.rand((8, 3), generator=torch.Generator().manual_seed(5)))
    second = sampler(target, draft, tokens, torch.Generator().manual_seed(5))
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])
    assert not sampler.capabilities.uniforms  # FlashInfer's residual uniform is not the canonical one


def test_unknown_signature_is_refused_with_the_signature_in_the_reason(monkeypatch, fake_flashinfer):
    import sys

    monkeypatch.setattr(
        sys.modules["flashinfer.sampling"],
        "chain_speculative_sampling",
        lambda draft_probs, draft_token_ids, target_probs, rng: None,
    )
    with pytest.raises(AdapterUnavailable, match=r"neither generator= nor uniform_samples="):
        FlashInferSampler.load(device="cpu")


def test_without_a_gpu_the_spec_fails_to_load_with_the_reason(fake_flashinfer):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the spec would load")
    with pytest.raises(specverify.SamplerSpecError, match="needs an NVIDIA GPU"):
        specverify.load_sampler("specverify.adapters.flashinfer:sampler")


def test_without_the_library_the_spec_fails_to_load_with_the_install_hint(no_library):
    no_library("flashinfer", "flashinfer.sampling")
    with pytest.raises(specverify.SamplerSpecError, match=r"pip install flashinfer-python"):
        specverify.load_sampler("specverify.adapters.flashinfer:sampler")
