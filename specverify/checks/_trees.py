"""The ``trees`` family: a tree sampler (:mod:`specverify.trees`) against the target's law, its
declared algorithm's law and its algorithm's acceptance.

* ``trees.output[shapes]`` (exact): every tree shape the family knows (chains, stars, a binary tree,
  36 and 64 siblings, 64 candidates, duplicate siblings, zero-mass children), every output audited
  (path from the root along edges, real nodes, tokens in range, no token of target probability 0);
* ``trees.output[generated]`` (exact): the same audit on trees the Hypothesis tree strategies
  generate (every shape, sibling kind, zero-mass children, pair kinds of laws), a failure shrunk to
  the smallest tree that shows it; the search's seed derives from the run's;
* ``trees.support[zero-coins]`` (exact): children of target probability 0, every coin exactly 0
  (``uniforms``-declaring samplers) and coins from the generator: a coin of 0 accepting a zero-mass
  child (SGLang #35771) is a ``support`` finding;
* ``trees.conditional[kind]``: the law of (last accepted node, emitted token) given the candidates
  (random chains, stars, binary trees, 36 siblings, duplicates, zero-mass children, and a chain
  whose block-verification weight shapes the residual; ``V=<n>``: production vocabularies, active
  tokens and a lumped tail) against the declared algorithm's exact law (``specverify.trees.tree_law``), a G-test;
  failure ``non-canonical`` (not the algorithm it declares).  Skipped for a sampler declaring none;
* ``trees.target-law[kind]`` and ``trees.acceptance[kind]`` (:mod:`specverify.checks._tree_target`):
  candidates drawn by the harness from a model as the algorithm assumes, the completed emitted
  tokens against the target's joint law (failure ``loss``) and, on the same rows, accepted
  candidates per call against the declared algorithm's exact expectation (failure ``suboptimal``);

* ``trees.robustness[duplicates|draft-zero]`` (a without-replacement sampler only): trees its
  drafter cannot produce (duplicate siblings; a child of draft probability 0), which its law checks
  never pose; every output audited (it can fail the contract), the law compared as information.

Every statistical result states its level (``alpha``) and power (``min_detectable_tv`` or the
smallest detectable drop of the mean).  A law decision also watches an anytime-valid test, so a
failing sampler's draw stops as soon as it rejects (:mod:`specverify.checks._tree_tally`).  Shapes whose inputs are
large (36 siblings, production vocabularies) get the rows :attr:`~specverify.Budget.shape_volume` affords and are held
to :attr:`~specverify.Budget.shape_ceiling_tv`, as the ``shapes`` family is; the others to
:attr:`~specverify.Budget.ceiling_tv`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from .._kinds import kind_of
from .._record.evidence import Evidence
from .._record.result import CheckResult
from .._trees.contract import last_nodes
from ..errors import SamplerFault
from ..stats import gof_test
from ._base import Check, Context, check_id, fault_result
from ._batteries import TREES
from ._tally import largest_deviation
from ._tree_cases import (
    AUDIT_ONLY,
    CONDITIONAL_KINDS,
    PRODUCTION_PARENTS,
    ROBUSTNESS_KINDS,
    TREE_SHAPES,
    WITHOUT_REPLACEMENT,
    TreeShape,
    case_fingerprint,
    case_json,
    outside_drafting,
    production_actives,
    production_tree,
)
from ._tree_cases import BLOCK as _BLOCK
from ._tree_posing import NOT_POSED, Posed, fixed_posed, fixed_within, generated_within
from ._tree_tally import DECLARED_LAW, LawDecision, detects, expand, law_result, planned_rows, sut_of, tally

__all__ = [
    "TreeCheck",
    "TreeConditionalCheck",
    "TreeGeneratedOutputCheck",
    "TreeOutputCheck",
    "TreeRobustnessCheck",
    "TreeSupportCheck",
]


def _applies(kind_shape: str, algorithm: str | None) -> str | None:
    if algorithm == _BLOCK and kind_shape != "chain":
        return "block verification is defined on chains only"
    return None


# --- the checks -------------------------------------------------------------------------------


@dataclasses.dataclass
class TreeCheck(Check):
    """What every check of the family shares: its id, its skip reasons and its result."""

    case: str | None = None
    name: str = ""
    family: str = "trees"
    statistical: bool = True
    proves: str | None = None
    needs_algorithm: bool = False

    @property
    def id(self) -> str:
        return check_id(self.family, self.name, self.case)

    def skip_reason(self, sut: Any) -> str | None:
        reason = self.unfit(sut)
        if reason:
            return reason
        posed, left = self.posed(sut.algorithm), self.not_posed(sut)
        if posed and len(left) == len(posed):  # nothing left to pose: a skip that says why, never a pass
            return f"{NOT_POSED}: " + "; ".join(left)
        return None

    def unfit(self, sut: Any) -> str | None:
        """Why the check cannot run on the sampler, its declared tree limits aside."""
        if not kind_of(sut).runs(TREES):
            return "a check of tree samplers (the sampler does not declare contract='tree')"
        if self.needs_algorithm and sut.algorithm is None:
            return (
                "the sampler declares no algorithm: its law given the candidates has no reference (judged on the "
                "target's law and acceptance)"
            )
        shape = self.shape_name()
        if shape is not None:
            reason = _applies(shape, sut.algorithm)
            if reason:
                return reason
            vocab = TREE_SHAPES[shape].vocab if shape in TREE_SHAPES else None
            if vocab is not None:
                return sut.unsupported(vocab)
        return None

    def shape_name(self) -> str | None:
        return None

    def posed(self, algorithm: str | None) -> list[Posed]:
        """The trees the check poses, as ``(what, parents, V, distinct)`` (``distinct``: siblings
        drawn without replacement from the draft), before the sampler's declared limits."""
        return []

    def not_posed(self, sut: Any) -> list[str]:
        if self.unfit(sut) or not sut.tree_limits.declared:
            return []
        limits = sut.tree_limits
        return [
            f"{what}: {why}"
            for what, parents, vocab, distinct in self.posed(sut.algorithm)
            if (why := limits.shape_reason(parents, vocab, distinct=distinct))
        ]

    def result(self, status: str, message: str, **fields: Any) -> CheckResult:
        return CheckResult(id=self.id, family=self.family, case=self.case, status=status, message=message, **fields)


