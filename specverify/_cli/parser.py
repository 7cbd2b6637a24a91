"""The ``specverify`` command line's arguments: one parser, one helper per subcommand.

Kept apart from :mod:`specverify._cli` (what each command does) so the options and their help
texts read in one place.
"""

from __future__ import annotations

import argparse
import dataclasses
import textwrap
from typing import Any

from .._budgets import BUDGETS
from .._version import __version__

__all__ = ["EPILOG", "parser"]

WIDTH = 88  # descriptions are wrapped here; epilogs are laid out by hand within it


def _exits(command: str, *codes: str) -> str:
    return f"exit status of '{command}':\n" + "".join(f"  {code}\n" for code in codes)


_USAGE_ERROR = "2  also: a usage error (an unknown option or a missing argument)"

EPILOG = (
    _exits(
        "check",
        "0  lossless: conformant, or lossless but suboptimal",
        "1  not lossless: lossy, or the sampler contract is broken (a crash, exit or hang of the sampler included)",
        "2  the harness could not run (bad spec, import or factory failure, absent device, unwritable output)",
        "3  inconclusive: the budget could not decide",
        "130 interrupted (Ctrl-C); the JSON and HTML of what finished are written; a second Ctrl-C exits at once",
    )
    + """
examples:
  specverify check specverify.samplers:reference --json out.json
  specverify check mypkg.kernels:sampler --budget thorough --report reports/mine.html
"""
)

LOOP_EPILOG = (
    _exits(
        "loop",
        "0  lossless: every loop check passed (conformant)",
        "1  not lossless: a law, determinism or seed check failed, or the loop crashed, exited or hung",
        "2  the harness could not run (bad spec, not a @specverify.loop, a selection that matches nothing, unwritable "
        "output)",
        "3  inconclusive: the budget could not decide",
        "130 interrupted (Ctrl-C); the JSON and HTML of what finished are written",
    )
    + """
examples:
  specverify loop specverify.samplers:loop_reference --budget quick
  specverify loop mypkg.engine:generate --only 'loop.law[*]' --json loop.json --report loop.html
"""
)

ENGINE_EPILOG = (
    _exits(
        "engine",
        "0  lossless: speculation on generates what the engine generates with it off (every engine check passed)",
        "1  not lossless: a law, greedy or determinism check failed, or the engine crashed, exited or hung",
        "2  the harness could not run (bad spec, not a @specverify.engine, a selection that matches nothing, "
        "unwritable output)",
        "3  inconclusive: the budget could not decide",
        "130 interrupted (Ctrl-C); the JSON and HTML of what finished are written",
    )
    + """
examples:
  specverify engine specverify.samplers:engine_reference --budget quick
  specverify engine 'specverify.adapters.transformers_engine:engine' --tv 0.2 --only 'engine.law[sampled]'
"""
)

TOP_EPILOG = """\
commands and their exit status (each command's --help gives its own in full):
  check     0 lossless, 1 not lossless, 2 could not run, 3 inconclusive, 130 interrupted
  loop      the same codes as check, for a generation loop
  engine    the same codes as check, for an engine (speculation on against off)
  report    0 written, 2 an input could not be read (nothing written)
  zoo       0 every member met its declaration, 1 a false alarm or a due bug missed, 2 no member matched, \
130 interrupted
  adapters  0 (the list is printed whatever can run here)

examples:
  specverify check specverify.samplers:reference --json out.json --report out.html
  specverify check mypkg.kernels:sampler --budget quick
"""


def _wrap(text: str) -> str:
    """A description as paragraphs of at most :data:`WIDTH` columns (argparse keeps raw text as is)."""
    return textwrap.fill(" ".join(text.split()), WIDTH)


