"""The transformers adapter, against the installed library (it runs on the CPU)."""

from __future__ import annotations

import pytest
import torch

import specverify
from specverify._calling.sut import SamplerUnderTest
from specverify._contract import audit_output
from specverify._seeds import derive_seed
from specverify.adapters import AdapterUnavailable
from specverify.adapters.transformers import TransformersSampler
from specverify.errors import SamplerFault

transformers_utils = pytest.importorskip("transformers.generation.utils", reason="transformers is not installed")

SEED = derive_seed("tests", "adapters", "transformers")


def _random_step(batch: int, k: int, vocab: int, salt: str):
    generator = torch.Generator().manual_seed(derive_seed(SEED, salt))
    target = torch.rand((batch, k + 1, vocab), generator=generator, dtype=torch.float64)
    draft = torch.rand((batch, k, vocab), generator=generator, dtype=torch.float64)
    tokens = torch.multinomial(draft.reshape(-1, vocab), 1, generator=generator).reshape(batch, k)
    return target.float(), draft.float(), tokens


@pytest.fixture(scope="module")
def sampler():
    return specverify.load_sampler("specverify.adapters.transformers:sampler")


def test_spec_loads_a_named_sampler_with_capabilities(sampler):
    assert isinstance(sampler, TransformersSampler)
    assert "transformers" in sampler.name and "_speculative_sampling" in sampler.name
    assert sampler.capabilities.dtypes[0] is torch.float32
    assert not sampler.capabilities.uniforms


def test_output_meets_the_contract_on_a_batch(sampler):
    target, draft, tokens = _random_step(64, 3, 7, "batch")
    out_tokens, accepted = sampler(target, draft, tokens, torch.Generator().manual_seed(1))
    assert out_tokens.dtype == accepted.dtype == torch.int64
    assert out_tokens.shape == (64, 4) and accepted.shape == (64,)
    assert audit_output((out_tokens, accepted), target, tokens) == []
    assert 0 < int(accepted.sum()) < 64 * 3  # some accepted, some rejected: both paths were taken


def test_same_generator_state_same_output_and_global_rng_untouched(sampler):
    target, draft, tokens = _random_step(32, 2, 5, "determinism")
    global_state = torch.get_rng_state()
    first = sampler(target, draft, tokens, torch.Generator().manual_seed(7))
    second = sampler(target, draft, tokens, torch.Generator().manual_seed(7))
    other = sampler(target, draft, tokens, torch.Generator().manual_seed(8))
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])
    assert not torch.equal(first[0], other[0])
    assert torch.equal(global_state, torch.get_rng_state())


def test_one_hot_laws_force_the_tokens_so_target_and_draft_are_not_swapped(sampler):
    # Target one-hot on token 1 at every position, draft one-hot on token 0: every draft is
    # rejected and token 1 emitted.  Swapped laws would accept every draft instead.
    target = torch.zeros((4, 3, 3))
    target[..., 1] = 1
    draft = torch.zeros((4, 2, 3))
    draft[..., 0] = 1
    drafts = torch.zeros((4, 2), dtype=torch.int64)
    tokens, accepted = sampler(target, draft, drafts, torch.Generator().manual_seed(0))
    assert accepted.tolist() == [0] * 4
    assert tokens.tolist() == [[1, -1, -1]] * 4


def test_all_accepted_rows_end_with_the_bonus_token_from_the_last_target_row(sampler):
    target = torch.zeros((3, 3, 4))
    target[:, 0, 2] = 1
    target[:, 1, 3] = 1
    target[:, 2, 0] = 1
    draft = torch.zeros((3, 2, 4))
    draft[:, 0, 2] = 1
    draft[:, 1, 3] = 1
    drafts = torch.tensor([[2, 3]] * 3)
    tokens, accepted = sampler(target, draft, drafts, torch.Generator().manual_seed(0))
    assert accepted.tolist() == [2, 2, 2]
    assert tokens.tolist() == [[2, 3, 0]] * 3


def test_ensemble_mode_passes_its_weight_to_the_library():
    seen = []

    def recording(*args, **kwargs):
        seen.append(kwargs)
        return transformers_utils._speculative_sampling(*args, **kwargs)

    ensemble = TransformersSampler(recording, ensemble_weight=0.5)
    target, draft, tokens = _random_step(3, 2, 4, "ensemble")
    ensemble(target, draft, tokens, torch.Generator().manual_seed(0))
    assert seen == [{"assistant_ensemble_weight": 0.5}] * 3
    assert "assistant_ensemble_weight=0.5" in specverify.load_sampler("specverify.adapters.transformers:ensemble").name


def test_a_library_without_the_expected_signature_is_refused_with_a_reason(monkeypatch):
    monkeypatch.setattr(transformers_utils, "_speculative_sampling", lambda logits, generator: None)
    with pytest.raises(AdapterUnavailable, match="this adapter knows"):
        TransformersSampler.load()


def test_missing_library_is_a_one_line_load_error(no_library):
    no_library("transformers", "transformers.generation.utils")
    with pytest.raises(specverify.SamplerSpecError, match=r"needs 'transformers.generation.utils'.*pip install"):
        specverify.load_sampler("specverify.adapters.transformers:sampler")


def test_zero_residual_mass_makes_the_library_raise(sampler):
    """The defect docs/adapters.md reports: no guard when the residual's float32 mass is 0.

    p = (1e-8, 1 - 1e-8) and q = (2e-8, 1 - 2e-8) on draft token 0: the draft is rejected with
    probability 1/2, but in float32 p_1 = q_1 = 1, so max(p - q, 0) is all zeros, its
    normalisation is NaN and torch.multinomial raises.  The exact law is well defined (token 1).
    """
    target = torch.tensor([[[1e-8, 1 - 1e-8], [0.5, 0.5]]], dtype=torch.float64).expand(64, -1, -1)
    draft = torch.tensor([[[2e-8, 1 - 2e-8]]], dtype=torch.float64).expand(64, -1, -1)
    drafts = torch.zeros((64, 1), dtype=torch.int64)
    sut = SamplerUnderTest(sampler)
    with pytest.raises(SamplerFault, match="probability tensor contains either `inf`, `nan` or element < 0"):
        sut.step(target, draft, drafts, generator=sut.generator(0))
