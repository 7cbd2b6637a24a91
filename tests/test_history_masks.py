"""Bad words and a grammar as laws: the masks by hand, the exact generation law against a recursion
written independently (plain Python over the tables), the reference loop against the law, and the
zoo's two mask bugs caught with the prefix that allowed the token."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from specverify._history import (
    bad_words_mask,
    grammar_mask,
    grammar_states,
    grammar_violation,
    history_generation_law,
    padded_code,
)
from specverify._history.posing import posed_params
from specverify._kinds import LoopInputs, LoopLayout
from specverify._loop import MarkovLM
from specverify._run._driver import check_loop
from specverify._warps.rules import SamplingParams
from specverify.checks._loop_history import GRAMMARS, masked_at
from specverify.samplers._loop_reference import LoopReference
from specverify.stats import gof_test
from specverify.zoo._loops import LOOP_MEMBERS

NO_REPEAT = GRAMMARS["no token twice in a row"]
ALTERNATE = GRAMMARS["0, then 1 or 2, alternating"]
NAMES = ("bad_words", "grammar", "stop_tokens", "temperature")


def posed(group: dict, rows: int = 1) -> SamplingParams:
    return posed_params([group], torch.zeros(rows, dtype=torch.int64), NAMES)


def test_a_bad_word_is_masked_where_the_generated_tokens_end_with_its_other_tokens():
    words = posed({"bad_words": [[2, 2], [0], [1, 0, 1]]}).bad_words.expand(4, -1, -1)
    history = torch.tensor(
        [
            [-1, -1, 2, 2],  # prompt 2 (one token), generated 2: 2 after 2 is banned
            [-1, -1, -1, 2],  # only the prompt: a prompt's 2 does not count, only 0 (always) is banned
            [-1, 1, 0, 0],  # prompt 1, generated 0 0: 1 0 is not the tail
            [-1, 0, 1, 0],  # prompt 0, generated 1 0: 1 after 1 0 is banned
        ]
    )
    assert bad_words_mask(history, 1, words, 3).tolist() == [
        [True, False, True],
        [True, False, False],
        [True, False, False],
        [True, True, False],
    ]


def test_the_grammar_state_follows_the_generated_tokens_and_dies_outside_it():
    table = torch.tensor([NO_REPEAT]).expand(3, -1, -1)
    history = torch.tensor([[0, 0, 1, 2], [-1, -1, 0, 0], [0, 1, 1, 1]])  # prompt: one token
    assert grammar_states(history, 1, table).tolist() == [3, 1, -1]
    assert grammar_mask(history, 1, table).tolist() == [[False, False, True], [True, False, False], [False] * 3]
    assert grammar_violation(torch.tensor([0, 1, 1, -1]), torch.tensor(NO_REPEAT)) == (2, 2)
    assert grammar_violation(torch.tensor([0, 2, -1, -1]), torch.tensor(ALTERNATE)) is None


def test_the_tables_are_validated():
    with pytest.raises(ValueError, match="bad_words"):
        SamplingParams(bad_words=torch.tensor([[[1, -1]]]))  # padding after a token
    with pytest.raises(ValueError, match="grammar"):
        SamplingParams(grammar=torch.tensor([[[0, 2]]]))  # a state the table does not have
    with pytest.raises(ValueError, match="grammar"):
        SamplingParams(grammar=torch.tensor([[[1, 1], [-1, -1]]]))  # a state that allows nothing


def _allowed(group: dict, generated: list[int]) -> list[bool]:
    """The tokens the group's bad words and grammar allow after ``generated``, in plain Python."""
    vocab = 3
    ok = [True] * vocab
    for word in group.get("bad_words", []):
        if len(generated) >= len(word) - 1 and generated[len(generated) - len(word) + 1 :] == word[:-1]:
            ok[word[-1]] = False
    if "grammar" in group:
        state = 0
        for token in generated:
            state = group["grammar"][state][token]
        ok = [o and group["grammar"][state][t] >= 0 for t, o in enumerate(ok)]
    return ok


def _recursive_law(target: MarkovLM, prompt: list[int], n: int, group: dict) -> torch.Tensor:
    """The law sequence by sequence: a masked softmax of the target's logits, a stop token ends the row."""
    vocab = target.vocab_size
    law = torch.zeros((vocab + 1) ** n, dtype=torch.float64)
    for seq in itertools.product(range(vocab), repeat=n):
        p, out, ended = 1.0, [], False
        for t, token in enumerate(seq):
            if ended:
                p *= float(token == 0)
                out.append(-1)
                continue
            logits = target.logits[(prompt + list(seq[:t]))[-1]].tolist()
            weights = [math.exp(z) if ok else 0.0 for z, ok in zip(logits, _allowed(group, list(seq[:t])))]
            p *= weights[token] / sum(weights)
            out.append(token)
            ended = bool((group.get("stop_tokens", 0) >> token) & 1)
        law[int(padded_code(torch.tensor([out]), vocab))] += p
    return law


GROUPS = [
    {"bad_words": [[2, 2]]},
    {"bad_words": [[0], [2, 1, 1]]},
    {"bad_words": [[0], [1, 1, 1]]},
    {"grammar": NO_REPEAT},
    {"grammar": ALTERNATE, "stop_tokens": 0b100},
    {"grammar": NO_REPEAT, "bad_words": [[1, 0]]},
]


