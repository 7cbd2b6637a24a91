"""Engine presets: each is a law, vectorised over rows, and each differs where its engine's rule does."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings

from specverify._warps.presets import PRESETS, preset
from specverify._warps.separating import SEPARATING_CASES, differences, tv_on_cases
from specverify._warps.rules import SamplingParams, warp
from specverify.strategies import separating_logits_cases
from specverify.strategies._internal.params import logits_cases


def _params(**values: float) -> SamplingParams:
    return SamplingParams(**{name: torch.tensor([value], dtype=torch.int64 if name == "top_k" else torch.float64) for name, value in values.items()})


@pytest.mark.parametrize("name", list(PRESETS))
@settings(max_examples=30, deadline=None)
@given(case=logits_cases(max_rows=4, max_k=2, max_vocab=7))
def test_every_preset_is_a_law_and_its_rows_do_not_depend_on_the_batch(name, case):
    logits, params = case
    law = PRESETS[name](logits, params)
    assert law.dtype == torch.float64 and law.shape == logits.shape
    assert bool((law >= 0).all()) and torch.allclose(law.sum(-1), torch.ones(law.shape[:-1], dtype=torch.float64))
    for row in range(logits.shape[0]):  # vectorised, yet each row is its own
        alone = PRESETS[name](logits[row : row + 1], params.select(slice(row, row + 1)))
        torch.testing.assert_close(alone[0], law[row], rtol=0, atol=1e-12)


def test_transformers_is_specverifys_own_warp_and_unknown_names_say_which_exist():
    logits = torch.tensor([[[2.0, 1.0, 0.0, -1.0]]])
    params = _params(temperature=0.7, top_k=3, top_p=0.9, min_p=0.1)
    assert torch.equal(PRESETS["transformers"](logits, params), warp(logits, params))
    with pytest.raises(ValueError, match="unknown warp preset 'tgi'; known presets: 'transformers', 'vllm', 'sglang', 'llama.cpp'"):
        preset("tgi")


def test_ties_at_the_kth_logit_all_kept_by_transformers_and_vllm_exactly_k_by_sglang_and_llama_cpp():
    uniform = torch.zeros(1, 4, dtype=torch.float64)
    laws = {name: p(uniform, _params(top_k=2))[0].tolist() for name, p in PRESETS.items()}
    assert laws["transformers"] == laws["vllm"] == [0.25] * 4
    assert laws["sglang"] == laws["llama.cpp"] == [0.5, 0.5, 0.0, 0.0]  # ties taken by increasing id


def test_mass_exactly_at_the_top_p_boundary_is_kept_only_by_sglang():
    uniform = torch.zeros(1, 4, dtype=torch.float64)  # masses before each token: 0, 0.25, 0.5, 0.75 exactly
    laws = {name: p(uniform, _params(top_p=0.5))[0] for name, p in PRESETS.items()}
    assert int((laws["sglang"] > 0).sum()) == 3
    assert all(int((laws[name] > 0).sum()) == 2 for name in ("transformers", "vllm", "llama.cpp"))


def test_llama_cpp_cuts_on_the_temperature_one_law_and_divides_by_the_temperature_last():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]], dtype=torch.float64)
    params = _params(temperature=1.6, top_p=0.8)
    kept = torch.softmax(logits, -1).cumsum(-1) - torch.softmax(logits, -1) < 0.8  # the cut at temperature 1
    expected = torch.softmax(torch.where(kept, logits / 1.6, -torch.inf), -1)
    torch.testing.assert_close(PRESETS["llama.cpp"](logits, params), expected, rtol=0, atol=1e-15)
    assert int((PRESETS["transformers"](logits, params) > 0).sum()) == 3 > int(kept.sum())


def test_vllm_applies_min_p_before_top_p_and_sglang_top_p_on_the_mass_before_top_k():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]], dtype=torch.float64)
    vllm, hf = (PRESETS[n](logits, _params(top_p=0.9, min_p=0.1)) for n in ("vllm", "transformers"))
    assert int((vllm > 0).sum()) == 2 and int((hf > 0).sum()) == 3
    sglang, hf = (PRESETS[n](logits, _params(top_k=2, top_p=0.7)) for n in ("sglang", "transformers"))
    assert int((sglang > 0).sum()) == 2 and int((hf > 0).sum()) == 1  # before the 2nd: 0.644 of the whole mass, 0.731 after top-k


def test_greedy_is_one_hot_at_the_first_largest_logit_in_every_preset():
    logits = torch.tensor([[0.0, 3.0, 3.0, 1.0]], dtype=torch.float64)
    for name, p in PRESETS.items():
        assert p(logits, _params(temperature=0.0, top_k=2, top_p=0.5))[0].tolist() == [0.0, 1.0, 0.0, 0.0], name


def test_every_pair_of_presets_is_separated_by_some_case_and_a_preset_by_none_from_itself():
    for a in PRESETS:
        found = {d.preset: d for d in differences(PRESETS[a])}
        assert found[a].case is None and found[a].tv == 0.0
        for b in PRESETS:
            if b != a:
                assert found[b].tv > 0.05 and found[b].case is not None, (a, b)
    assert len(tv_on_cases(PRESETS["vllm"], PRESETS["sglang"])) == len(SEPARATING_CASES)


@settings(max_examples=40, deadline=None)
@given(case=separating_logits_cases())
def test_generated_separating_cases_separate_the_preset_pair_they_are_drawn_for(case):
    logits, params, first, second = case
    law_a, law_b = PRESETS[first](logits, params), PRESETS[second](logits, params)
    assert float((law_a - law_b).abs().sum(-1).max()) > 1e-6