@dataclasses.dataclass
class TreeOutputCheck(TreeCheck):
    """Every output on every shape is valid (exact)."""

    case: str | None = "shapes"
    name: str = "output"
    statistical: bool = False
    proves: str | None = "contract"

    @staticmethod
    def kinds(algorithm: str | None) -> list[str]:
        return [
            k
            for k in (*CONDITIONAL_KINDS, *AUDIT_ONLY)
            if _applies(CONDITIONAL_KINDS.get(k, "wide"), algorithm) is None
        ]

    def posed(self, algorithm: str | None) -> list[Posed]:
        return [fixed_posed(kind, algorithm) for kind in self.kinds(algorithm)]

    def run(self, ctx: Context) -> CheckResult:
        sut = sut_of(ctx)
        limits = sut.tree_limits
        rows = 64
        audited, left = [], []
        try:
            for kind in self.kinds(sut.algorithm):
                what, parents, vocab, _ = fixed_posed(kind, sut.algorithm)
                why = limits.shape_reason(parents) or sut.unsupported(vocab)
                if why:
                    left.append(f"{what}: {why}")
                    continue
                tree = fixed_within(sut, kind, ctx.seed_for(self.id, kind))
                path, _ = sut.step(
                    sut.passed(expand(tree, rows)), generator=sut.generator(ctx.seed_for(self.id, kind, "g"))
                )
                audited.append(f"{kind} ({tree.width - 1} candidates, V={tree.vocab})")
                ctx.advance(rows)
        except SamplerFault as fault:
            return fault_result(self, fault, evidence={"tree": kind, "tree_case": case_json(tree, fault=fault)})
        message = f"{rows * len(audited)} outputs valid on {len(audited)} trees: " + ", ".join(audited)
        return self.result(
            "pass",
            message + (f"; {NOT_POSED}: " + "; ".join(left) if left else ""),
            samples=rows * len(audited),
            evidence={"not_posed": left} if left else {},
        )


