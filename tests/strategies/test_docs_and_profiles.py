"""The README material runs as written, and the settings profiles are what the docs say."""

from __future__ import annotations

import pathlib
import re

import pytest
from hypothesis import HealthCheck, settings

from specverify import strategies as sv

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "strategies.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)


def test_the_doc_has_examples():
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_each_doc_example_runs(index):
    code = BLOCKS[index]
    if "load_profile" in code:  # would change the profile of the whole test session
        code = code.replace('settings.load_profile("specverify-ci")', 'settings.get_profile("specverify-ci")')
    exec(compile(code, f"{DOC.name}[{index}]", "exec"), {"__name__": f"doc_example_{index}"})  # noqa: S102 (our own docs)


def test_profiles_are_registered_on_import():
    ci = settings.get_profile("specverify-ci")
    assert ci.derandomize and ci.database is None and ci.deadline is None
    assert HealthCheck.too_slow in ci.suppress_health_check
    dev, thorough = settings.get_profile("specverify-dev"), settings.get_profile("specverify-thorough")
    assert dev.max_examples < ci.max_examples < thorough.max_examples
    assert thorough.deadline is None and dev.deadline is None
    assert set(sv.PROFILES) == {"specverify-dev", "specverify-ci", "specverify-thorough"}


def test_registering_again_changes_nothing():
    before = repr(settings.get_profile("specverify-ci"))
    sv.register_profiles()
    assert repr(settings.get_profile("specverify-ci")) == before
