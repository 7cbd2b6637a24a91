"""The harness's words: check statuses, findings and verdicts, each with what it carries.

One place says what a status, a finding or a verdict means, how severe it is, the exit code it
gives and how it is shown; the results, the CLI and the report read them from here.  Each is a
``str`` enum: its members equal the strings the JSON has always held (``Verdict.LOSSY == "lossy"``),
so the schema and every comparison with a string stay as they were.  No torch here: the report
renders from JSON without it.
"""

from __future__ import annotations

import enum

__all__ = ["Finding", "Status", "Verdict", "lossless"]


class _Word(str, enum.Enum):
    """A word of the harness: compares, hashes, prints and serialises as its string."""

    def __str__(self) -> str:
        return str(self.value)


class Status(_Word):
    """What one check concluded."""

    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"
    INCONCLUSIVE = "inconclusive"
    ERROR = "error"
    #: A law difference on an event too rare to move the emitted law by the resolution (1e-9):
    #: shown on its own, never a failure (specverify.checks._event).
    FLOAT_EDGE = "float-edge"

    @property
    def severity(self) -> int:
        """Rank in a report, the most severe first: a failure, then what the harness could not run."""
        return _STATUS_SEVERITY[self]

    @property
    def style(self) -> str:
        """How the CLI shows it (rich markup)."""
        return _STATUS_STYLE[self]


class Finding(_Word):
    """What a failing check proves, the most severe first."""

    CONTRACT = "contract"
    SUPPORT = "support"
    RENORMALISATION = "renormalisation"
    LOSS = "loss"
    NON_CANONICAL = "non-canonical"
    SUBOPTIMAL = "suboptimal"

    @property
    def text(self) -> str:
        """The finding in a phrase: "the sampler ..."."""
        return _FINDING_TEXT[self]


class Verdict(_Word):
    """What a run concluded of the sampler."""

    CONFORMANT = "conformant"
    LOSSLESS_SUBOPTIMAL = "lossless-suboptimal"
    LOSSY = "lossy"
    NON_CONFORMANT = "non-conformant"
    INCONCLUSIVE = "inconclusive"
    ERROR = "error"

    @property
    def exit_code(self) -> int:
        """The CLI's exit status: 0 lossless, 1 not lossless, 2 the harness could not run, 3 undecided."""
        return _EXIT_CODE[self]

    @property
    def lossless(self) -> bool:
        """Whether it says the sampler preserves the target's law (exit 0)."""
        return self in (Verdict.CONFORMANT, Verdict.LOSSLESS_SUBOPTIMAL)

    @property
    def severity(self) -> int:
        """How bad it says the sampler is, 0 (conformant) to 3 (non-conformant; an error ranks with
        it): a run that ranks a sampler worse than it is declared is a false alarm, better a miss."""
        return _VERDICT_SEVERITY[self]

    @property
    def text(self) -> str:
        """The verdict in a sentence, as the report leads with it."""
        return _VERDICT_TEXT[self]

    @property
    def style(self) -> str:
        """How the CLI shows it (rich markup)."""
        return _VERDICT_STYLE[self]


def lossless(verdict: object) -> bool:
    """Whether ``verdict`` (a :class:`Verdict`, or the string a JSON result holds; anything else is
    no verdict) says the sampler preserves the target's law: what a run may pass with (exit 0)."""
    return isinstance(verdict, str) and verdict in Verdict._value2member_map_ and Verdict(verdict).lossless


_STATUS_SEVERITY = {
    Status.FAIL: 0,
    Status.ERROR: 1,
    Status.INCONCLUSIVE: 2,
    Status.FLOAT_EDGE: 3,
    Status.SKIP: 4,
    Status.PASS: 5,
}
_STATUS_STYLE = {
    Status.PASS: "green",
    Status.FAIL: "bold red",
    Status.SKIP: "dim",
    Status.INCONCLUSIVE: "yellow",
    Status.ERROR: "bold magenta",
    Status.FLOAT_EDGE: "cyan",
}
_FINDING_TEXT = {
    Finding.CONTRACT: "broke the sampler contract",
    Finding.SUPPORT: "emitted a token of target probability 0",
    Finding.LOSS: "emitted tokens do not follow the target's law",
    Finding.NON_CANONICAL: "law given the drafts differs from the canonical algorithm's",
    Finding.SUBOPTIMAL: "accepts fewer drafts than the canonical algorithm",
    Finding.RENORMALISATION: "does not renormalise its inputs, though it declares unnormalised=True",
}
_EXIT_CODE = {
    Verdict.CONFORMANT: 0,
    Verdict.LOSSLESS_SUBOPTIMAL: 0,
    Verdict.LOSSY: 1,
    Verdict.NON_CONFORMANT: 1,
    Verdict.ERROR: 2,
    Verdict.INCONCLUSIVE: 3,
}
_VERDICT_SEVERITY = {
    Verdict.CONFORMANT: 0,
    Verdict.LOSSLESS_SUBOPTIMAL: 1,
    Verdict.INCONCLUSIVE: 1,
    Verdict.LOSSY: 2,
    Verdict.NON_CONFORMANT: 3,
    Verdict.ERROR: 3,
}
_VERDICT_TEXT = {
    Verdict.CONFORMANT: "Lossless and optimal: no check found a deviation from the canonical algorithm.",
    Verdict.LOSSLESS_SUBOPTIMAL: "Lossless, but it accepts fewer drafts than the canonical algorithm.",
    Verdict.LOSSY: "Not lossless: the tokens it emits do not follow the target model's distribution.",
    Verdict.NON_CONFORMANT: "Not lossless: it broke the sampler contract or emitted a token the target gives "
    "probability 0.",
    Verdict.INCONCLUSIVE: "Undecided: the evidence does not settle it (a check short of its promised power, a subset "
    "of the battery, or no target-law test where the sampler differs).",
    Verdict.ERROR: "Undecided: the harness could not run every check (see the errors below).",
}
_VERDICT_STYLE = {
    Verdict.CONFORMANT: "bold green",
    Verdict.LOSSLESS_SUBOPTIMAL: "bold yellow",
    Verdict.LOSSY: "bold red",
    Verdict.NON_CONFORMANT: "bold red",
    Verdict.INCONCLUSIVE: "bold yellow",
    Verdict.ERROR: "bold magenta",
}
