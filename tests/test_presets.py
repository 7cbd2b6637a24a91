"""Engine presets: each is a law, vectorised over rows, and each differs where its engine's rule does."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specverify._warps.presets import PRESETS, preset
from specverify._warps.rules import SamplingParams, warp
from specverify._warps.separating import SEPARATING_CASES, differences, tv_on_cases
from specverify.strategies import separating_logits_cases
from specverify.strategies._internal.params import logits_cases


def _params(**values: float) -> SamplingParams:
    return SamplingParams(
        **{
            name: torch.tensor([value], dtype=torch.int64 if name == "top_k" else torch.float64)
            for name, value in values.items()
        }
    )


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
        assert torch.equal(alone[0], law[row])  # bit for bit: a cut runs on the rows that ask for it alone


def test_transformers_is_specverifys_own_warp_and_unknown_names_say_which_exist():
    logits = torch.tensor([[[2.0, 1.0, 0.0, -1.0]]])
    params = _params(temperature=0.7, top_k=3, top_p=0.9, min_p=0.1)
    assert torch.equal(PRESETS["transformers"](logits, params), warp(logits, params))
    with pytest.raises(
        ValueError, match="unknown warp preset 'tgi'; known presets: 'transformers', 'vllm', 'sglang', 'llama.cpp'"
    ):
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
    assert (
        int((sglang > 0).sum()) == 2 and int((hf > 0).sum()) == 1
    )  # before the 2nd: 0.644 of the whole mass, 0.731 after top-k


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


def scalar_preset(
    name: str, logits: list[float], t: float | None, k: int | None, top_p: float | None, min_p: float | None
) -> list[float]:
    """A preset's rules for one row, in Python floats and sorted lists: the statement the vectorised
    warp (one shared sort, off cuts skipped) must agree with."""
    convention, vocab = PRESETS[name], len(logits)
    if t is not None and t <= convention.greedy_below:
        best = max(range(vocab), key=lambda i: (logits[i], -i))
        return [1.0 if i == best else 0.0 for i in range(vocab)]
    scale = 1.0 if t is None else t

    def softmax(values: list[float], keep: list[bool]) -> list[float]:
        top = max(v for v, kept in zip(values, keep) if kept)
        e = [math.exp(v - top) if kept else 0.0 for v, kept in zip(values, keep)]
        return [x / sum(e) for x in e]

    def cut(cut_name: str, law: list[float]) -> list[bool]:
        ranked = sorted(range(vocab), key=lambda i: (-law[i], i))
        if cut_name == "top_k" and k is not None and 0 < k < vocab:
            if convention.top_k_exact:
                return [i in ranked[:k] for i in range(vocab)]
            return [p >= law[ranked[k - 1]] for p in law]
        if cut_name == "top_p" and top_p is not None and top_p < 1:
            keep, mass = [False] * vocab, 0.0
            for i in ranked:
                keep[i] = mass <= top_p if convention.top_p_inclusive else mass < top_p
                mass += law[i]
            return keep
        if cut_name == "min_p" and min_p is not None and min_p > 0:
            return [p >= min_p * max(law) for p in law]
        return [True] * vocab

    probs = softmax([x if convention.temperature_last else x / scale for x in logits], [True] * vocab)
    keep = [p > 0 for p in probs]
    for cut_name in (
        ("top_k", "top_p", "min_p") if convention.joint else [n for n in convention.order if n != "temperature"]
    ):
        law = (
            probs if convention.joint else softmax([math.log(p) if kept else 0.0 for p, kept in zip(probs, keep)], keep)
        )
        keep = [a and b for a, b in zip(keep, cut(cut_name, law))]
    if convention.temperature_last:
        return softmax([x / scale for x in logits], keep)
    kept = [p if flag else 0.0 for p, flag in zip(probs, keep)]
    return [p / sum(kept) for p in kept]


@pytest.mark.parametrize(
    "name", [name for name in PRESETS if name != "transformers"]
)  # transformers': tests/test_warp.py
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_every_preset_matches_a_scalar_statement_of_its_rules_row_by_row(name, data):
    rows, vocab = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 7))
    logits = torch.tensor(
        data.draw(st.lists(st.lists(st.integers(-2, 2), min_size=vocab, max_size=vocab), min_size=rows, max_size=rows)),
        dtype=torch.float64,
    )
    ts = data.draw(st.one_of(st.none(), st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0]), min_size=rows, max_size=rows)))
    ks = data.draw(st.one_of(st.none(), st.lists(st.integers(0, vocab + 1), min_size=rows, max_size=rows)))
    ps = data.draw(
        st.one_of(st.none(), st.lists(st.sampled_from([0.25, 0.3, 0.5, 0.75, 0.9, 1.0]), min_size=rows, max_size=rows))
    )
    ms = data.draw(st.one_of(st.none(), st.lists(st.sampled_from([0.0, 0.1, 0.5]), min_size=rows, max_size=rows)))

    def column(values, dtype):
        return None if values is None else torch.tensor(values, dtype=dtype)

    params = SamplingParams(
        temperature=column(ts, torch.float64),
        top_k=column(ks, torch.int64),
        top_p=column(ps, torch.float64),
        min_p=column(ms, torch.float64),
    )
    _assert_matches_the_scalar_rules(name, logits, params)


@pytest.mark.parametrize("name", [name for name in PRESETS if name != "transformers"])
def test_every_preset_matches_the_scalar_rules_on_every_separating_case(name):
    for case in SEPARATING_CASES:  # the exact ties and boundaries where the presets part
        _assert_matches_the_scalar_rules(name, *case.tensors())


def _assert_matches_the_scalar_rules(name: str, logits: torch.Tensor, params: SamplingParams) -> None:
    law = PRESETS[name](logits, params)
    for row in range(logits.shape[0]):
        values = (params.temperature, params.top_k, params.top_p, params.min_p)
        pick = [None if value is None else value.reshape(-1)[row].item() for value in values]
        for position in range(logits.shape[1]) if logits.dim() == 3 else [None]:
            z = logits[row] if position is None else logits[row, position]
            got = law[row] if position is None else law[row, position]
            expected = torch.tensor(scalar_preset(name, z.tolist(), *pick), dtype=torch.float64)
            torch.testing.assert_close(
                got, expected, rtol=0, atol=1e-12, msg=lambda text: f"{name} row {z.tolist()} {pick}: {text}"
            )
