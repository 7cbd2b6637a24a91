"""The step layouts: chosen from declarations, each auditing its own outputs, coding outcomes in the
order of the exact laws, and the tree layout's chain form agreeing with the chain sampler."""

from __future__ import annotations

import itertools

import pytest
import torch

import specverify
from specverify._calling.sut import SamplerUnderTest
from specverify._calling.tree import tree_sampler
from specverify._kinds import ChainLayout, LogitsLayout, TreeLayout, layout_of
from specverify._kinds.logits_posing import PosedSampler
from specverify._laws.exact import sequence_of, sequence_offsets
from specverify._layout import StepInputs
from specverify._trees.contract import TreeBatch, chain_output
from specverify.samplers import TREE_REFERENCES, logits_reference, reference

SPECINFER = TREE_REFERENCES["specinfer"]


def chain_inputs(batch: int = 8, k: int = 2, vocab: int = 4, seed: int = 0) -> StepInputs:
    g = torch.Generator().manual_seed(seed)
    target = torch.rand(batch, k + 1, vocab, generator=g, dtype=torch.float64) + 0.05
    target[:, :, -1] = 0.0  # the last token has target probability 0 everywhere
    draft = torch.rand(batch, k, vocab, generator=g, dtype=torch.float64) + 0.05
    drafts = torch.randint(0, vocab - 1, (batch, k), generator=g)
    return StepInputs(target / target.sum(-1, keepdim=True), draft / draft.sum(-1, keepdim=True), drafts)


def a_tree(batch: int = 8, vocab: int = 4) -> TreeBatch:
    """A star of two children under the root, the second with a child; the last token impossible."""
    g = torch.Generator().manual_seed(1)
    parents = torch.tensor([-1, 0, 0, 2]).expand(batch, 4).clone()
    tokens = torch.cat([torch.full((batch, 1), -1), torch.randint(0, vocab - 1, (batch, 3), generator=g)], dim=1)
    target = torch.rand(batch, 4, vocab, generator=g, dtype=torch.float64) + 0.05
    target[:, :, -1] = 0.0
    draft = torch.rand(batch, 4, vocab, generator=g, dtype=torch.float64) + 0.05
    return TreeBatch(parents, tokens, target, draft)


# --- choosing a layout -------------------------------------------------------------------------


def test_layout_of_reads_the_declared_contract_and_inputs() -> None:
    def plain(t, d, y, g):  # type: ignore[no-untyped-def]
        return reference(t, d, y, g)

    logits = specverify.sampler(lambda z, d, y, g, params: None, inputs="logits", params=("temperature", "top_k"))
    tree = tree_sampler(lambda tree, g: None, algorithm="without-replacement")
    assert layout_of(plain) == ChainLayout() and layout_of(reference) == ChainLayout()
    assert layout_of(logits) == LogitsLayout(("temperature", "top_k"))
    assert layout_of(logits) != LogitsLayout(("temperature",)) != ChainLayout()
    assert layout_of(tree) == TreeLayout("without-replacement")
    assert layout_of(tree_sampler(lambda tree, g: None)) == TreeLayout(None)
    assert [type(layout_of(s)).name for s in (plain, logits, tree)] == ["chain", "logits", "tree"]


def test_posing_is_done_once_and_only_where_the_inputs_differ() -> None:
    posed = layout_of(logits_reference).posed(logits_reference)
    assert isinstance(posed, PosedSampler) and posed.parameters == logits_reference.capabilities.params
    assert layout_of(posed) == layout_of(logits_reference) and layout_of(posed).posed(posed) is posed
    assert ChainLayout().posed(reference) is reference
    assert TreeLayout("specinfer").posed(SPECINFER) is SPECINFER  # called on trees, as it is


def test_samplers_under_test_carry_their_layout() -> None:
    assert SamplerUnderTest(reference).layout == ChainLayout()
    logits = SamplerUnderTest(logits_reference)
    assert logits.layout == LogitsLayout(logits_reference.capabilities.params) and isinstance(
        logits.sampler, PosedSampler
    )
    assert SamplerUnderTest(SPECINFER).layout == TreeLayout("specinfer")


# --- the audit ---------------------------------------------------------------------------------


def _chain_outputs(layout: ChainLayout, inputs: StepInputs) -> tuple[torch.Tensor, torch.Tensor]:
    sampler = layout.posed(logits_reference) if isinstance(layout, LogitsLayout) else reference
    return sampler(*inputs, torch.Generator().manual_seed(3))


@pytest.mark.parametrize(
    "layout", [ChainLayout(), LogitsLayout(("temperature", "top_k", "top_p", "min_p"))], ids=["chain", "logits"]
)
def test_a_chain_layout_passes_a_correct_output_and_flags_each_malformed_one(layout: ChainLayout) -> None:
    inputs = chain_inputs()
    tokens, accepted = _chain_outputs(layout, inputs)
    assert layout.audit(inputs, (tokens, accepted)) == []
    assert layout.structure(inputs, (tokens, accepted)) == []
    first = torch.full_like(tokens, -1)  # rows that emit one token: which one is set below
    rules = {
        "shape": (tokens[:, :2], accepted),
        "range": (first.index_fill(1, torch.tensor([0]), 9), torch.zeros_like(accepted)),
        "zero": (first.index_fill(1, torch.tensor([0]), 3), torch.zeros_like(accepted)),
    }
    found = {name: layout.audit(inputs, output, first_only=True) for name, output in rules.items()}
    assert [v.rule for v in found["shape"]] == ["shape-dtype"] and layout.structure(inputs, rules["shape"])
    assert [v.rule for v in found["range"]] == ["token-range"]
    assert [(v.rule, v.finding, v.row) for v in found["zero"]] == [("zero-target", "support", 0)]


