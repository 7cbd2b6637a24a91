"""The pytest face of the battery: one test item per check, results aggregated into one run.

Registered by the tiny ``_specverify_pytestplugin`` entry module when a sampler is named.  The
plugin drives a :class:`specverify._run.Run`, as the CLI does: its items are the Run's planned
checks, so each keeps its share of the false-positive budget whichever xdist worker runs it;
workers ship their results (and the sampler's counters) to the controller in ``user_properties``,
where the controller's Run records them, and its verdict is printed and its JSON and HTML written:
the same record as the CLI's.

For a user's own test file, :func:`battery` is a one-line helper::

    test_my_sampler = specverify.pytest_battery("mypkg.kernels:sampler", budget="quick")

It gives one test per check and a last ``verdict`` test that fails unless the Run's verdict is
lossless.  That Run sees only the checks that ran in its own process: under pytest-xdist run it
with ``--dist loadfile`` (one worker runs a test file's tests, in order), else the ``verdict``
test fails, naming the checks whose results it did not see, rather than pass on a part of the
battery.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ._budgets import resolve_budget
from ._calling.first_call import first_call
from ._cli.output import case_lines
from ._record.result import CheckResult, RunResult
from ._record.vocabulary import lossless
from ._run import PlannedCheck, Run, left_out_of, selects
from ._run._driver import load_sut, write_json
from ._threads import use_default_threads
from .checks._search import p_text
from .errors import CheckFailed, SamplerSpecError, UsageError

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr

__all__ = [
    "CheckFailed",
    "SpecverifyCollector",
    "SpecverifyItem",
    "SpecverifyPlugin",
    "SubsetVerdictItem",
    "battery",
    "describe_failure",
    "importable_from",
]

_PROPERTY = "specverify"


def describe_failure(results: list[CheckResult]) -> str:
    """What failed, on which smallest case, and how to reproduce it."""
    lines = []
    for r in results:
        if r.status == "pass":
            continue
        lines.append(f"{r.id}: {r.status.upper()}" + (f" ({r.finding})" if r.finding else ""))
        if r.message:
            lines.append(f"  {r.message}")
        if r.p_value is not None:
            level = f" at alpha {r.alpha:.3g}" if r.alpha is not None else ""
            lines.append(f"  {p_text(r.p_value)}{level}; samples {r.samples}")
        tv = r.evidence.get("tv")
        if r.status == "fail" and isinstance(tv, dict) and "estimate" in tv:
            lines.append(
                f"  observed TV {tv['estimate']:.3g} [{tv.get('low', float('nan')):.3g}, "
                f"{tv.get('high', float('nan')):.3g}]"
            )
        if r.evidence.get("minimal_example"):
            lines += [f"  {line}" for line in case_lines(r)]
        repro = r.evidence.get("repro")
        if repro:
            lines.append("  repro:")
            lines += [f"    {line}" for line in repro.splitlines()]
    return "\n".join(lines)


def _load_expected_failures(path: str | None) -> dict[str, str]:
    """``check-id-or-family-or-glob  # reason`` per line (ids with brackets match literally)."""
    if not path:
        return {}
    entries = {}
    for raw in Path(path).read_text().splitlines():
        text, _, reason = raw.partition("#")
        if text.strip():
            entries[text.strip()] = reason.strip() or "expected to fail"
    return entries


