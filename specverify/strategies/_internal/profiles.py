"""Hypothesis settings profiles for tests built on these strategies.

Registered when :mod:`specverify.strategies` is imported; load one in a ``conftest.py`` with
``settings.load_profile("specverify-ci")``, or pick one per run with pytest's
``--hypothesis-profile=specverify-thorough``.

* ``specverify-dev``: quick feedback while editing (few examples; failures saved and replayed from
  the local example database);
* ``specverify-ci``: reproducible: derandomised (the same examples on every run and machine), no
  example database, no deadline (a first torch call can take a second) and no ``too_slow``
  health check, the two settings that depend on the machine's load rather than on the code;
* ``specverify-thorough``: many examples, for a nightly run or a release; still no deadline.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings

__all__ = ["CI", "DEV", "PROFILES", "THOROUGH", "register_profiles"]

DEV = "specverify-dev"
CI = "specverify-ci"
THOROUGH = "specverify-thorough"

#: The settings of each profile, as keyword arguments of :class:`hypothesis.settings`.
PROFILES: dict[str, dict[str, Any]] = {
    DEV: {"max_examples": 20, "deadline": None},
    CI: {
        "max_examples": 50,
        "derandomize": True,
        "database": None,
        "deadline": None,
        "print_blob": True,
        "suppress_health_check": [HealthCheck.too_slow],
    },
    THOROUGH: {"max_examples": 1000, "deadline": None},
}


def register_profiles() -> None:
    """Register every profile of :data:`PROFILES` with Hypothesis (idempotent; loads none)."""
    for name, options in PROFILES.items():
        settings.register_profile(name, **options)
