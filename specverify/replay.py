"""Rerun one finding by hand: the cases a failing check prints, and the tests that rerun them.

A failing result's ``repro`` snippet builds a :class:`StepCase` or a :class:`ModelCase` and calls
:func:`step_law_test` or :func:`model_law_test` (a :class:`LawTest`: the G-test of the sampler's
outputs against the exact law), or :func:`call_sampler` for a contract violation (every output
audited; raises :class:`~specverify.errors.SamplerFault`).  :func:`derive_seed` gives the seed a
check derived from the run seed.  Import it as ``from specverify import replay``; it imports torch.
"""

from __future__ import annotations

from ._laws.cases import ModelCase, StepCase
from ._replay import LawTest, call_sampler, model_law_test, step_law_test
from ._seeds import derive_seed

__all__ = ["LawTest", "ModelCase", "StepCase", "call_sampler", "derive_seed", "model_law_test", "step_law_test"]
