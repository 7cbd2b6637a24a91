"""The vLLM adapter's argument mapping, against a stand-in with vLLM V1's signatures."""

from __future__ import annotations

import types

import pytest
import torch

import specverify
from specverify._contract import audit_output
from specverify._seeds import derive_seed
from specverify.adapters import AdapterUnavailable
from specverify.adapters.vllm import VLLMSampler

SEED = derive_seed("tests", "adapters", "vllm")


def _step(batch=12, k=3, vocab=6, salt="step"):
    generator = torch.Generator().manual_seed(derive_seed(SEED, salt))
    target = torch.rand((batch, k + 1, vocab), generator=generator, dtype=torch.float64)
    draft = torch.rand((batch, k, vocab), generator=generator, dtype=torch.float64)
    tokens = torch.multinomial(draft.reshape(-1, vocab), 1, generator=generator).reshape(batch, k)
    return target.float(), draft.float(), tokens


def test_ragged_flattened_layout_and_logits(fake_vllm):
    sampler = VLLMSampler.load(device="cpu")
    target, draft, tokens = _step()
    sampler(target, draft, tokens, torch.Generator().manual_seed(0))
    call = fake_vllm.last
    assert call["draft_token_ids"].dtype == torch.int32
    assert call["draft_token_ids"].tolist() == tokens.reshape(-1).tolist()
    assert call["num_draft_tokens"] == [3] * 12 and call["max_spec_len"] == 3
    assert call["cu_num_draft_tokens"].tolist() == [3 * (i + 1) for i in range(12)]
    assert torch.equal(call["draft_probs"], draft.reshape(36, 6))
    # vLLM after #32852 takes target logits: log p, whose softmax is the target law of each row.
    laws = target[:, :3] / target[:, :3].sum(-1, keepdim=True)
    assert torch.allclose(call["target"].softmax(-1), laws.reshape(36, 6))
    assert call["bonus_token_ids"].shape == (12, 1) and call["bonus_token_ids"].dtype == torch.int32
    metadata = call["sampling_metadata"]
    assert metadata.all_random and not metadata.all_greedy and metadata.generators == {}
    assert metadata.temperature.tolist() == [1.0] * 12
    assert call["synthetic_mode"] is False
    assert sampler.capabilities.max_k == 128


def test_older_vllm_gets_probabilities(fake_vllm_probs):
    sampler = VLLMSampler.load(device="cpu")
    target, draft, tokens = _step(batch=4, k=2)
    sampler(target, draft, tokens, torch.Generator().manual_seed(0))
    assert torch.equal(fake_vllm_probs.last["target"], target[:, :2].reshape(8, 6))


def test_output_meets_the_contract_and_is_deterministic_in_the_generator(fake_vllm):
    sampler = VLLMSampler.load(device="cpu")
    target, draft, tokens = _step(batch=48)
    global_state = torch.get_rng_state()
    first = sampler(target, draft, tokens, torch.Generator().manual_seed(4))
    second = sampler(target, draft, tokens, torch.Generator().manual_seed(4))
    assert torch.equal(global_state, torch.get_rng_state())  # vLLM's global draws were seeded and undone
    assert first[0].dtype == first[1].dtype == torch.int64
    assert audit_output(first, target, tokens) == []
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])
    assert 0 < int(first[1].sum()) < 48 * 3


def test_bonus_token_comes_from_the_last_target_row(fake_vllm):
    sampler = VLLMSampler.load(device="cpu")
    target = torch.zeros((3, 3, 4))
    target[:, 0, 2] = 1
    target[:, 1, 3] = 1
    target[:, 2, 0] = 1
    draft = torch.zeros((3, 2, 4))
    draft[:, 0, 2] = 1
    draft[:, 1, 3] = 1
    tokens, accepted = sampler(target, draft, torch.tensor([[2, 3]] * 3), torch.Generator().manual_seed(0))
    assert accepted.tolist() == [2] * 3 and tokens.tolist() == [[2, 3, 0]] * 3


def test_one_hot_laws_force_the_tokens(fake_vllm):
    sampler = VLLMSampler.load(device="cpu")
    target = torch.zeros((4, 3, 3))
    target[..., 1] = 1
    draft = torch.zeros((4, 2, 3))
    draft[..., 0] = 1
    tokens, accepted = sampler(target, draft, torch.zeros((4, 2), dtype=torch.int64), torch.Generator().manual_seed(0))
    assert accepted.tolist() == [0] * 4 and tokens.tolist() == [[1, -1, -1]] * 4


def test_synthetic_mode_passes_its_rates(fake_vllm):
    sampler = VLLMSampler.load(device="cpu", synthetic_rate=0.8)
    target, draft, tokens = _step(batch=4, k=2)
    sampler(target, draft, tokens, torch.Generator().manual_seed(0))
    call = fake_vllm.last
    assert call["synthetic_mode"] is True
    assert call["synthetic_conditional_rates"].tolist() == pytest.approx([0.8, 0.8])
    assert "synthetic" in sampler.name


def test_synthetic_mode_is_refused_by_a_vllm_without_it(fake_vllm_probs):
    with pytest.raises(AdapterUnavailable, match="no synthetic_mode"):
        VLLMSampler.load(device="cpu", synthetic_rate=0.8)


