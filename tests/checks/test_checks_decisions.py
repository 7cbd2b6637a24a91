"""From a search to results (``decisions_from_search``): one result per decision, from scripted searches.

These pin the mechanics (which decision fails, at which level, with which samples and evidence,
and when a check cannot pass), not the run's verdict table, which lives in ``_record.result.verdict``.
"""

from __future__ import annotations

from specverify._contract import Violation
from specverify.checks._base import Decision
from specverify.checks._search import Outcome, SearchResult, decisions_from_search
from specverify.errors import SamplerFault

from ._fakes import fake_context

CTX = fake_context()
CEILING = CTX.budget.ceiling_tv
A = Decision("fit.a[x]", "fit", "x", "loss")
B = Decision("fit.b[x]", "fit", "x", "non-canonical")


def screen(pa: float = 0.5, pb: float = 0.5, claim: float = CEILING / 2) -> Outcome:
    return Outcome({A.id: pa, B.id: pb}, 100, {A.id: claim, B.id: claim})


def decide(found: SearchResult, decisions=(A, B)):
    results = decisions_from_search(
        CTX, list(decisions), found, lambda case: {"case": case}, lambda case, outcome, decision: f"repro {case}"
    )
    assert [r.id for r in results] == [d.id for d in decisions]
    return results


def test_no_alarm_passes_each_decision_at_the_check_share():
    results = decide(SearchResult(examples=3, screens=[screen(0.2), screen(0.4, claim=CEILING)], confirm_alpha=1e-3))
    for r in results:
        assert (r.status, r.finding, r.alpha, r.samples, r.min_detectable_tv) == ("pass", None, CTX.alpha, 200, CEILING)
        assert r.proves == {A.id: "loss", B.id: "non-canonical"}[r.id]
    assert results[0].evidence["smallest_screen_pvalue"] == 0.2
    assert results[0].evidence["alpha_share"] == CTX.alpha and results[0].evidence["confirm_alpha"] == 1e-3


def test_a_confirmation_fails_only_the_decisions_it_rejects_at_the_confirmation_level():
    confirmation = Outcome({A.id: 1e-9, B.id: 0.3}, 50, {A.id: 0.04, B.id: 0.04}, evidence={A.id: {"where": "token 2"}})
    found = SearchResult(
        examples=4, screens=[screen(), screen(pa=0.0)], confirmed=(7, confirmation), confirm_alpha=1e-3
    )
    a, b = decide(found)
    assert (a.status, a.finding, a.p_value, a.alpha, a.samples) == ("fail", "loss", 1e-9, 1e-3, 250)
    assert a.evidence["minimal_example"] == {"case": 7} and a.evidence["repro"] == "repro 7"
    assert a.evidence["where"] == "token 2" and "token 2" in a.message
    assert b.status == "pass" and b.p_value == 0.3 and b.alpha == 1e-3  # its own confirmation decided it


def test_a_p_value_above_the_confirmation_level_does_not_fail():
    confirmation = Outcome({A.id: 2e-3}, 50, {A.id: 0.04})
    (a,) = decide(SearchResult(examples=2, screens=[screen()], confirmed=(1, confirmation), confirm_alpha=1e-3), (A,))
    assert a.status == "pass"


def test_a_fault_fails_every_decision_with_the_broken_rule():
    fault = SamplerFault(Violation("token-range", "row 0: token 9 of 4", finding="contract"))
    found = SearchResult(examples=1, screens=[], confirmed=(3, Outcome({}, 0, {}, fault=fault)))
    for r in decide(found):
        assert (r.status, r.finding) == ("fail", "contract")
        assert r.evidence["violation"] == "token-range" and r.evidence["minimal_example"] == {"case": 3}


def test_a_check_that_could_not_show_its_power_is_inconclusive_never_a_pass():
    cases = {
        "nothing generated": SearchResult(examples=0, screens=[]),
        "every round alarmed, none confirmed": SearchResult(
            examples=9, screens=[screen(0.0)], exhausted=True, unconfirmed=[(1, screen(0.5))] * 3
        ),
        "no decision tested": SearchResult(examples=2, screens=[Outcome({}, 10, {})]),
        "above the ceiling": SearchResult(examples=2, screens=[screen(claim=CEILING * 1.01)]),
    }
    words = {
        "nothing generated": "no case could be generated",
        "every round alarmed, none confirmed": "none confirmed",
        "no decision tested": "no case could be tested",
        "above the ceiling": "ceiling",
    }
    for name, found in cases.items():
        for r in decide(found):
            assert r.status == "inconclusive", name
            assert words[name] in r.message, (name, r.message)


def test_unconfirmed_alarms_are_kept_as_evidence():
    found = SearchResult(examples=5, screens=[screen(0.0), screen()], unconfirmed=[(4, Outcome({A.id: 0.2}, 50, {}))])
    a, _ = decide(found)
    assert a.status == "pass"
    assert a.evidence["unconfirmed_alarms"] == [{"example": {"case": 4}, "confirm_pvalue": 0.2}]