def test_the_tree_layout_passes_a_correct_output_and_flags_each_malformed_one() -> None:
    layout, tree = TreeLayout("specinfer"), a_tree()
    path, token = SPECINFER(tree, torch.Generator().manual_seed(3))
    assert layout.audit(tree, (path, token)) == []
    assert [v.rule for v in layout.audit(tree, (path[:, :1], token))] == ["shape-dtype"]
    assert [v.rule for v in layout.audit(tree, (path, torch.full_like(token, 9)))] == ["token-range"]
    zero = layout.audit(tree, (path, torch.full_like(token, 3)), first_only=True)
    assert [(v.rule, v.finding) for v in zero] == [("zero-target", "support")]
    on_meta = layout.audit(tree, (path.to("meta"), token))  # every layout's pair check: a tensor left elsewhere
    assert [(v.rule, v.message) for v in on_meta] == [("device", "path is on meta, the inputs were on another device")]


# --- outcome coding and the exact law -----------------------------------------------------------


def test_the_chain_coding_is_the_enumeration_order_of_sequence_of() -> None:
    vocab, k = 3, 2
    sequences = [s for n in range(1, k + 2) for s in itertools.product(range(vocab), repeat=n)]
    tokens = torch.tensor([list(s) + [-1] * (k + 1 - len(s)) for s in sequences])
    accepted = torch.tensor([len(s) - 1 for s in sequences])
    inputs = StepInputs(
        torch.ones(len(sequences), k + 1, vocab), torch.ones(len(sequences), k, vocab), tokens[:, :k].clamp_min(0)
    )
    codes = ChainLayout().sequence(inputs, (tokens, accepted))
    assert codes.tolist() == list(range(sequence_offsets(vocab, k)[-1]))
    assert [sequence_of(int(c), vocab, k) for c in codes] == sequences


def _frequencies(codes: torch.Tensor, rows: int, cells: int) -> torch.Tensor:
    return torch.bincount(codes, minlength=cells).to(torch.float64) / rows


def test_outcomes_index_the_exact_law_chain_and_tree() -> None:
    rows = 40_000
    chain = chain_inputs(batch=1, k=2, vocab=4)
    many = StepInputs(*(x.expand(rows, *x.shape[1:]) for x in chain))
    law = ChainLayout().law(chain).reshape(-1)
    codes = ChainLayout().outcome(many, reference(*many, torch.Generator().manual_seed(5)))
    assert float(law[codes].min()) > 0  # no outcome of exact probability 0
    assert float((_frequencies(codes, rows, law.numel()) - law).abs().sum() / 2) < 0.02
    tree = a_tree(batch=1)
    wide = TreeBatch(
        *(x.expand(rows, *x.shape[1:]) for x in (tree.parents, tree.tokens, tree.target_probs, tree.draft_probs))
    )
    layout = TreeLayout("specinfer")
    tree_law = layout.law(tree).reshape(-1)
    tree_codes = layout.outcome(wide, SPECINFER(wide, torch.Generator().manual_seed(5)))
    assert float(tree_law[tree_codes].min()) > 0
    assert float((_frequencies(tree_codes, rows, tree_law.numel()) - tree_law).abs().sum() / 2) < 0.02
    with pytest.raises(ValueError, match="no exact law"):
        TreeLayout(None).law(tree)


# --- the tree layout's chain form ---------------------------------------------------------------


def test_the_chain_form_of_a_tree_sampler_on_a_chain_is_the_chain_sampler() -> None:
    inputs = chain_inputs(batch=256, k=3, vocab=5, seed=4)
    tree_layout, chain_layout = TreeLayout("specinfer"), ChainLayout()
    chained = tree_layout.as_chain(SPECINFER)
    u = torch.rand(256, 4, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    got, want = chained(*inputs, uniforms=u), reference(*inputs, torch.Generator(), uniforms=u)
    assert all(torch.equal(a, b) for a, b in zip(got, want))  # SpecInfer on a path tree is canonical
    # on the same generator, the chain form's output is the tree sampler's on the path tree, coded alike
    tree = TreeBatch.from_chain(*inputs)
    on_tree = SPECINFER(tree, torch.Generator().manual_seed(11))
    on_chain = chained(*inputs, torch.Generator().manual_seed(11))
    assert all(torch.equal(a, b) for a, b in zip(chain_output(tree, *on_tree), on_chain))
    assert chain_layout.audit(inputs, on_chain) == [] and tree_layout.audit(tree, on_tree) == []
    assert torch.equal(tree_layout.sequence(tree, on_tree), chain_layout.sequence(inputs, on_chain))
    assert torch.equal(tree_layout.outcome(tree, on_tree), chain_layout.outcome(inputs, on_chain))
    assert torch.allclose(tree_layout.law(tree), chain_layout.law(inputs), rtol=0, atol=1e-12)
