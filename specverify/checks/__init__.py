"""The battery: every check family, in the order a run performs them.

Families and their stable ids (``family.name[case]``):

* ``contract``: output audit, determinism, seed sensitivity, per-request seeds (for logits
  samplers that declare them), one-hot targets, independence across calls and across rows;
* ``support``: never a token of target probability 0;
* ``exact``: uniform-driven enumeration, every draft sequence of small models, emitted law;
* ``fit``: goodness of fit on generated cases (conditional law; first token, whole step and
  each position of the completed law; each position at every shape the conditional checks use;
  rows far from normalised, for samplers that declare ``unnormalised=True``);
* ``efficiency``: accepted drafts per call against the exact expectation;
* ``robustness``: valid output on edge cases and large vocabularies;
* ``shapes``: the law at production shapes (V up to 262,144, K up to 16, 512-row calls) and at
  float edges (vanishing residuals, exact zeros next to sub-ulp mass, bf16/fp16 rounding).

A tree sampler (``contract = "tree"``, :mod:`specverify.trees`) is put through :func:`tree_battery`
instead, the ``trees`` family (``specverify.checks._trees``).

Each family's checks live in the module named after it (``support`` beside ``robustness``, in
``_robustness``); every check derives from :class:`Check`, and :mod:`specverify._run._plan`
plans a run from what the checks declare.
"""

from __future__ import annotations

from .._record.families import FAMILIES
from ._base import Check, Context, registered
from ._batteries import TREES, Battery, engine_battery, loop_battery, loop_reach
from ._contract import (
    CallIndependenceCheck,
    DeterminismCheck,
    OneHotCheck,
    OutputContractCheck,
    RowIndependenceCheck,
    SeedSensitivityCheck,
    seed_checks,
)
from ._efficiency import AcceptanceCheck
from ._every_shape import EveryShapeCheck
from ._exact import ConditionalEnumerationCheck, EmittedLawCheck, UniformGridCheck
from ._fit import ModelFitCheck, RenormalisationCheck, StepLawCheck
from ._robustness import EdgeValidityCheck, LargeVocabCheck
from ._shapes import EdgeLawCheck, FullSizeGridCheck, ShapeConditionalCheck, ShapeTargetLawCheck
from ._tree_battery import tree_battery

__all__ = ["BATTERIES", "Battery", "Check", "Context", "FAMILIES", "battery", "tree_battery"]


def battery() -> list[Check]:
    """Every check, cheapest and most decisive first (each of a family in :data:`FAMILIES`)."""
    return registered(
        [
            OutputContractCheck(),
            DeterminismCheck(),
            SeedSensitivityCheck(),
            *seed_checks(),
            OneHotCheck(),
            EdgeValidityCheck("support", "zero-target", "zeros"),
            EdgeValidityCheck("support", "zero-target", "disjoint"),
            EdgeValidityCheck("support", "zero-target", "crossed-supports"),
            UniformGridCheck("random"),
            UniformGridCheck("zeros"),
            UniformGridCheck("low-precision"),
            EdgeValidityCheck("robustness", "edge", "near-equal"),
            EdgeValidityCheck("robustness", "edge", "zero-residual"),
            EdgeValidityCheck("robustness", "edge", "low-precision"),
            EdgeValidityCheck("robustness", "edge", "one-hot"),
            EdgeValidityCheck("robustness", "edge", "one-ulp"),
            EdgeValidityCheck("robustness", "edge", "sub-ulp"),
            LargeVocabCheck(),
            CallIndependenceCheck(),
            RowIndependenceCheck(),
            ConditionalEnumerationCheck(),
            EmittedLawCheck("seed-chain"),
            EmittedLawCheck("random"),
            StepLawCheck("random"),
            StepLawCheck("near-equal"),
            StepLawCheck("zero-residual"),
            StepLawCheck("low-precision"),
            StepLawCheck("disjoint"),
            StepLawCheck("zeros"),
            StepLawCheck("overconfident"),
            StepLawCheck("draft-narrower"),
            RenormalisationCheck(),
            ModelFitCheck("random"),
            ModelFitCheck("chain"),
            ModelFitCheck("low-precision"),
            EveryShapeCheck(),
            AcceptanceCheck("seed-chain"),
            AcceptanceCheck("random"),
            # --- production shapes and float edges (issue 14) ---
            FullSizeGridCheck(),
            EdgeLawCheck(),
            ShapeConditionalCheck(),
            ShapeTargetLawCheck(),
        ]
    )


#: Each battery by the name a kind gives its own (:attr:`specverify._kinds.Kind.battery`): a new
#: kind of sampler brings its checks and one entry here, and the run layer looks its subject's
#: battery up by name, never asking which kind the subject is.
BATTERIES: dict[str, Battery] = {
    "chain": Battery(battery),
    TREES: Battery(tree_battery),
    "loop": Battery(loop_battery, loop_reach),
    "engine": Battery(engine_battery),
}
