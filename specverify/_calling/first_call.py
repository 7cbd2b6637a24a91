"""The subject called once, as its kind's contract says, on a tiny case before the battery.

A sampler that cannot be called as declared (a function of two arguments, a logits sampler without
``params``, one that returns a single tensor or ``None``) would fail every check of the battery the
same way; that is a usage error, told once in one line with the contract's signature, before any
check runs (the CLI exits 2).  Only two failures of this one call are that: a ``TypeError`` raised
by the call itself, before the subject's own code ran (its innermost frame is the harness's call),
and an output that is not of the contract's type (not a pair of tensors; for a loop, not a tensor).
Anything else the subject does on the tiny case (it raises in its own code, crashes, hangs, returns
wrong shapes, dtypes or ids) is a finding, which the battery's checks report: this call ignores it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

from ..errors import SamplerFault, SamplerSpecError

__all__ = ["first_call"]

# Where the harness makes its calls of a subject: a TypeError whose innermost frame is here was
# raised by the call itself (the arguments do not fit), not by the subject's code.
_HARNESS = Path(__file__).resolve().parent.parent  # the package
_CALLERS = tuple(str(_HARNESS / part) for part in ("_calling", "_worker", "_kinds"))
_LAST_FRAME = re.compile(r'^\s*File "([^"]+)", line \d+', re.M)
# The audit's words for an output that is not of the contract's type (specverify._contract.malformed_pair,
# specverify._kinds.loop): a shape, dtype or id is a finding, a wrong type is not a sampler at all.
_NOT_THE_TYPE = re.compile(
    r"^(returned .*, expected a \(\w+, \w+\) pair"
    r"|\w+ is .*, expected a torch\.Tensor"
    r"|the loop returned a (?!tensor)\w+,)"
)


def first_call(subject: Any, spec: str | None = None) -> None:
    """Call ``subject`` (a :class:`~specverify._calling.sut.SamplerUnderTest`) once on a tiny case of its
    kind.  It is a call like any other: counted (a process's third call is "call 3"), timed, and a
    hang or a crash in it is recorded with the run's isolation.

    A subject called so already (the CLI calls it before importing the battery,
    :mod:`specverify._cli.early`) is not called again: the run makes its first call once.

    Raises:
        SamplerSpecError: it cannot be called as its kind's contract says, in one line naming the
            contract's signature.
    """
    if getattr(subject, "first_called", False):
        return
    subject.first_called = True
    try:
        _call(subject)
    except SamplerFault as fault:
        problem = _usage_problem(fault)
        if problem is not None:
            kind = subject.kind
            raise SamplerSpecError(
                f"{spec or subject.name} cannot be called as {kind.called_as} ({problem}); "
                f"declare it as the contract says: {kind.signature} ({kind.contract_doc})"
            ) from None


def _call(subject: Any) -> None:
    """One call on the smallest case of the subject's kind: K = 1 draft, V = 2 tokens, one row (the
    kind poses it: :meth:`~specverify._kinds.Kind.call_once`)."""
    target = torch.tensor([[[0.5, 0.5], [0.25, 0.75]]], dtype=torch.float64)
    draft = torch.tensor([[[0.75, 0.25]]], dtype=torch.float64)
    drafts = torch.tensor([[0]], dtype=torch.int64)
    subject.kind.call_once(subject, target, draft, drafts)


def _usage_problem(fault: SamplerFault) -> str | None:
    """What makes the fault a usage error (the call itself failed, or the output is not of the
    contract's type), in words; ``None`` for a finding."""
    message = fault.violation.message
    if fault.violation.rule == "raised" and "raised TypeError" in message:
        frames = _LAST_FRAME.findall(str(fault.details.get("traceback") or ""))
        if frames and str(Path(frames[-1]).resolve()).startswith(_CALLERS):
            return f"the call raised {message.split(' raised ', 1)[1]}"
    if _NOT_THE_TYPE.match(message):
        return f"it {message}" if message.startswith("returned") else message
    return None
