"""pytest entry point of specverify (registered under ``pytest11``).

Kept tiny and free of heavy imports, like Hypothesis's own plugin module: torch and the harness are
imported only when a run names a sampler (``--specverify-sampler``, the ``specverify_sampler`` ini
key, or the ``SPECVERIFY_SAMPLER`` environment variable).
"""

from __future__ import annotations

import os

BUDGETS = ("quick", "standard", "thorough")
#: The plugin's budget where none is named (the CLI's and specverify.check's is standard).
DEFAULT_BUDGET = "quick"


def pytest_addoption(parser):
    group = parser.getgroup("specverify", "speculative-sampling conformance (specverify)")
    group.addoption(
        "--specverify-sampler",
        metavar="SPEC",
        help="run the conformance battery on the sampler 'package.module:attribute', a module in the current directory "
        "or the rootdir included (also: ini specverify_sampler, env SPECVERIFY_SAMPLER)",
    )
    group.addoption(
        "--specverify-budget",
        choices=BUDGETS,
        help="quick (TV 0.05, the default: minutes for a batched sampler), standard (TV 0.01) or thorough (TV 0.003)",
    )
    group.addoption("--specverify-seed", type=int, help="run seed (default 0)")
    group.addoption(
        "--specverify-tv",
        type=float,
        metavar="EPS",
        help="a custom budget sized to detect TV EPS in (0, 1) (the nearest preset's settings, samples scaled by the "
        "power analysis)",
    )
    group.addoption(
        "--specverify-alpha", type=float, help="family-wise false-positive probability of the run (default 1e-4)"
    )
    group.addoption(
        "--specverify-power",
        type=float,
        metavar="P",
        help="probability that each statistical check detects the budget's TV, in (0, 1) (default 0.99)",
    )
    group.addoption(
        "--specverify-only",
        action="append",
        metavar="PATTERN",
        help="run only checks whose id or family matches (repeatable)",
    )
    group.addoption(
        "--specverify-xfail",
        metavar="FILE",
        help="expected failures: one check id (or glob) per line, '# reason' after it",
    )
    group.addoption("--specverify-json", metavar="PATH", help="write the aggregated run result as JSON")
    group.addoption("--specverify-html", metavar="PATH", help="write the aggregated run result as an HTML report")
    parser.addini("specverify_sampler", "sampler spec the battery runs on", default="")
    parser.addini("specverify_budget", "budget: quick (default), standard or thorough", default="")
    parser.addini("specverify_xfail", "expected-failures file", default="")


def _setting(config, option, ini, env=None):
    value = config.getoption(option)
    if value is None or value == "":
        value = config.getini(ini) or None
    if (value is None or value == "") and env:
        value = os.environ.get(env) or None
    return value


def pytest_configure(config):
    config.addinivalue_line("markers", "specverify: a check of the specverify conformance battery")
    spec = _setting(config, "specverify_sampler", "specverify_sampler", "SPECVERIFY_SAMPLER")
    if not spec:
        return
    from specverify._pytest import SpecverifyPlugin

    config.pluginmanager.register(
        SpecverifyPlugin(
            config,
            spec=spec,
            # quick by default: a test run is minutes, where standard can be hours for a sampler
            # called row by row; the report header names the budget, --specverify-budget picks another
            budget=_setting(config, "specverify_budget", "specverify_budget") or DEFAULT_BUDGET,
            xfail_file=_setting(config, "specverify_xfail", "specverify_xfail"),
        ),
        "specverify-battery",
    )
