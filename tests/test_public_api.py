"""The public API is small, sorted and complete (every name in __all__ exists)."""

from __future__ import annotations

import importlib

import pytest

MODULES = [
    "specverify",
    "specverify.adapters",
    "specverify.checks",
    "specverify.report",
    "specverify.samplers",
    "specverify.stats",
    "specverify.strategies",
    "specverify.zoo",
]


@pytest.mark.parametrize("name", MODULES)
def test_all_is_sorted_and_complete(name):
    module = importlib.import_module(name)
    names = module.__all__
    assert names == sorted(names)
    for attribute in names:
        assert hasattr(module, attribute), f"{name}.{attribute} is in __all__ but missing"


def test_importing_the_package_does_not_import_triton_or_transformers():
    import subprocess
    import sys

    code = "import specverify, sys; print(sorted(m for m in ('triton', 'transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