@dataclasses.dataclass
class TreeSupportCheck(TreeCheck):
    """Children of target probability 0 are never accepted, a coin of exactly 0 included (exact)."""

    case: str | None = "zero-coins"
    name: str = "support"
    statistical: bool = False
    proves: str | None = "support"

    def posed(self, algorithm: str | None) -> list[Posed]:
        return [fixed_posed("zeros", algorithm)]

    def run(self, ctx: Context) -> CheckResult:
        sut = sut_of(ctx)
        kind = "zeros"
        tree = fixed_within(sut, kind, ctx.seed_for(self.id))
        rows = 512
        batch = sut.passed(expand(tree, rows))
        done = []
        try:
            if sut.capabilities.uniforms:
                zeros = torch.zeros(batch.parents.shape, dtype=torch.float64)
                sut.step(batch, uniforms=zeros)
                done.append(f"{rows} rows with every coin exactly 0")
            sut.step(batch, generator=sut.generator(ctx.seed_for(self.id, "g")))
            done.append(f"{rows} rows with the sampler's own coins")
            ctx.advance(rows * len(done))
        except SamplerFault as fault:
            return fault_result(
                self,
                fault,
                evidence={
                    "tree_case": case_json(tree, fault=fault),
                    "coins": "all 0" if not done and sut.capabilities.uniforms else "generator",
                },
            )
        note = "" if sut.capabilities.uniforms else " (the sampler declares no uniforms: coins of exactly 0 not posed)"
        return self.result(
            "pass",
            "no child of target probability 0 accepted, no such token emitted: " + "; ".join(done) + note,
            samples=rows * len(done),
        )


#: Rows each generated tree is expanded to (every output audited), and its largest tree.
GENERATED_ROWS = 32
GENERATED_MAX_NODES = 16


@dataclasses.dataclass
class TreeGeneratedOutputCheck(TreeCheck):
    """Every output valid on trees Hypothesis generates (exact); a failure shrinks to a small tree.

    Trees of every shape of the tree strategies (chains only for block verification), up to
    :data:`GENERATED_MAX_NODES` nodes, any siblings (duplicates included), children of target or
    draft probability 0, laws of every pair kind; each expanded to :data:`GENERATED_ROWS` rows and
    called with the sampler's generator (seeded from the case) and, for a ``uniforms``-declaring
    sampler, with every coin exactly 0.  The search is seeded from the run (``derive_seed``).
    """

    case: str | None = "generated"
    name: str = "output"
    statistical: bool = False
    proves: str | None = "contract"

    def run(self, ctx: Context) -> CheckResult:
        from ..strategies._internal.trees import MAX_SIBLINGS, tree_cases
        from ._search import Outcome, search_and_confirm

        sut = sut_of(ctx)
        zero_coins = bool(sut.capabilities.uniforms)
        limits = sut.tree_limits
        strategy = tree_cases(
            shape="chain" if sut.algorithm == _BLOCK else "mixed",
            kind="mixed",
            max_nodes=min(GENERATED_MAX_NODES, limits.max_nodes or GENERATED_MAX_NODES),
            max_siblings=min(MAX_SIBLINGS, limits.max_children or MAX_SIBLINGS),
        )
        if limits.declared:  # else the very strategy as before: the same trees, the same shrinking
            strategy = strategy.map(lambda case: generated_within(case, limits))

        def evaluate(case: Any, seed: int, alpha: float, stage: str) -> Outcome:
            if sut.unsupported(case.tree.vocab):
                return Outcome(pvalues={}, samples=0, min_detectable_tv={})
            tree = sut.passed(expand(case.tree, GENERATED_ROWS))
            sut.step(tree, generator=sut.generator(seed))
            if zero_coins:
                sut.step(tree, uniforms=torch.zeros(tree.parents.shape, dtype=torch.float64))
            ctx.advance(GENERATED_ROWS * (1 + zero_coins))
            return Outcome(pvalues={}, samples=GENERATED_ROWS * (1 + zero_coins), min_detectable_tv={})

        search = search_and_confirm(
            ctx, self.id, strategy, evaluate, case_fingerprint, examples=ctx.budget.validity_examples, statistical=False
        )
        samples = sum(o.samples for o in search.screens)
        if search.confirmed is not None:
            case, outcome = search.confirmed
            assert outcome.fault is not None
            sut.last_fault = outcome.fault  # the smallest case's fault, not the shrinker's last
            evidence: Evidence = {
                "tree": f"generated {case.shape} tree",
                "tree_case": case_json(case.tree, fault=outcome.fault),
                "cases_screened": search.examples,
            }
            return fault_result(self, outcome.fault, evidence=evidence)
        coins = " and with every coin exactly 0" if zero_coins else ""
        cut = self.not_posed(sut)
        return self.result(
            "pass",
            f"{samples} outputs valid on {search.examples} generated trees (up to {GENERATED_MAX_NODES} nodes, every "
            f"shape and sibling kind), called with the sampler's coins{coins}" + (f"; {cut[0]}" if cut else ""),
            samples=samples,
            evidence=Evidence(not_posed=cut) if cut else Evidence(),
        )

    def not_posed(self, sut: Any) -> list[str]:
        if self.unfit(sut) or not sut.tree_limits.declared:
            return []
        limits = sut.tree_limits
        if limits.max_children is None and limits.max_depth is None and limits.max_nodes is None:
            return []  # reserved ids only: every generated tree is posed, its reserved candidates renamed
        return [
            f"generated trees cut to the declared limits ({limits.describe(shape_only=True)}): nodes past them not "
            "posed"
        ]