def _models() -> tuple[MarkovLM, MarkovLM]:
    g = torch.Generator().manual_seed(0)
    base = torch.randn(3, 3, generator=g, dtype=torch.float64) * 0.5 + 2 * torch.eye(3, dtype=torch.float64)
    return MarkovLM(base, context=(0,)), MarkovLM(base + 0.3 * torch.randn(3, 3, generator=g), context=(0,))


@pytest.mark.parametrize("group", GROUPS)
def test_the_exact_law_is_the_independent_recursion(group):
    target, _ = _models()
    law = history_generation_law(target, torch.tensor([0, 0, 1]), 4, posed(group))
    assert torch.allclose(law, _recursive_law(target, [0, 0, 1], 4, group), atol=1e-12)
    assert abs(float(law.sum()) - 1) < 1e-12


@pytest.mark.parametrize("group", [GROUPS[0], GROUPS[3]])
def test_the_reference_loop_generates_the_exact_law(group):
    target, draft = _models()
    rows, prompt = 20_000, torch.tensor([0, 0, 1])
    params = posed(group, rows)
    out = LoopReference()(target, draft, prompt.expand(rows, -1), 4, params, torch.Generator().manual_seed(2))
    assert LoopLayout().audit(LoopInputs(target, prompt.expand(rows, -1), 4, params), out) == []
    law = history_generation_law(target, prompt, 4, posed(group))
    counts = torch.bincount(padded_code(out, 3), minlength=law.numel())
    assert bool((law[counts > 0] > 0).all())  # never a bad word, never outside the grammar
    assert gof_test(counts.numpy(), law.numpy(), alpha=1e-4, random_state=0).pvalue > 1e-4


def test_a_forbidden_outcome_is_named_with_the_prefix_that_allowed_it():
    assert masked_at({"grammar": NO_REPEAT}, torch.tensor([0, 1, 1, 2])) == (
        "token 1 at position 2 is outside the grammar: after 0 1 (state 2) it allows only [0, 2]"
    )
    assert masked_at({"bad_words": [[2, 2]]}, torch.tensor([0, 2, 2, 1])) == (
        "token 2 at position 2 completes a bad word after 0 2"
    )
    assert masked_at({"bad_words": [[2, 2]]}, torch.tensor([2, 0, 2, -1])) is None


@pytest.mark.parametrize(
    "name, check, text",
    [
        ("bad-words-ignored-at-verified-rows", "loop.history[bad-words]", "completes a bad word after"),
        ("one-grammar-mask-per-step", "loop.history[grammar]", "is outside the grammar: after"),
    ],
)
def test_the_zoo_mask_bugs_are_support_failures_at_quick(name, check, text):
    member = LOOP_MEMBERS[name]
    result = check_loop(member.loop, budget="quick", seed=0, select=[check], isolation="in-process")
    (failed,) = result.checks
    assert failed.status == "fail" and failed.finding == "support" and result.verdict == "non-conformant"
    assert text in failed.message, failed.message


def _first_token_counts(loop, target, draft, group, rows=40_000):
    prompt = torch.tensor([0, 0, 1]).expand(rows, -1)
    out = loop(target, draft, prompt, 1, posed(group, rows), torch.Generator().manual_seed(4))
    return torch.bincount(out[:, 0], minlength=3).numpy()


def test_a_draft_cut_at_an_invalid_token_and_redrawn_from_p_follows_the_derived_law():
    # the drafter proposes without the grammar; cut at an invalid draft, the row follows p + Q_inv (p - r),
    # r = norm(max(p - q, 0)) (the research note's law); not cut, every draft verified, it follows p
    target = MarkovLM(torch.zeros(3, 3, dtype=torch.float64), context=(0,))
    draft = MarkovLM(torch.tensor([[1.5, 2.0, -1.0]] * 3, dtype=torch.float64), context=(0,))
    group = {"grammar": [[1, -1, 2], [1, -1, 2], [1, -1, 2]]}  # token 1 never allowed
    p = torch.tensor([0.5, 0.0, 0.5], dtype=torch.float64)
    q = torch.softmax(torch.tensor([1.5, 2.0, -1.0], dtype=torch.float64), -1)
    r = (p - q).clamp_min(0) / (p - q).clamp_min(0).sum()
    derived = p + q[1] * (p - r)
    assert float((derived - p).abs().sum()) / 2 > 0.1  # the cut moves the law
    for name, law in (("grammar-draft-cut-redrawn-from-p", derived), ("grammar-drafts-not-cut", p)):
        loop = type(LOOP_MEMBERS[name].loop)(k=1)
        counts = _first_token_counts(loop, target, draft, group)
        assert counts[1] == 0  # never outside the grammar
        assert gof_test(counts, law.numpy(), alpha=1e-4, random_state=0).pvalue > 1e-4, (name, counts)


def test_unmasked_drafts_not_cut_are_exact_at_quick():
    result = check_loop(
        LOOP_MEMBERS["grammar-drafts-not-cut"].loop,
        budget="quick",
        seed=0,
        select=["loop.history[grammar]"],
        isolation="in-process",
    )
    assert [c.status for c in result.checks] == ["pass"], [(c.id, c.message) for c in result.checks]
