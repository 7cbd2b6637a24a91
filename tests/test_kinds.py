"""The Kind seam: a sampler's kind is decided once, from what it declares, and everything that
differs by kind is asked of it (its layout, battery, worker verb, record)."""

from __future__ import annotations

import ast
import pathlib
import pickle

import pytest
import torch

import specverify
from specverify import Capabilities
from specverify._calling.sut import _STEPS, SamplerUnderTest
from specverify._calling.tree import tree_sampler
from specverify._kinds import (
    ChainKind,
    ChainLayout,
    Kind,
    LogitsKind,
    LogitsLayout,
    LoopInputs,
    LoopKind,
    LoopLayout,
    TreeKind,
    TreeLayout,
    kind_of,
)
from specverify._loop import MarkovLM, generation_law
from specverify._run._plan import BATTERIES, battery_for
from specverify._warps.rules import SamplingParams
from specverify._worker.serving import SERVES
from specverify.samplers import logits_reference, loop_reference, reference

KINDS: list[Kind] = [
    ChainKind(),
    LogitsKind(("temperature", "seeds")),
    TreeKind("specinfer"),
    LoopKind(("temperature",)),
]


def test_the_kind_is_read_from_what_the_sampler_declares() -> None:
    def plain(t, d, x, g):  # noqa: ANN001, ANN202 - a sampler declaring nothing
        return None

    def tree(t, g):  # noqa: ANN001, ANN202
        return None

    assert kind_of(plain) == ChainKind() and kind_of(reference) == ChainKind()
    assert kind_of(logits_reference) == LogitsKind(logits_reference.capabilities.params)
    assert kind_of(tree_sampler(tree, algorithm="without-replacement")) == TreeKind("without-replacement")
    assert kind_of(loop_reference) == LoopKind(tuple(loop_reference.parameters))
    plain.capabilities = Capabilities(inputs="logits", params=("top_k",))  # type: ignore[attr-defined]
    assert kind_of(plain) == LogitsKind(("top_k",)) != ChainKind()


def test_a_sampler_under_test_holds_its_kind_and_is_not_read_again() -> None:
    sut = SamplerUnderTest(logits_reference)
    assert sut.kind == LogitsKind(logits_reference.capabilities.params) and kind_of(sut) is sut.kind
    assert sut.layout == LogitsLayout(logits_reference.capabilities.params) == sut.kind.layout
    loop = SamplerUnderTest(loop_reference, generation=True)
    assert kind_of(loop) is loop.kind and loop.kind.generation and loop.parameters == tuple(loop_reference.parameters)
    with pytest.raises(TypeError, match="loop kind makes no steps"):
        loop.step(torch.ones(1, 2, 2) / 2, torch.ones(1, 1, 2) / 2, torch.zeros(1, 1, dtype=torch.int64))


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_every_kind_is_served_planned_and_travels(kind: Kind) -> None:
    assert kind.verb in SERVES  # the worker has a server for its calls
    assert kind.generation or kind.verb in _STEPS  # the sampler under test makes its steps
    assert kind.battery in BATTERIES and battery_for(kind)  # its battery (a kind is its own subject)
    assert pickle.loads(pickle.dumps(kind)) == kind  # it comes back from the sampler's process
    record: dict = {}
    kind.describe(record)
    assert record == ({"algorithm": "specinfer"} if isinstance(kind, TreeKind) else {})


def test_each_kind_has_its_layout() -> None:
    assert [type(k.layout) for k in KINDS] == [ChainLayout, LogitsLayout, TreeLayout, LoopLayout]
    assert [k.seeds for k in KINDS] == [False, True, False, False]
    assert [k.contract for k in KINDS] == [None, None, "tree", "loop"]


def test_the_loop_layout_audits_codes_and_has_the_generation_law() -> None:
    target = MarkovLM(torch.randn(3, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64), context=(0,))
    inputs = LoopInputs(
        target, torch.tensor([[1], [2]]), 2, SamplingParams(temperature=torch.tensor([1.0, 0.5], dtype=torch.float64))
    )
    layout = LoopLayout()
    assert layout.audit(inputs, torch.tensor([[0, 2], [1, 1]])) == []
    (shape,) = layout.audit(inputs, torch.zeros(2, 3, dtype=torch.int64))
    assert shape.rule == "output" and "expected int64 tokens of shape (2, 2)" in shape.message
    (token,) = layout.audit(inputs, torch.tensor([[0, 2], [3, 1]]))
    assert token.row == 1 and "token id 3 is outside [0, 3)" in token.message
    assert layout.outcome(inputs, torch.tensor([[0, 2], [1, 1]])).tolist() == [2, 4]
    law = layout.law(inputs)
    assert law.shape == (2, 9) and torch.allclose(law.sum(-1), torch.ones(2, dtype=torch.float64))
    row = SamplingParams(temperature=torch.tensor([0.5], dtype=torch.float64))
    assert torch.equal(law[1], generation_law(target, torch.tensor([2]), 2, row))
    with pytest.raises(TypeError, match="no chain form"):
        layout.as_chain(loop_reference)


#: Where a kind's string may be compared: the seam, the declaration's own validation as it is made
#: (``Capabilities(inputs=...)``), and the report's rerun command, which reads a serialised run record.
ALLOWED = {"_contract.py", "report/_rerun.py"}
KIND_NAMES = {"logits", "tree", "loop"}
DECLARATIONS = {"contract", "inputs"}


def test_no_kind_is_told_by_its_declaration_outside_the_seam() -> None:
    """A comparison of a declaration with a kind's name (``sut.contract == "tree"``,
    ``getattr(s, "contract", None) != "loop"``, ``caps.inputs == "logits"``) anywhere but in
    specverify/_kinds is a kind decided twice."""
    root = pathlib.Path(specverify.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if relative.startswith("_kinds/") or relative in ALLOWED:
            continue
        found += [f"{relative}:{node.lineno}" for node in ast.walk(ast.parse(path.read_text())) if _tells_a_kind(node)]
    assert not found, found


def _tells_a_kind(node: ast.AST) -> bool:
    if not isinstance(node, ast.Compare):
        return False
    parts = list(ast.walk(node))
    names = {c.value for c in parts if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    attributes = {a.attr for a in parts if isinstance(a, ast.Attribute)}
    return bool(names & KIND_NAMES) and bool((names | attributes) & DECLARATIONS)


def test_the_check_of_kind_tests_sees_one() -> None:
    assert _tells_a_kind(ast.parse('getattr(sut, "contract", None) == "loop"').body[0].value)  # type: ignore[attr-defined]
    assert _tells_a_kind(ast.parse('caps.inputs != "logits"').body[0].value)  # type: ignore[attr-defined]
    assert not _tells_a_kind(ast.parse('args.command == "loop"').body[0].value)  # type: ignore[attr-defined]
    assert not _tells_a_kind(ast.parse('shape == "chain"').body[0].value)  # type: ignore[attr-defined]
