"""Fakes for the checks' mechanics: a context no sampler stands behind, and scripted outcomes."""

from __future__ import annotations

from specverify._budgets import get_budget
from specverify.checks import Context


def fake_context(**budget: object) -> Context:
    """A context for the search alone: it never calls a sampler (``sut`` is absent)."""
    return Context(sut=None, budget=get_budget("quick").with_(**budget), seed=0, alpha=1e-4)  # type: ignore[arg-type]
