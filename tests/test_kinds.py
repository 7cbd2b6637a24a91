"""The Kind seam: a sampler's kind is decided once, from what it declares (or as the command that
names it says), and everything that differs by kind is asked of it (its layout, battery, worker
verb, record); outside ``specverify/_kinds`` nothing asks which kind a subject is."""

from __future__ import annotations

import ast
import pathlib
import pickle

import pytest
import torch

import specverify
from specverify import Capabilities
from specverify._budgets import get_budget
from specverify._calling.sut import _STEPS, SamplerUnderTest
from specverify._calling.tree import tree_sampler
from specverify._kinds import KINDS as KIND_CLASSES
from specverify._kinds import (
    ChainKind,
    ChainLayout,
    EngineKind,
    EngineLayout,
    Kind,
    LogitsKind,
    LogitsLayout,
    LoopInputs,
    LoopKind,
    LoopLayout,
    TreeKind,
    TreeLayout,
    kind_as_given,
    kind_named,
    kind_of,
)
from specverify._loop import MarkovLM, generation_law
from specverify._run import run_info
from specverify._run._plan import BATTERIES, battery_for
from specverify._warps.rules import SamplingParams
from specverify._worker.serving import SERVES
from specverify.errors import SamplerSpecError
from specverify.samplers import engine_reference, logits_reference, loop_reference, reference, tree_specinfer