def parser() -> argparse.ArgumentParser:
    """The whole command line: one subcommand each for check, loop, engine, report, zoo and adapters."""
    parser = argparse.ArgumentParser(
        prog="specverify",
        description=_wrap(
            "Prove or refute that a speculative-decoding sampler preserves the target model's distribution exactly."
        ),
        epilog=TOP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"specverify {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_check(commands)
    for words in _SUBJECT_COMMANDS:
        _add_subject_command(commands, words)
    _add_report(commands)
    _add_zoo(commands)
    commands.add_parser(
        "adapters",
        help="list the built-in adapters and whether each can run here",
        description=_wrap(
            "List the built-in adapters for third-party samplers, their specs, and whether each can run on this "
            "machine."
        ),
        epilog=_exits(
            "adapters",
            "0  the list was printed (an adapter that cannot run here is listed with the reason)",
            _USAGE_ERROR,
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


def _add_check(commands: Any) -> None:
    check = commands.add_parser(
        "check",
        help="put a sampler through the conformance battery",
        description=_wrap(
            "Run every check family (contract, support, exact, fit, efficiency, robustness, shapes) on the sampler "
            "named by SPEC and print the verdict; a tree sampler (contract = 'tree', docs/trees.md) gets the trees "
            "family instead, run in this process. Statistical checks share one family-wise false-positive budget and "
            "each states the smallest deviation (total variation) it detects with probability 0.99."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_run_options(
        check,
        what="sampler",
        spec_help="the sampler as 'package.module:attribute' (a sampler or a zero-argument factory)",
        only_example="'fit.*', 'fit.conditional[*]'",
        timeout_help="seconds one sampler call may take before it is a hang (default: the first calls get 120 s, "
        "later ones a limit scaled to the sampler's measured speed; 5 s plus that once a call has hung)",
        in_process_help="call the sampler in the harness's own process and thread, for debugging with pdb: "
        "a crash then ends the harness and no call is timed (default: a supervised process of its own)",
    )
    check.add_argument("--device", help="device for a sampler that declares none (default cpu)")
    check.add_argument(
        "--devices", metavar="LIST", help="one worker a device, in turn (cuda:0,cuda:1); overrides --device"
    )
    check.add_argument("--no-progress", action="store_true", help="no progress bar")
    check.add_argument("-q", "--quiet", action="store_true", help="print only the verdict line")


@dataclasses.dataclass(frozen=True)
class _SubjectCommand:
    """The words of a subcommand whose subject is called as itself (a loop, an engine): all that differs."""

    name: str
    help: str
    description: str
    epilog: str
    subject: str
    article: str
    only_example: str
    timeout_help: str


_SUBJECT_COMMANDS = (
    _SubjectCommand(
        name="loop",
        help="put a whole speculative generation loop through the loop family",
        description="Run the loop family (output, determinism, per-request seeds, warped laws of short generations "
        "by sampling parameters, pair laws over a long horizon) on the generation loop named by SPEC, declared "
        "with @specverify.loop (docs/loops.md), and print the verdict. The loop runs in a supervised process of "
        "its own: a crash, exit or hang of the loop fails the check it happened in and the run goes on.",
        epilog=LOOP_EPILOG,
        subject="loop",
        article="a",
        only_example="'loop.law[*]', 'loop.law[top-k]'",
        timeout_help="seconds the loop may go without calling a model (or returning) before it is a hang (default 120)",
    ),
    _SubjectCommand(
        name="engine",
        help="put an engine's own generate() through the engine family: speculation on against off",
        description="Run the engine family (output, determinism, greedy identity, and the law of whole "
        "generations by sampling parameters, by two-sample tests) on the engine named by SPEC, declared with "
        "@specverify.engine (docs/engines.md): its generate() with speculation on against itself with "
        "speculation off, the one oracle with no convention. The engine runs in a supervised process of its "
        "own: a crash, exit or hang fails the check it happened in and the run goes on.",
        epilog=ENGINE_EPILOG,
        subject="engine",
        article="an",
        only_example="'engine.law[*]', 'engine.greedy'",
        timeout_help="seconds one call of the engine (a batch of generations) may take before it is a hang "
        "(default 600)",
    ),
)


def _add_subject_command(commands: Any, words: _SubjectCommand) -> None:
    sub = commands.add_parser(
        words.name,
        help=words.help,
        description=_wrap(words.description),
        epilog=words.epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_run_options(
        sub,
        what=words.subject,
        spec_help=f"the {words.subject} as 'package.module:attribute' "
        f"({words.article} {words.subject} or a zero-argument factory)",
        only_example=words.only_example,
        timeout_help=words.timeout_help,
        in_process_help=f"run the {words.subject} in the harness's own process, for debugging with pdb: a crash "
        "then ends the harness (default: a supervised process of its own)",
    )
    sub.add_argument("-q", "--quiet", action="store_true", help="print only the verdict line")


def _add_report(commands: Any) -> None:
    report = commands.add_parser(
        "report",
        help="one HTML page comparing several runs (sampler by check family)",
        description=_wrap(
            "Render each run's JSON as its own HTML page and an index comparing them, sampler by check family."
        ),
        epilog=_exits(
            "report",
            "0  the pages and the index were written",
            "2  an input could not be read as a run's JSON (nothing is written)",
            _USAGE_ERROR,
        )
        + "\nexample:\n  specverify report a.json b.json -o reports/index.html\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    report.add_argument(
        "inputs", nargs="+", metavar="RUN.json", help="JSON results written by 'specverify check --json'"
    )
    report.add_argument(
        "-o", "--output", required=True, metavar="PATH", help="the index page to write (e.g. reports/index.html)"
    )


def _add_zoo(commands: Any) -> None:
    zoo = commands.add_parser(
        "zoo",
        help="run the known-bug zoo through the battery and print the kill matrix",
        description=_wrap(
            "Run every zoo member (known bugs, correct-but-different, suboptimal and lossy-by-design samplers) "
            "through the battery, print which family caught each and at what cost, count false alarms, and write "
            "the matrix to reports/kill-matrix/kill-matrix-BUDGET.md and .json, after every run (marked partial until "
            "the last one ends)."
        ),
        epilog=_exits(
            "zoo",
            "0  every member got its declared verdict (no false alarm, no bug missed at a budget it is due at)",
            "1  a false alarm, or a bug missed at a budget it is declared catchable at",
            "2  --members matches no zoo member (or a usage error)",
            "130 interrupted (Ctrl-C); the partial matrix of the runs that finished is written",
        )
        + "\nexample:\n  specverify zoo --budget quick --members 'nan-*' --jobs 2\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    zoo.add_argument(
        "--budget",
        choices=list(BUDGETS),
        default="standard",
        help="the budget every member runs at (default standard); a bug declared catchable at a larger budget "
        "is not counted as missed at a smaller one",
    )
    zoo.add_argument(
        "--tv",
        type=float,
        metavar="EPS",
        help="run every member at a budget sized for TV EPS (as check --tv); members below every preset's reach are "
        "judged by the verdict they declare at EPS; writes kill-matrix-tv-EPS.md",
    )
    zoo.add_argument("--seeds", type=int, default=1, help="run seeds per member (false alarms are counted over all)")
    zoo.add_argument("--members", action="append", metavar="PATTERN", help="glob on member names (repeatable)")
    zoo.add_argument("--jobs", type=int, default=1, help="processes to run members in parallel")
    zoo.add_argument(
        "--output",
        default="reports/kill-matrix",
        metavar="DIR",
        help="where to write the matrix (default reports/kill-matrix/)",
    )
    zoo.add_argument(
        "--timeout", type=float, default=60.0, help="seconds a sampler call may take before it is a hang (default 60)"
    )
    zoo.add_argument(
        "--loops",
        action="store_true",
        help="add the generation-loop members (named loop:NAME, e.g. --members 'loop:*') through the loop family, in a "
        "'loop' column",
    )


def _add_run_options(
    parser: argparse.ArgumentParser,
    *,
    what: str,
    spec_help: str,
    only_example: str,
    timeout_help: str,
    in_process_help: str,
) -> None:
    """The options 'check', 'loop' and 'engine' share: what to run, its budget and seed, where to write, how
    to isolate."""
    parser.add_argument("spec", metavar="SPEC", help=spec_help)
    parser.add_argument("--json", metavar="PATH", help="write the result as JSON, updated after every check")
    parser.add_argument("--report", metavar="PATH", help="write a self-contained HTML report")
    parser.add_argument("--seed", type=int, default=0, help="run seed; every random draw derives from it (default 0)")
    parser.add_argument(
        "--budget",
        choices=list(BUDGETS),
        default="standard",
        help="how small a deviation to detect: "
        + ", ".join(f"{name} TV {budget.tv:g}" for name, budget in BUDGETS.items())
        + " (default standard)",
    )
    parser.add_argument("--alpha", type=float, help="family-wise false-positive probability of the run (default 1e-4)")
    parser.add_argument(
        "--power",
        type=float,
        metavar="P",
        help="probability that each statistical check detects the budget's TV, in (0, 1) (default 0.99): "
        "every sample size follows from it, so a lower power is a shorter run with a weaker promise",
    )
    parser.add_argument(
        "--tv",
        type=float,
        metavar="EPS",
        help="a custom budget sized to detect TV EPS in (0, 1): the nearest preset's settings (or --budget's, when "
        "given), samples scaled by the power analysis, capped where a decision cannot reach EPS (its reach is stated)",
    )
    parser.add_argument(
        "--plan",
        action="store_true",
        help="print the plan and its estimated cost (a short calibration of the sampler), then exit 0",
    )
    parser.add_argument(
        "--max-time",
        type=float,
        metavar="SECONDS",
        help="stop before starting (exit 2) when the plan's estimated time exceeds SECONDS",
    )
    parser.add_argument(
        "--only",
        action="append",
        metavar="PATTERN",
        help=f"run only checks whose id or family matches (repeatable; globs, with [ ] literal: {only_example}); "
        f"a subset can fail a {what} but not pass it",
    )
    parser.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="sampler processes to spread the samples over, each isolated and supervised (default 1, or one a "
        "--devices entry); for a given --seed the counts, p-values and verdict do not depend on N",
    )
    parser.add_argument(
        "--executor",
        choices=["local", "ray"],
        default="local",
        help="run the workers as processes here (local, the default) or as Ray actors "
        "(ray: pip install 'speculative-verify[ray]')",
    )
    parser.add_argument(
        "--address",
        metavar="ADDR",
        help="the Ray cluster to run on (--executor ray; default: a local one started for the run)",
    )
    parser.add_argument("--timeout", type=float, metavar="SECONDS", help=timeout_help)
    parser.add_argument("--in-process", action="store_true", help=in_process_help)
