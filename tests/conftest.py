"""Tests run under the package's deterministic ci profile (derandomised, no database, no deadline)."""

from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    # The Triton sampler's tests run through Triton's interpreter, which must be chosen before
    # anything imports triton.
    os.environ.setdefault("TRITON_INTERPRET", "1")
from hypothesis import settings

import specverify.strategies  # noqa: F401 - registers the specverify-* profiles

settings.load_profile(os.environ.get("SPECVERIFY_HYPOTHESIS_PROFILE", "specverify-ci"))

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Each xdist worker gets one core: torch's own threads would only contend with the other worker.
    torch.set_num_threads(1)

pytest_plugins = ["pytester"]