KINDS: list[Kind] = [
    ChainKind(),
    LogitsKind(("temperature", "seeds")),
    TreeKind("specinfer"),
    LoopKind(("temperature",)),
    EngineKind(("temperature", "top_k"), 5, 64),
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
    loop = SamplerUnderTest(loop_reference, kind="loop")
    assert kind_of(loop) is loop.kind == LoopKind(tuple(loop_reference.parameters))
    assert loop.parameters == tuple(loop_reference.parameters) and loop.limit.timeout == LoopKind.call_timeout
    with pytest.raises(TypeError, match="loop kind makes no steps"):
        loop.step(torch.ones(1, 2, 2) / 2, torch.ones(1, 1, 2) / 2, torch.zeros(1, 1, dtype=torch.int64))


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_every_kind_is_served_planned_and_travels(kind: Kind) -> None:
    assert kind.verb in SERVES  # the worker has a server for its calls
    assert (kind.verb in _STEPS) == kind.steps == kind.units_in_worker  # a loop or engine is called as itself
    assert kind.battery in BATTERIES and battery_for(kind)  # its battery (a kind is its own subject)
    assert pickle.loads(pickle.dumps(kind)) == kind  # it comes back from the sampler's process
    assert type(kind) in KIND_CLASSES and kind_named(kind.name) is type(kind)


@pytest.mark.parametrize(
    "sampler",
    [reference, logits_reference, tree_specinfer, loop_reference, engine_reference],
    ids=["reference", "logits_reference", "tree_specinfer", "loop_reference", "engine_reference"],
)
def test_each_kind_describes_its_subject(sampler) -> None:  # noqa: ANN001
    subject = SamplerUnderTest(sampler)
    record = run_info(subject, get_budget("quick"), 0, None).to_json()
    kind = subject.kind
    assert record.get("contract") == kind.contract
    assert ("algorithm" in record["sampler"]) == (kind.contract == "tree")
    called_as_itself = kind.name in ("loop", "engine")
    assert ("parameters" in record["sampler"]) == ("capabilities" not in record["sampler"]) == called_as_itself
    assert ("reach" in record) == (kind.name == "loop")  # the loop battery states its reach itself


def test_a_kind_named_is_decided_once() -> None:
    def plain(t, d, x, g):  # noqa: ANN001, ANN202 - declares nothing
        return None

    plain.parameters = ("temperature", "top_k")  # type: ignore[attr-defined]
    assert kind_as_given(plain, "loop") == LoopKind(("temperature", "top_k"))  # a callable given as a loop is one
    assert kind_as_given(plain, None) == ChainKind()
    assert kind_as_given(loop_reference, "loop") == kind_of(loop_reference)
    with pytest.raises(SamplerSpecError, match="is not a generation loop"):
        kind_as_given(reference, "loop", spec="specverify.samplers:reference")  # a spec must declare it
    with pytest.raises(ValueError, match="kind must be one of"):
        kind_named("chainsaw")
    taken = SamplerUnderTest(plain, kind="loop")
    assert taken.kind == LoopKind(("temperature", "top_k")) and SamplerUnderTest(plain).kind == ChainKind()


def test_each_kind_has_its_layout() -> None:
    assert [type(k.layout) for k in KINDS] == [ChainLayout, LogitsLayout, TreeLayout, LoopLayout, EngineLayout]
    assert [k.seeds for k in KINDS] == [False, True, False, False, False]
    assert [k.contract for k in KINDS] == [None, None, "tree", "loop", "engine"]


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


#: Where a kind's string may be compared: the declaration's own validation as it is made
#: (``Capabilities(inputs=...)``), and the report's rerun command, which reads a serialised run record.
ALLOWED = {"_contract.py", "report/_rerun.py"}
#: The names of the kinds that say nothing else in the package ("chain" is also a tree's, a case's
#: and a model's shape: it counts where a kind's own name is compared, ``kind.name == "chain"``).
KIND_NAMES = {kind.name for kind in KIND_CLASSES} - {"chain"}
#: Attributes that tell a kind apart, compared where they belong to a kind.
KIND_ATTRIBUTES = {"name", "declared", "battery", "verb", "contract"}
#: Attributes of what a sampler declares its kind by.
DECLARATIONS = {"contract", "inputs"}
#: What evaluates to a kind: calls that return one.
KIND_CALLS = {"kind_of", "subject_kind", "kind_as_given", "kind_named"}


def _kind_classes() -> set[str]:
    found, todo = set(), [Kind]
    while todo:
        cls = todo.pop()
        found.add(cls.__name__)
        todo += cls.__subclasses__()
    return found


KIND_CLASS_NAMES = _kind_classes()


def _is_kind(node: ast.AST) -> bool:
    """Whether an expression is a kind or a kind class: ``kind``, ``sut.kind``, ``kind_of(s)``, ``LoopKind``."""
    if isinstance(node, ast.Name):
        return node.id == "kind" or node.id.endswith("_kind") or node.id in KIND_CLASS_NAMES
    if isinstance(node, ast.Attribute):
        return node.attr == "kind" or node.attr.endswith("_kind")
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        return name in KIND_CALLS
    return False


def _strings(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


def _declares(operands: list[ast.expr]) -> bool:
    """Whether an operand reads a declaration: ``s.contract``, ``getattr(s, "contract", None)``."""
    parts = [a for o in operands for a in ast.walk(o)]
    return any(isinstance(a, ast.Attribute) and a.attr in DECLARATIONS for a in parts) or any(
        isinstance(a, ast.Constant) and a.value in DECLARATIONS for a in parts
    )


def kind_tests(source: str) -> list[tuple[int, str]]:
    """Every place ``source`` asks which kind something is: an ``isinstance``/``issubclass`` test or a
    ``match`` pattern of a Kind class, a ``type(x) is SomeKind``, any ``.generation``, a kind's
    identifying attribute compared (``kind.name == ...``, ``LoopKind.name``), or a kind's name
    compared with a kind or a declaration (``kind == "loop"``, ``sut.contract != "tree"``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        why = None
        if isinstance(node, ast.Attribute) and node.attr == "generation":
            why = "a .generation flag"
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("isinstance", "issubclass")
        ):
            if len(node.args) == 2 and any(
                isinstance(n, ast.Name) and n.id in KIND_CLASS_NAMES for n in ast.walk(node.args[1])
            ):
                why = f"{node.func.id} of a Kind class"
        elif isinstance(node, ast.MatchClass) and isinstance(node.cls, ast.Name) and node.cls.id in KIND_CLASS_NAMES:
            why = "a match on a Kind class"
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            names = set().union(*(_strings(o) for o in operands))
            if any(isinstance(o, ast.Name) and o.id in KIND_CLASS_NAMES for o in operands):
                why = "a comparison with a Kind class"
            elif any(
                isinstance(o, ast.Attribute) and o.attr in KIND_ATTRIBUTES and _is_kind(o.value) for o in operands
            ):
                why = "a comparison of what tells a kind apart"
            elif names & KIND_NAMES and any(_is_kind(o) for o in operands):
                why = "a kind compared with a kind's name"
            elif names & KIND_NAMES and _declares(operands):
                why = "a declaration compared with a kind's name"
            elif names & KIND_NAMES and any(isinstance(o, ast.Attribute) and o.attr == "name" for o in operands):
                why = "a name compared with a kind's name"
        if why is not None:
            found.append((getattr(node, "lineno", 0), why))
    return found


def test_no_kind_is_told_apart_outside_the_seam() -> None:
    """Outside specverify/_kinds nothing asks which kind a subject is: what differs by kind is asked
    of the kind (its battery, calls, verb, record, plan), so adding a kind touches one module there."""
    root = pathlib.Path(specverify.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if relative.startswith("_kinds/"):
            continue
        for line, why in kind_tests(path.read_text()):
            if relative not in ALLOWED or "declaration" not in why:
                found.append(f"specverify/{relative}:{line}: {why}")
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    "planted",
    [
        "if isinstance(sut.kind, LoopKind):\n    pass",
        "ok = isinstance(kind_of(s), (ChainKind, TreeKind))",
        "ok = issubclass(type(k), Kind)",
        "ok = type(subject.kind) is TreeKind",
        "loop = subject.kind.generation",
        "if kind_of(s).generation and x:\n    pass",
        "ok = kind == LoopKind.name",
        "ok = subject.kind.name == 'loop'",
        "ok = kind_of(sampler).name != 'logits'",
        "ok = sut.kind.name in ('chain', 'logits')",
        "ok = kind == 'loop'",
        "ok = subject_kind(sut).battery == 'trees'",
        "ok = sut.kind.verb == 'generate'",
        "ok = getattr(sut, 'contract', None) == 'loop'",
        "ok = caps.inputs != 'logits'",
        "ok = self.name == 'tree'",
        "match kind:\n    case TreeKind():\n        pass",
    ],
)
def test_the_seam_check_sees_a_planted_kind_test(planted: str) -> None:
    assert kind_tests(planted), planted


@pytest.mark.parametrize(
    "innocent",
    [
        "ok = args.command == 'loop'",  # the command that names the kind
        "ok = shape == 'chain'",  # a tree's shape
        "ok = kind in ('zeros', 'disjoint')",  # a case's kind
        "ok = kind.runs('trees')",  # asked of the kind
        "x = generation_law(t, p, n, params)",
        "ok = sut.kind.seeds",
    ],
)
def test_the_seam_check_lets_the_rest_be(innocent: str) -> None:
    assert not kind_tests(innocent), innocent
