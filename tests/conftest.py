"""Tests run under the package's deterministic ci profile (derandomised, no database, no deadline)."""

from __future__ import annotations

import importlib.util
import os
import pathlib
from collections.abc import Callable
from types import ModuleType

import pytest
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

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def load_by_path() -> Callable[[str], ModuleType]:
    """Load a file of the repository (``examples/...``, ``scripts/...``) as a module: those folders
    are not packages, and each test must run the file exactly as a user would copy it."""

    def load(relative: str) -> ModuleType:
        path = ROOT / relative
        spec = importlib.util.spec_from_file_location(f"specverify_test_{path.stem}", path)
        assert spec is not None and spec.loader is not None, f"{relative} is not a Python file"
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load
