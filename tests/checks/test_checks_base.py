"""The check interface (``specverify.checks._base.Check``): its defaults, and batteries that name only known families.

No sampler runs here: the checks are declared, never run.
"""

from __future__ import annotations

import dataclasses

import pytest

from specverify._record.families import FAMILIES, LOOP_FAMILY
from specverify.checks import Check, battery, tree_battery
from specverify.checks._base import Decision, registered
from specverify.checks._loop import loop_battery


@dataclasses.dataclass
class Declared(Check):
    """The least a check must say: a family, a case, an id, whether it is statistical, how it runs."""

    family: str
    case: str | None = None
    statistical: bool = False

    @property
    def id(self) -> str:
        return f"{self.family}.declared" + (f"[{self.case}]" if self.case else "")

    def run(self, ctx: object) -> list:
        raise AssertionError("declared, never run")


def test_the_defaults_plan_one_result_of_the_check_itself():
    exact, statistical = Declared("fit", "x"), Declared("fit", statistical=True)
    assert exact.applies(object()) and exact.skip_reason(object()) is None and exact.proves is None
    assert exact.decision_list() == [Decision("fit.declared[x]", "fit", "x", None)]
    assert (exact.decisions, statistical.decisions) == (0, 1)  # an exact check spends no share


def test_a_check_must_say_its_id_how_it_runs_and_whether_it_is_statistical():
    class NoRun(Check):
        family, case, statistical, id = "fit", None, False, "fit.no-run"

    class NoKind(Check):
        family, case, id = "fit", None, "fit.no-kind"

        def run(self, ctx: object) -> list:
            return []

    for incomplete in (NoRun, NoKind):
        with pytest.raises(TypeError, match="abstract"):
            incomplete()
    with pytest.raises(TypeError):  # the base gives family no default: a dataclass field stays required
        Declared()  # type: ignore[call-arg]


def test_every_check_of_every_battery_derives_from_the_base():
    checks = [*battery(), *tree_battery(), *loop_battery()]
    assert all(isinstance(c, Check) for c in checks)
    assert all(d.id for c in checks for d in c.decision_list())


def test_the_batteries_and_the_families_agree():
    chains, trees = battery(), tree_battery()
    assert {c.family for c in chains} | {c.family for c in trees} == set(FAMILIES)  # none unknown, none without checks
    assert {c.family for c in trees} == {"trees"} and "trees" not in {c.family for c in chains}
    assert {c.family for c in loop_battery()} == {LOOP_FAMILY} and LOOP_FAMILY not in FAMILIES


def test_a_battery_refuses_an_unknown_family_or_an_id_twice():
    with pytest.raises(ValueError, match=r"families \['fits'\]"):
        registered([Declared("fit"), Declared("fits")])
    with pytest.raises(ValueError, match=r"\['fit.declared'\] appear more than once"):
        registered([Declared("fit"), Declared("fit")])
    assert registered([Declared("loop")], families=(LOOP_FAMILY,)) == [Declared("loop")]
