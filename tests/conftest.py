"""Shared test settings: the package's ci profile is deterministic (no database, derandomised)."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile(
    "specverify-tests",
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("specverify-tests")

pytest_plugins = ["pytester"]
