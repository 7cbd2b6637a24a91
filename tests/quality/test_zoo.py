"""The harness finds bugs and does not cry wolf: every zoo member gets its declared verdict.

Like Hypothesis's tests/quality: these tests are about the harness's power, not the samplers.
Correct and lossless-suboptimal members declared at the quick budget run the whole battery here (a
subset never passes), but for the two that make a Python call per row (see ``PYTHON_PER_ROW``); bugs declared at quick
run the families declared to catch them, which must reach the declared verdict on their own (a failure stands in a
subset), and members that need a larger budget run those families at that budget.  The whole battery on every member, at
every budget, is ``specverify zoo --budget standard`` (the kill matrices quoted in the README); here the
bugs' runs are cut to their families to keep CI within its time.
"""

from __future__ import annotations

import pytest

import specverify
from specverify._budgets import get_budget
from specverify.zoo import ZOO

# A hang costs its time limit: shorter than the default, long enough for a per-row Python loop
# over the largest chunk the harness passes on a loaded machine.
QUICK = get_budget("quick").with_(timeout=60.0)

AT_QUICK = [name for name, member in ZOO.items() if member.budget == "quick"]

#: Correct members that make one Python call per row (or loop over rows in Python): the whole quick
#: battery costs them minutes of CI. Here they run the exact families, which see every outcome's
#: probability on their unbatched path, and must pass every check they run; their whole battery is
#: in the quick kill matrix (``specverify zoo --budget quick``).
PYTHON_PER_ROW = {
    "per-row-loop": ["contract", "support", "exact"],
    "one-row-per-call": ["contract", "support", "exact"],
}
LATER = [name for name, member in ZOO.items() if member.budget != "quick"]


def _describe(result) -> str:
    lines = [f"verdict {result.verdict}"]
    lines += [f"  {c.status} {c.id}: {c.message}" for c in result.checks if c.status != "pass"]
    return "\n".join(lines)


@pytest.mark.parametrize("name", AT_QUICK)
def test_member_gets_its_declared_verdict(name):
    member = ZOO[name]
    passes = member.verdict in ("conformant", "lossless-suboptimal")
    if name in PYTHON_PER_ROW:
        result = specverify.check(member, budget=QUICK, seed=0, select=PYTHON_PER_ROW[name])
        assert result.verdict == "inconclusive" and {c.status for c in result.checks} <= {"pass", "skip"}, _describe(
            result
        )
        assert sum(c.status == "pass" for c in result.checks) >= 10, _describe(result)  # a subset, never a pass
        return
    result = specverify.check(member, budget=QUICK, seed=0, select=None if passes else list(member.caught_by))
    assert result.verdict == member.verdict, _describe(result)
    caught = {c.family for c in result.checks if c.status == "fail"}
    if member.caught_by:
        assert caught & set(member.caught_by), f"caught by {caught}, expected one of {member.caught_by}"
    else:
        assert not caught
    if member.float_edge:  # its difference shown, sized, and deciding nothing
        assert any(c.status == "float-edge" and "event" in c.evidence for c in result.checks), _describe(result)


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=[pytest.mark.slow] if ZOO[n].budget == "thorough" else []) for n in LATER]
)
def test_subtle_member_is_caught_by_its_family_at_its_budget(name):
    member = ZOO[name]
    budget = get_budget(member.budget).with_(timeout=60.0)
    result = specverify.check(
        member,
        budget=budget,
        seed=0,
        select=[f"{f}.*" for f in member.caught_by if f == "fit"] or list(member.caught_by),
    )
    assert result.verdict == member.verdict, _describe(result)
