"""Calling a subject that is called as itself (a generation loop, an engine), in its supervised process or in this one.

Like a chain sampler, such a subject runs by default in the worker of :mod:`specverify._worker`: one
that exits, segfaults, is killed or hangs is a finding of the check that called it, and the next call
gets a fresh process.  What a call sends and how the worker calls the subject on it are its kind's
(:meth:`specverify._kinds.Kind.request`, :meth:`~specverify._kinds.Kind.serve`: a loop's models travel
as descriptions and are rebuilt there, beating at every model call; an engine beats once a call),
so this track is the same for every such kind: :class:`DirectCalls` are the calls
:class:`specverify._calling.sut.SamplerUnderTest` makes of it.
"""

from __future__ import annotations

import time
import traceback
from typing import Any

from .._contract import Violation
from .._worker import WorkerDied, WorkerHung, WorkerRaised
from ..errors import SamplerFault, SamplerSpecError
from .supervised import Supervised

__all__ = ["DirectCalls"]


class DirectCalls(Supervised):
    """The calls of a subject called as itself, with its contract's signature, as the sampler under
    test makes them: a loop (or engine) under test is called as the loop (or engine) itself would be."""

    reason: str | None  # why it runs in this process, where it does

    @property
    def parameters(self) -> tuple[str, ...]:
        """The sampling parameters the subject declares it honours."""
        return tuple(getattr(self.kind, "parameters", ()))

    def __call__(self, *args: Any) -> Any:
        """One call, timed: its seconds (the subject's own, with the model calls it makes; in a
        worker, the round trip too) are the subject's share of the run's time."""
        started = time.perf_counter()
        try:
            return self._called_as_itself(*args)
        finally:
            self.calls += 1
            self.seconds += time.perf_counter() - started

    def _called_as_itself(self, *args: Any) -> Any:
        noun = self.kind.noun
        if self._process is None:
            assert self.sampler is not None
            try:
                return self.sampler(*args)
            except Exception as exc:  # noqa: BLE001 - everything the subject raises is evidence
                trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-8))
                raise SamplerFault(
                    Violation("raised", f"the {noun} raised {type(exc).__name__}: {_first_line(str(exc))}"),
                    {"traceback": trace},
                ) from exc
        if not self._process.alive():  # it died or hung in an earlier call: a fresh one
            self.worker_starts += 1
            try:
                self._load()
            except SamplerSpecError as exc:
                self._process.kill()
                message = f"the {noun}'s process could not be restarted: {exc}"
                raise SamplerFault(Violation("crashed", message)) from None
        try:
            output, _ = self._process.call_direct(self.kind.verb, self.kind.request(*args), limit=self.limit(0))
        except WorkerRaised as exc:
            raise SamplerFault(
                Violation("raised", f"the {noun} raised {exc.type_name}: {exc.text}"), self._evidence(exc.trace)
            ) from None
        except WorkerHung as exc:
            self.hangs += 1
            message = (
                f"the {noun} made no model call and did not return within {exc.limit:g} s (after {exc.calls} model "
                "calls); its process was killed"
            )
            raise SamplerFault(Violation("hang", message), self._evidence()) from None
        except WorkerDied as exc:
            self.crashes += 1
            raise SamplerFault(
                Violation("crashed", f"the {noun}'s process died (after {exc.calls} model calls): {exc.how}"),
                self._evidence(),
            ) from None
        return output

    def info(self) -> dict[str, Any]:
        """What ``run["isolation"]`` records of a subject called as itself."""
        return {
            "mode": self.isolation,
            "reason": self.reason,
            "timeout": self.timeout if self.isolation == "process" else None,
            "crashes": self.crashes,
            "hangs": self.hangs,
            "worker_starts": self.worker_starts,
        }


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else "(no message)"
