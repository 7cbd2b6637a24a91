"""Calling a sampler of the loop kind: a whole generation loop, in its supervised process or in this one.

Like a chain sampler, a loop under test runs by default in the worker of :mod:`specverify._worker`:
a loop that exits, segfaults, is killed or hangs is a finding of the check that called it, and the
next call gets a fresh process.  The models it is given are the harness's own
(:class:`~specverify._loop.MarkovLM`); they travel as descriptions (their logits table and context)
and are rebuilt in the worker, which beats at every model call: a loop hangs when it goes
``timeout`` seconds without calling a model or returning.  :class:`LoopCalls` are the calls
:class:`specverify._calling.sut.SamplerUnderTest` makes of a loop (a sampler under test of the loop kind).
"""

from __future__ import annotations

import time
import traceback
from typing import Any

import torch

from .._contract import Violation
from .._loop import MarkovLM
from .._warps.rules import SamplingParams
from .._worker import WorkerDied, WorkerHung, WorkerRaised
from ..errors import SamplerFault, SamplerSpecError
from .supervised import Supervised

__all__ = ["LoopCalls"]


class LoopCalls(Supervised):
    """The calls of a generation loop, with the loop contract's signature, as the sampler under
    test makes them: a loop under test is called as the loop itself would be."""

    reason: str | None  # why it runs in this process, where it does

    @property
    def parameters(self) -> tuple[str, ...]:
        """The sampling parameters the loop declares it honours."""
        return tuple(getattr(self.kind, "parameters", ()))

    def __call__(
        self,
        target: MarkovLM,
        draft: MarkovLM,
        prompt: torch.Tensor,
        num_tokens: int,
        params: SamplingParams,
        generator: torch.Generator,
    ) -> Any:
        """One generation, timed: its seconds (the loop's own, with the model calls it makes; in a
        worker, the round trip too) are the sampler's share of the run's time."""
        started = time.perf_counter()
        try:
            return self._generate(target, draft, prompt, num_tokens, params, generator)
        finally:
            self.calls += 1
            self.seconds += time.perf_counter() - started

    def _generate(
        self,
        target: MarkovLM,
        draft: MarkovLM,
        prompt: torch.Tensor,
        num_tokens: int,
        params: SamplingParams,
        generator: torch.Generator,
    ) -> Any:
        if self._process is None:
            assert self.sampler is not None
            try:
                return self.sampler(target, draft, prompt, num_tokens, params, generator)
            except Exception as exc:  # noqa: BLE001 - everything the loop raises is evidence
                trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-8))
                raise SamplerFault(
                    Violation("raised", f"the loop raised {type(exc).__name__}: {_first_line(str(exc))}"),
                    {"traceback": trace},
                ) from exc
        if not self._process.alive():  # it died or hung in an earlier call: a fresh one
            self.worker_starts += 1
            try:
                self._load()
            except SamplerSpecError as exc:
                self._process.kill()
                raise SamplerFault(Violation("crashed", f"the loop's process could not be restarted: {exc}")) from None
        request = {
            "target": ("markov", target.logits, target.context),
            "draft": ("markov", draft.logits, draft.context),
            "prompt": prompt,
            "num_tokens": num_tokens,
            "params": params,
            "generator": generator.get_state(),
        }
        try:
            output, _ = self._process.call_loop(request, limit=self.limit(0))
        except WorkerRaised as exc:
            raise SamplerFault(
                Violation("raised", f"the loop raised {exc.type_name}: {exc.text}"), self._evidence(exc.trace)
            ) from None
        except WorkerHung as exc:
            self.hangs += 1
            message = (
                f"the loop made no model call and did not return within {exc.limit:g} s (after {exc.calls} model "
                "calls); its process was killed"
            )
            raise SamplerFault(Violation("hang", message), self._evidence()) from None
        except WorkerDied as exc:
            self.crashes += 1
            raise SamplerFault(
                Violation("crashed", f"the loop's process died (after {exc.calls} model calls): {exc.how}"),
                self._evidence(),
            ) from None
        return output

    def info(self) -> dict[str, Any]:
        """What ``run["isolation"]`` records of a loop."""
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
