"""One root for the errors specverify raises: ``except specverify.SpecverifyError`` catches them all.

An error says that specverify could not do what it was asked (a spec that names no sampler, a
selection that matches no check, an unreadable run file, an adapter whose library is absent); it is
never a statement about the sampler.  What a sampler did wrong is evidence, not an error:
:class:`~specverify._calling.SamplerFault` stops one check, becomes that check's failing result and
never leaves :func:`specverify.check`, so it deliberately does not derive from the root (an
``except SpecverifyError`` around a run must never swallow a finding about the sampler).  Likewise
the pytest plugin's ``CheckFailed`` is a test failure, not an error.
"""

from __future__ import annotations

__all__ = ["SpecverifyError", "UsageError"]


class SpecverifyError(Exception):
    """Something specverify was asked to do could not be done; the message says what to fix."""


class UsageError(SpecverifyError, ValueError):
    """A name or selection that matches nothing (a budget, a set of checks).

    Also a :class:`ValueError`, which is what such a mistake raised before the root existed.
    """
