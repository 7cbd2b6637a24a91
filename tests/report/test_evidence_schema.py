"""Every evidence key a real run writes is in the schema (specverify._record.evidence), at every depth.

The runs are the report tests' own (session fixtures: a few fast checks of broken samplers and of
the reference), so this costs no extra sampling; mypy checks the typed producers and readers, this
catches what mypy cannot see (modules it does not check yet, JSON read back).
"""

from __future__ import annotations

import re
from pathlib import Path

import specverify
from specverify._record.evidence import Evidence, unknown_keys

from .test_report_imports import imported_after


def test_every_key_the_real_runs_write_is_in_the_schema(lossy_run, support_run, raising_run, reference_run):
    seen: set[str] = set()
    for run in (lossy_run, support_run, raising_run, reference_run):
        for check in run.checks:
            evidence = check.to_json()["evidence"]
            assert unknown_keys(evidence) == [], check.id
            seen |= set(evidence)
    # the runs hold the records the report reads: a failure's law, case, repro and fault, an exact
    # mismatch, acceptance, a search's bookkeeping (else this test would pass on nothing)
    assert {
        "tv",
        "minimal_example",
        "repro",
        "violation",
        "first_mismatch",
        "observed_accepted",
        "examples",
        "where",
    } <= seen
    assert seen <= set(Evidence.__annotations__)


def test_a_misspelt_key_or_a_broken_nested_record_is_named():
    evidence = {
        "tv": {"estimate": 0.2, "low": 0.1, "high": 0.3, "confidence": 0.99},  # plug_in missing
        "minimal_exmaple": {},
        "minimal_example": {"cases": [{"K": 1, "V": 3, "draft_token": [1]}]},
        "unconfirmed_alarms": [{"example": {"K": 1}, "confirm_pvalue": None}],
        "shapes": [{"V": 3, "K": 1, "rows": 9, "position": 1}],
    }
    assert unknown_keys(evidence) == [
        "evidence.tv: no 'plug_in'",
        "evidence: 'minimal_exmaple' is not in Evidence",
        "evidence.minimal_example.cases: 'draft_token' is not in CaseRecord",
    ]


def test_the_schema_imports_no_torch_and_no_hypothesis():
    assert imported_after("import specverify._record.evidence") == []


#: ``evidence.get("key")``, ``evidence["key"]``, ``"key" in evidence`` (of any name ending in evidence)
_READ = re.compile(r'evidence(?:\.get\(|\[)\s*"(\w+)"|"(\w+)" (?:not )?in (?:\w+\.)?evidence\b')


def test_every_key_the_package_reads_or_writes_by_name_is_in_the_schema():
    """mypy types ``evidence.get("typo")`` as ``object`` without an error; this names such a key."""
    package = Path(specverify.__file__).parent
    named = {
        (path.relative_to(package).as_posix(), key)
        for path in package.rglob("*.py")
        for match in _READ.finditer(path.read_text())
        for key in match.groups()
        if key
    }
    assert len(named) > 40  # the report, the plugin, the CLI, the runner and the checks all name keys
    assert sorted((where, key) for where, key in named if key not in Evidence.__annotations__) == []