@dataclasses.dataclass
class TreeConditionalCheck(TreeCheck):
    """The law of (last node, token) given the candidates against the declared algorithm's."""

    name: str = "conditional"
    proves: str | None = "non-canonical"
    needs_algorithm: bool = True

    def shape_name(self) -> str | None:
        return CONDITIONAL_KINDS.get(self.case or "")

    def posed(self, algorithm: str | None) -> list[Posed]:
        if self.case in CONDITIONAL_KINDS:
            return [fixed_posed(self.case or "", algorithm)]
        return [(f"the tree at {self.case} (3 candidates)", PRODUCTION_PARENTS, int((self.case or "V=0")[2:]), False)]

    def unfit(self, sut: Any) -> str | None:
        reason = super().unfit(sut)
        if not reason and self.case in ROBUSTNESS_KINDS and sut.algorithm == WITHOUT_REPLACEMENT:
            return (
                f"{ROBUSTNESS_KINDS[self.case]}: a without-replacement drafter cannot produce them, so no law is "
                f"judged there (trees.robustness[{self.case}] poses them, for the contract)"
            )
        if reason or self.case in CONDITIONAL_KINDS:
            return reason
        if sut.algorithm == _BLOCK:
            return "block verification is defined on chains only"
        return sut.unsupported(int((self.case or "V=0")[2:]))

    def run(self, ctx: Context) -> CheckResult:
        sut = sut_of(ctx)
        algorithm = sut.algorithm
        assert algorithm is not None  # needs_algorithm: skip_reason lets no sampler declaring none run
        if self.case in CONDITIONAL_KINDS:
            shape = TREE_SHAPES[CONDITIONAL_KINDS[self.case or ""]]
            for attempt in range(20):  # a draw whose law is nearly a point mass tests little: the next seed
                tree = sut.passed(fixed_within(sut, self.case or "", ctx.seed_for(self.id, "tree", attempt)))
                full = sut.layout.law(tree)[0]  # the declared algorithm's law
                if (full > 1e-3).sum() >= 4 or self.case == "weighted-residual":  # that one is fixed by design
                    break
            classes = torch.arange(tree.vocab)
            label = lambda c: f"token {c}"  # noqa: E731
        else:
            vocab = int((self.case or "V=0")[2:])
            if vocab > ctx.budget.shape_max_vocab:
                return self.result(
                    "skip",
                    f"V={vocab:,} is above the {ctx.budget.name} budget's "
                    f"shape_max_vocab={ctx.budget.shape_max_vocab:,}",
                )
            shape = TreeShape(PRODUCTION_PARENTS, vocab, large=True)
            tree = sut.passed(production_tree(vocab, ctx.seed_for(self.id, "tree"), sut.tree_limits))
            full = sut.layout.law(tree)[0]
            actives = production_actives(vocab, sut.tree_limits)
            classes = torch.full((vocab,), actives.numel(), dtype=torch.int64)
            classes[actives] = torch.arange(actives.numel())
            label = lambda c: f"token {int(actives[c])}" if c < actives.numel() else "the tail (every other token)"  # noqa: E731
        columns = int(classes.max()) + 1
        law = torch.zeros(tree.width, columns, dtype=torch.float64).index_add_(1, classes, full).reshape(-1).numpy()
        df = int((law > 0).sum()) - 1
        decision = LawDecision(law, ctx.alpha, ctx.budget.shape_tv if shape.large else ctx.budget.tv)
        rows = decision.planned = planned_rows(
            ctx, df, decision.fixed_alpha, large=shape.large, row_elements=2 * tree.width * tree.vocab
        )
        try:
            counts, _ = tally(
                ctx,
                lambda count, g: expand(tree, count),
                rows,
                ctx.seed_for(self.id, "run"),
                tree.width * tree.vocab,
                law.size,
                lambda _, path, token: last_nodes(path) * columns + classes[token],
                sequential=decision,
            )
        except SamplerFault as fault:
            return fault_result(self, fault, evidence={"tree_case": case_json(tree, fault=fault)})
        rows = int(counts.sum())
        test, pvalue, claim, expected, where = decision.gof(
            self.id, ctx, counts, lambda c: f"(node {c // columns}, {label(c % columns)})"
        )
        evidence: Evidence = {
            "algorithm": algorithm,
            "test": test.method,
            "df": test.df,
            "statistic": test.statistic,
            "power": ctx.budget.power,
            "observed": counts.tolist(),
            "expected": expected.tolist(),
            "where": where,
            "lumped": columns < tree.vocab,
            "tree_case": case_json(tree, counts=counts, expected=expected, columns=columns),
            **decision.record(rows),
        }
        summary = (
            f"{rows} calls on a tree of {tree.width - 1} candidates (V={tree.vocab}) against {algorithm!r}'s exact "
            f"law; {detects(test, claim, ctx.budget.power, DECLARED_LAW)}"
        )
        return law_result(
            self,
            ctx,
            test,
            pvalue,
            claim,
            rows,
            evidence,
            summary,
            f"not the law of {algorithm!r} given the candidates: {where}",
            "non-canonical",
            shape.large,
        )