def test_unknown_signature_is_refused(monkeypatch, fake_vllm):
    import sys

    monkeypatch.setattr(
        sys.modules["vllm.v1.sample.rejection_sampler"],
        "rejection_sample",
        lambda metadata, draft_probs, logits, sampling_metadata: None,
    )
    with pytest.raises(AdapterUnavailable, match="this adapter knows"):
        VLLMSampler.load(device="cpu")


def test_without_a_gpu_the_spec_fails_to_load_with_the_reason(fake_vllm):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the spec would load")
    with pytest.raises(specverify.SamplerSpecError, match="needs an NVIDIA GPU"):
        specverify.load_sampler("specverify.adapters.vllm:sampler")


def test_without_the_library_the_spec_fails_to_load_with_the_install_hint(no_library):
    no_library("vllm", "vllm.v1", "vllm.v1.sample", "vllm.v1.sample.rejection_sampler")
    with pytest.raises(specverify.SamplerSpecError, match=r"pip install vllm"):
        specverify.load_sampler("specverify.adapters.vllm:synthetic")


# --- the logits path: temperature, top-k and top-p through the sampling metadata ----------------


def _params(**columns):
    from specverify import SamplingParams

    return SamplingParams(
        **{k: torch.tensor(v, dtype=torch.int64 if k == "top_k" else torch.float64) for k, v in columns.items()}
    )


def test_the_logits_path_passes_each_rows_parameters_and_verifies_the_warped_target(fake_vllm):
    from specverify.adapters.vllm import VLLMLogitsSampler

    sampler = VLLMLogitsSampler.load(device="cpu")
    assert sampler.capabilities.inputs == "logits" and sampler.capabilities.params == ("temperature", "top_k", "top_p")
    generator = torch.Generator().manual_seed(derive_seed(SEED, "logits"))
    logits = torch.randn((6, 3, 5), generator=generator, dtype=torch.float64)
    _, draft, tokens = _step(batch=6, k=2, vocab=5, salt="logits")
    params = _params(
        temperature=[0.5, 1.0, 2.0, 0.0, 1.0, 0.7], top_k=[0, 2, 0, 0, 9, 1], top_p=[1.0, 1.0, 0.5, 1.0, 0.3, 1.0]
    )
    output = sampler(logits.float(), draft, tokens, torch.Generator().manual_seed(0), params)
    call = fake_vllm.last
    metadata = call["sampling_metadata"]
    assert metadata.temperature.tolist() == pytest.approx([0.5, 1.0, 2.0, 0.0, 1.0, 0.7])
    assert metadata.top_k.tolist() == [5, 2, 5, 5, 5, 1]  # vLLM's "off" is the vocabulary size
    assert metadata.top_p.tolist() == pytest.approx([1.0, 1.0, 0.5, 1.0, 0.3, 1.0])
    assert not metadata.all_random and not metadata.all_greedy
    sampled = torch.tensor([0, 1, 2, 4, 5])  # every row but the greedy one
    verified = call["target"].softmax(-1).reshape(6, 2, 5)[sampled]
    assert torch.allclose(
        verified.double(),
        specverify.laws.warp(logits[:, :2].float().double(), params).float().double()[sampled],
        atol=1e-6,
    )
    tokens_out, accepted = output
    warped = specverify.laws.warp(logits, params)
    assert audit_output(output, warped, tokens) == []
    greedy_first = warped[3, 0].argmax()
    assert int(tokens_out[3, 0]) == (int(tokens[3, 0]) if int(tokens[3, 0]) == int(greedy_first) else int(greedy_first))


def test_posed_cases_through_the_logits_path_never_emit_a_cut_token_and_a_skipped_top_k_does(fake_vllm, monkeypatch):
    import sys

    from specverify._kinds import LogitsLayout
    from specverify.adapters.vllm import VLLMLogitsSampler

    rows = 300  # a third of them pose top_k alone, cutting three decoys of about 7% of the mass
    target = torch.tensor([0.4, 0.3, 0.3, 0.0, 0.0, 0.0]).expand(rows, 3, -1)
    draft = torch.tensor([0.25, 0.25, 0.25, 0.25, 0.0, 0.0]).expand(rows, 2, -1)
    generator = torch.Generator().manual_seed(derive_seed(SEED, "posed"))
    tokens = torch.multinomial(draft.reshape(-1, 6), 1, generator=generator).reshape(rows, 2)
    sampler = VLLMLogitsSampler.load(device="cpu")
    posed = LogitsLayout(sampler.capabilities.params).posed(sampler)
    assert audit_output(posed(target, draft, tokens, torch.Generator().manual_seed(1)), target, tokens) == []
    module = sys.modules["vllm.v1.sample.rejection_sampler"]
    constrain = module.apply_sampling_constraints
    monkeypatch.setattr(
        module,
        "apply_sampling_constraints",
        lambda z, cu, m: constrain(z, cu, types.SimpleNamespace(**{**vars(m), "top_k": None})),
    )
    skipping = LogitsLayout(sampler.capabilities.params).posed(VLLMLogitsSampler.load(device="cpu"))
    found = audit_output(skipping(target, draft, tokens, torch.Generator().manual_seed(1)), target, tokens)
    assert [v.rule for v in found] == ["zero-target"]


def test_the_logits_path_needs_a_vllm_that_takes_logits(fake_vllm_probs):
    from specverify.adapters.vllm import VLLMLogitsSampler

    with pytest.raises(AdapterUnavailable, match="no apply_sampling_constraints|no logits path"):
        VLLMLogitsSampler.load(device="cpu")
