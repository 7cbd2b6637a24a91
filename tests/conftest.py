"""Tests run under the package's deterministic ci profile (derandomised, no database, no deadline)."""

from __future__ import annotations

import os

from hypothesis import settings

import specverify.strategies  # noqa: F401 - registers the specverify-* profiles

settings.load_profile(os.environ.get("SPECVERIFY_HYPOTHESIS_PROFILE", "specverify-ci"))

pytest_plugins = ["pytester"]
