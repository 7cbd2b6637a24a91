"""A generation loop, called safely: in a supervised process of its own, or in this one.

Like a chain sampler (:mod:`specverify._calling`), a loop under test runs by default in the worker
of :mod:`specverify._worker`: a loop that exits, segfaults, is killed or hangs is a finding of the
check that called it, and the next call gets a fresh process.  The models it is given are the
harness's own (:class:`~specverify._loop.MarkovLM`); they travel as descriptions (their logits
table and context) and are rebuilt in the worker, which beats at every model call: a loop hangs
when it goes ``timeout`` seconds without calling a model or returning.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

import torch

from ._calling import importable_source, process_evidence
from ._contract import Violation
from ._layout import load_sampler
from ._evidence import Evidence
from ._loop import MarkovLM
from ._warp import SamplingParams
from ._worker import SamplerProcess, WorkerDied, WorkerHung, WorkerLoadError, WorkerRaised
from .errors import SamplerFault, SamplerSpecError

__all__ = ["DEFAULT_TIMEOUT", "LoopUnderTest"]

#: Seconds a loop may go without calling a model (or returning) before it is a hang.
DEFAULT_TIMEOUT = 120.0


class LoopUnderTest:
    """The loop the checks call, with the loop contract's signature.

    Args:
        loop: a loop (see :mod:`specverify._loop`) or its ``"module:attribute"`` spec.
        isolation: ``"process"`` (a supervised worker; a callable must be importable by name),
            ``"in-process"`` (this thread: for pdb, no protection) or ``"auto"``: a process when
            the loop can be loaded by name, else in-process with the reason in :attr:`reason`.
        timeout: seconds without a model call before an isolated loop is a hang.

    Raises:
        SamplerSpecError: the loop cannot be loaded, or its spec names no declared loop.
    """

    def __init__(self, loop: Callable[..., Any] | str, *, isolation: str = "auto", timeout: float | None = None) -> None:
        if isolation not in ("auto", "process", "in-process"):
            raise ValueError(f"isolation must be 'auto', 'process' or 'in-process', not {isolation!r}")
        self.timeout = DEFAULT_TIMEOUT if timeout is None else float(timeout)
        self.reason: str | None = None
        self.crashes = self.hangs = self.starts = 0
        self._process: SamplerProcess | None = None
        self._loop: Callable[..., Any] | None = None
        source = importable_source(loop) if isolation != "in-process" else "asked for (isolation='in-process', the CLI's --in-process)"
        if isinstance(source, str) and isolation == "process":
            raise SamplerSpecError(source)
        if isinstance(source, tuple):
            self.isolation = "process"
            self._process = SamplerProcess.acquire(source, None)
            info = self._load()
            self.name, self.parameters, contract = info["name"], tuple(info.get("parameters") or ()), info.get("contract")
        else:
            self.isolation, self.reason = "in-process", source
            self._loop = load_sampler(loop) if isinstance(loop, str) else loop
            self.name = getattr(self._loop, "name", None) or getattr(self._loop, "__qualname__", type(self._loop).__qualname__)
            self.parameters, contract = tuple(getattr(self._loop, "parameters", ("temperature",))), getattr(self._loop, "contract", None)
        if isinstance(loop, str) and contract != "loop":  # a callable passed in is taken for a loop
            self.close()
            raise SamplerSpecError(f"{loop!r} is not a generation loop: declare it with @specverify.loop (docs/loops.md)")
        self.contract = "loop"

    def _load(self) -> dict[str, Any]:
        assert self._process is not None
        self.starts += 1
        try:
            return self._process.start()
        except WorkerLoadError as exc:
            self._process.kill()
            raise SamplerSpecError(str(exc)) from None

    def __call__(
        self, target: MarkovLM, draft: MarkovLM, prompt: torch.Tensor, num_tokens: int, params: SamplingParams, generator: torch.Generator
    ) -> Any:
        if self._process is None:
            assert self._loop is not None
            try:
                return self._loop(target, draft, prompt, num_tokens, params, generator)
            except Exception as exc:  # noqa: BLE001 - everything the loop raises is evidence
                trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-8))
                raise SamplerFault(Violation("raised", f"the loop raised {type(exc).__name__}: {_first_line(str(exc))}"), {"traceback": trace}) from exc
        if not self._process.alive():  # it died or hung in an earlier call: a fresh one
            try:
                self._load()
            except SamplerSpecError as exc:
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
            output, _ = self._process.call_loop(request, limit=self.timeout)
        except WorkerRaised as exc:
            raise SamplerFault(Violation("raised", f"the loop raised {exc.type_name}: {exc.text}"), self._evidence(exc.trace)) from None
        except WorkerHung as exc:
            self.hangs += 1
            message = f"the loop made no model call and did not return within {exc.limit:g} s (after {exc.calls} model calls); its process was killed"
            raise SamplerFault(Violation("hang", message), self._evidence()) from None
        except WorkerDied as exc:
            self.crashes += 1
            raise SamplerFault(Violation("crashed", f"the loop's process died (after {exc.calls} model calls): {exc.how}"), self._evidence()) from None
        return output

    def _evidence(self, trace: str | None = None) -> Evidence:
        return process_evidence(self._process, trace)

    def info(self) -> dict[str, Any]:
        """What ``run["isolation"]`` records."""
        return {"mode": self.isolation, "reason": self.reason, "timeout": self.timeout if self.isolation == "process" else None,
                "crashes": self.crashes, "hangs": self.hangs, "worker_starts": self.starts}

    def close(self) -> None:
        """Keep the worker for the next run of this harness (or end it if it died)."""
        if self._process is not None:
            self._process.release()
            self._process = None

    def kill(self) -> None:
        """End the worker at once (a run interrupted mid-call: its reply must not reach the next)."""
        if self._process is not None:
            self._process.kill()
            self._process = None


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else "(no message)"