class SpecverifyItem(pytest.Item):
    """One check of the battery."""

    def __init__(self, *, planned: PlannedCheck, plugin: SpecverifyPlugin, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.planned = planned
        self.plugin = plugin
        self.add_marker(pytest.mark.specverify)

    def runtest(self) -> None:
        run = self.plugin.run
        before = run.usage()
        results = run.execute(self.planned)
        usage = {name: value - before[name] for name, value in run.usage().items()}
        shipped = {"check": self.planned.id, "results": [r.to_json() for r in results], "usage": usage}
        self.user_properties.append((_PROPERTY, json.dumps(shipped)))
        if all(r.status == "skip" for r in results):
            pytest.skip(f"{self.planned.id}: {results[0].message}")
        if any(r.status in ("fail", "error", "inconclusive") for r in results):
            raise CheckFailed(results)

    def repr_failure(self, excinfo: Any, style: Any = None) -> str | TerminalRepr:
        if isinstance(excinfo.value, CheckFailed):
            return describe_failure(excinfo.value.results)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"specverify {self.planned.id}"


def subset_note(select: list[str] | None, sut: Any) -> str | None:
    """Why a run of only ``select`` cannot pass ``sut``, naming what it left out of its battery (the
    chain battery, or the ``trees`` family for a tree sampler); ``None``: it left nothing out."""
    missing = left_out_of(sut, select)
    if not missing:
        return None
    shown = ", ".join(missing[:6]) + (f" and {len(missing) - 6} more" if len(missing) > 6 else "")
    return (
        f"verdict at best inconclusive: only checks matching {select} ran, {len(missing)} results of the battery "
        f"were left out ({shown}); a subset can fail a sampler but not pass it"
    )


class SubsetVerdictItem(pytest.Item):
    """The run-level verdict of a subset of the battery: never a pass."""

    def __init__(self, *, note: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.note = note
        self.add_marker(pytest.mark.specverify)

    def runtest(self) -> None:
        raise CheckFailed([])

    def repr_failure(self, excinfo: Any, style: Any = None) -> str:
        return self.note

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, "specverify verdict"


class SpecverifyCollector(pytest.Collector):
    """Holds the battery's items under the node id ``specverify``."""

    def __init__(self, *, plugin: SpecverifyPlugin, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.plugin = plugin

    def collect(self) -> list[pytest.Item]:
        items: list[pytest.Item] = []
        for planned in self.plugin.planned:
            item = SpecverifyItem.from_parent(self, name=planned.id, planned=planned, plugin=self.plugin)
            for pattern, reason in self.plugin.expected_failures.items():
                if selects(pattern, planned.check):
                    item.add_marker(pytest.mark.xfail(reason=reason, strict=True, raises=CheckFailed))
            items.append(item)
        note = subset_note(self.plugin.config.getoption("specverify_only"), self.plugin.sut)
        if note is not None:
            items.append(SubsetVerdictItem.from_parent(self, name="verdict", note=note))
        return items


def importable_from(config: pytest.Config) -> list[str]:
    """Put the current directory and the rootdir on ``sys.path`` (the sampler's process inherits
    it), so ``--specverify-sampler=mod:sampler`` finds ``mod.py`` there, as ``specverify check``
    and ``python -m`` do; returns the directories added or already there."""
    places = list(dict.fromkeys([os.getcwd(), str(config.rootpath)]))
    for place in reversed(places):
        if place not in sys.path:
            sys.path.insert(0, place)
    return places


class SpecverifyPlugin:
    """Adds the battery to the session and aggregates its results."""

    def __init__(self, config: pytest.Config, *, spec: str, budget: str, xfail_file: str | None) -> None:
        self.config = config
        self.spec = spec
        try:
            self.budget = resolve_budget(
                budget,
                tv=config.getoption("specverify_tv"),
                alpha=config.getoption("specverify_alpha"),
                power=config.getoption("specverify_power"),
            )
        except ValueError as exc:
            raise pytest.UsageError(f"specverify: {exc}") from None
        self.seed = config.getoption("specverify_seed") or 0
        searched = importable_from(config)
        # as the CLI: one thread each for the harness and the sampler, unless OMP_NUM_THREADS is set
        use_default_threads()
        try:  # the sampler runs in a supervised process of its own: a crash or hang is a finding
            self.sut = load_sut(spec, isolation="process", first_timeout=self.budget.timeout)
        except SamplerSpecError as exc:
            hint = ""
            if "no module named" in str(exc):
                hint = (
                    f" (looked in {', '.join(searched)} and on sys.path: run pytest where the module lies, "
                    "install its package with 'pip install -e .', or add its directory to PYTHONPATH)"
                )
            raise pytest.UsageError(f"specverify: {exc}{hint}") from None
        try:
            first_call(self.sut, spec)  # as the CLI: one that cannot be called as declared is told once
            self.run = Run(self.sut, self.budget, self.seed, select=config.getoption("specverify_only"), spec=spec)
        except (UsageError, SamplerSpecError) as exc:
            self.sut.close()
            raise pytest.UsageError(f"specverify: {exc}") from None
        self.planned = self.run.planned
        self.expected_failures = _load_expected_failures(xfail_file)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.sut.close()  # the sampler's process is kept idle for this harness, or ended at exit

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        caps = self.sut.capabilities.to_json()
        budget = self.run.budget  # as the run sizes it (quick on a one-row-at-a-time sampler: a coarser TV)
        return [
            f"specverify: sampler {self.spec} ({self.sut.name}) on {self.sut.device}, dtype "
            f"{str(self.sut.dtype).removeprefix('torch.')}",
            f"specverify: budget {budget.name} (detects TV >= {budget.tv} with power {budget.power}), "
            f"family-wise alpha {budget.alpha:g}, seed {self.seed}, {len(self.planned)} checks, "
            f"alpha per decision {self.run.info['alpha_per_decision']:.3g}",
            *([f"specverify: {budget.derivation}"] if budget.derivation else []),
            f"specverify: capabilities {caps}"
            + (f"; {len(self.expected_failures)} expected failures" if self.expected_failures else ""),
        ]

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(self, collector: pytest.Collector) -> Any:
        """Add the battery beside the session's own top-level collectors."""
        report = yield
        if isinstance(collector, pytest.Session) and report.passed:
            report.result.append(
                SpecverifyCollector.from_parent(collector, name="specverify", nodeid="specverify", plugin=self)
            )
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Record the results an item shipped, where it ran in another process (an xdist worker)."""
        for name, value in getattr(report, "user_properties", ()):
            if name == _PROPERTY and report.when == "call":
                shipped = json.loads(value)
                if not self.run.recorded(shipped["check"]):
                    self.run.record(
                        shipped["check"], [CheckResult.from_json(r) for r in shipped["results"]], shipped["usage"]
                    )

    def run_result(self) -> RunResult:
        """The Run's result: every check recorded here, in plan order; unfinished unless all ran."""
        return self.run.result()

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """A run whose verdict is no pass fails the session, even where every item passed."""
        if hasattr(self.config, "workerinput") or not self.run.ran:
            return
        if session.exitstatus == pytest.ExitCode.OK and not lossless(self.run_result().verdict):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if hasattr(self.config, "workerinput") or not self.run.ran:
            return
        result = self.run_result()
        summary = ", ".join(f"{n} {s}" for s, n in result.to_json()["summary"].items() if n)
        terminalreporter.section("specverify")
        terminalreporter.write_line(f"verdict: {result.verdict} for {self.sut.name} ({summary})")
        items, results = sum(self.run.recorded(p.id) for p in self.planned), len(result.checks)
        if results != items:  # a test item is one planned check; some report several results (decisions)
            terminalreporter.write_line(
                f"({items} test items ran, one per planned check; the verdict counts their {results} results: a check "
                "that makes several decisions on the same samples, such as the first token, the step and each "
                "position, reports each)"
            )
        if result.verdict_reason:
            terminalreporter.write_line(f"({result.verdict_reason})")
        json_path = self.config.getoption("specverify_json")
        html_path = self.config.getoption("specverify_html")
        if json_path:
            write_json(result, json_path)
            terminalreporter.write_line(f"JSON: {json_path}")
        if html_path:
            from .report import write_report

            write_report(result, html_path)
            terminalreporter.write_line(f"report: {html_path}")


def battery(
    sampler: str | Callable[..., Any],
    *,
    budget: str = "quick",
    seed: int = 0,
    only: list[str] | None = None,
    expected_failures: dict[str, str] | None = None,
    tv: float | None = None,
    power: float | None = None,
) -> Callable[[str], None]:
    """A parametrised pytest test function running the whole battery on ``sampler``.

    ``test_mine = specverify.pytest_battery("pkg.mod:sampler")`` in a test file (at the quick
    budget, as the plugin's default; ``budget="standard"`` for more reach) gives one test per
    check, with readable ids, and a last one, ``verdict``: the run-level verdict, which fails unless
    the run's verdict is lossless.  So a subset (``only``) never passes, a failing check fails the run
    (an expected failure too: it is xfail, the verdict still fails, as the plugin's exit status does),
    and a check whose result the verdict did not see (deselected, or run by another pytest-xdist
    worker: use ``--dist loadfile``) leaves the run unfinished.
    """
    spec = sampler if isinstance(sampler, str) else None
    chosen = resolve_budget(
        budget, tv=tv, power=power
    )  # ``tv``: a custom budget sized for it (specverify._budgets.budget_for_tv)
    # A spec runs in a supervised process of its own; a callable is called in this process.
    sut = load_sut(sampler, isolation="process" if spec else "in-process", first_timeout=chosen.timeout)
    run = Run(sut, chosen, seed, select=only, spec=spec)
    planned = {p.id: p for p in run.planned}
    marks = {
        check_id: [pytest.mark.xfail(reason=reason, strict=True, raises=AssertionError)]
        for pattern, reason in (expected_failures or {}).items()
        for check_id, item in planned.items()
        if selects(pattern, item.check)
    }
    params = [pytest.param(check_id, id=check_id, marks=marks.get(check_id, ())) for check_id in planned]
    params.append(pytest.param("verdict", id="verdict"))  # last: under xdist, --dist loadfile keeps the order

    @pytest.mark.parametrize("check_id", params)
    def test_specverify_battery(check_id: str) -> None:
        if check_id == "verdict":
            problem = verdict_failure(run)
            if problem is not None:
                raise AssertionError(problem)
            return
        results = run.execute(planned[check_id])
        if all(r.status == "skip" for r in results):
            pytest.skip(results[0].message or "skipped")
        if any(r.status in ("fail", "error", "inconclusive") for r in results):
            raise AssertionError(describe_failure(results))

    return test_specverify_battery


def verdict_failure(run: Run) -> str | None:
    """Why ``run`` is no pass (its verdict, the reason, the checks it has no result of), or ``None``."""
    result = run.result()
    if lossless(result.verdict):
        return None
    summary = ", ".join(f"{n} {s}" for s, n in result.to_json()["summary"].items() if n) or "no results"
    lines = [f"verdict: {result.verdict} for {run.subject.name} ({summary})"]
    if result.verdict_reason:
        lines.append(f"({result.verdict_reason})")
    missing = run.missing
    if missing:
        shown = ", ".join(missing[:6]) + (f" and {len(missing) - 6} more" if len(missing) > 6 else "")
        lines.append(
            f"{len(missing)} of {len(run.planned)} planned checks have no result in this process ({shown}): "
            "deselected, not run yet, or run by another pytest-xdist worker (use --dist loadfile); a verdict needs "
            "them all"
        )
    return "\n".join(lines)
