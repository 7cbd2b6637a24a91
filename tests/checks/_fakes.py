"""Fakes for the checks' mechanics: a context no sampler stands behind, and scripted outcomes."""

from __future__ import annotations

from specverify._budgets import get_budget
from specverify._record.reach import ReachRecorder
from specverify.checks import Context


class _NoSampler:
    """No sampler stands behind it: only the record of what it was given (nothing)."""

    def __init__(self) -> None:
        self.reach = ReachRecorder()


def fake_context(**budget: object) -> Context:
    """A context for the search alone: it never calls a sampler."""
    return Context(sut=_NoSampler(), budget=get_budget("quick").with_(**budget), seed=0, alpha=1e-4)  # type: ignore[arg-type]