#: The level at which the robustness check reports a law difference (information: it decides nothing).
INFORMATION_ALPHA = 1e-3


@dataclasses.dataclass
class TreeRobustnessCheck(TreeCheck):
    """Trees the declared drafting cannot produce (without replacement: duplicate siblings, a child
    of draft probability 0), every output audited: it can fail the contract, never the law.  The
    law given the candidates is compared with the declared algorithm's as information only."""

    name: str = "robustness"
    statistical: bool = False
    proves: str | None = "contract"

    def unfit(self, sut: Any) -> str | None:
        reason = super().unfit(sut)
        if not reason and sut.algorithm != WITHOUT_REPLACEMENT:
            return (
                "the sampler's declared drafting produces every tree the law checks pose (only without-replacement "
                "drafting excludes some)"
            )
        return reason

    def posed(self, algorithm: str | None) -> list[Posed]:
        return [fixed_posed(self.case or "", algorithm)]

    def run(self, ctx: Context) -> CheckResult:
        sut = sut_of(ctx)
        algorithm, kind = sut.algorithm, self.case or ""
        assert algorithm is not None  # without-replacement: skip_reason lets no other run
        tree = sut.passed(fixed_within(sut, kind, ctx.seed_for(self.id, "tree")))
        law = sut.layout.law(tree)[0].reshape(-1).numpy()
        rows = planned_rows(
            ctx, int((law > 0).sum()) - 1, INFORMATION_ALPHA, large=False, row_elements=2 * tree.width * tree.vocab
        )
        try:
            counts, _ = tally(
                ctx,
                lambda count, g: expand(tree, count),
                rows,
                ctx.seed_for(self.id, "run"),
                tree.width * tree.vocab,
                law.size,
                lambda _, path, token: last_nodes(path) * tree.vocab + token,
            )
        except SamplerFault as fault:
            return fault_result(
                self,
                fault,
                evidence={
                    "tree_case": case_json(tree, fault=fault),
                    "outside_drafting": outside_drafting(tree, algorithm),
                },
            )
        test = gof_test(counts, law, alpha=INFORMATION_ALPHA, random_state=ctx.seed_for(self.id, "gof"))
        expected = law * rows
        where = largest_deviation(counts, expected, lambda g, c: f"(node {c // tree.vocab}, token {c % tree.vocab})")
        differs = bool(test.pvalue <= INFORMATION_ALPHA)
        evidence: Evidence = {
            "algorithm": algorithm,
            "outside_drafting": outside_drafting(tree, algorithm),
            "law_differs": differs,
            "test": test.method,
            "observed": counts.tolist(),
            "expected": expected.tolist(),
            "where": where,
            "tree_case": case_json(tree, counts=counts, expected=expected),
        }
        law_words = (
            f"differs from {algorithm!r}'s (p = {test.pvalue:.3g}; {where})"
            if differs
            else f"is consistent with {algorithm!r}'s (p = {test.pvalue:.3g})"
        )
        return self.result(
            "pass",
            f"{rows} outputs valid on a tree of {ROBUSTNESS_KINDS[kind]}, which a without-replacement drafter cannot "
            f"produce; the law given the candidates {law_words}: information, not a law finding",
            samples=rows,
            evidence=evidence,
        )
