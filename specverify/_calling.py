"""Calling a sampler under test: its process, placement, batching, time limits and an exact audit
of every output.

Every call the harness makes goes through :class:`SamplerUnderTest`, so whatever check is running,
an output that breaks the contract (shape, dtype, device, padding, range, accepted tokens that are
not the drafts, a token of target probability 0, an input modified in place), an exception, a hang
or the death of the sampler's process stops that check with a :class:`SamplerFault` that says
exactly what happened, and the run goes on.

By default (``isolation="process"``) the sampler runs in a supervised process of its own
(:mod:`specverify._worker`); ``isolation="in-process"`` calls it in the caller's thread, for
debugging with pdb: nothing then guards the harness against a crash, and no call is timed.
Experiments that make a run of independent calls use :meth:`SamplerUnderTest.steps`: isolated,
each call is sent before the previous output is audited and tallied, so the two processes work at
once.
"""

from __future__ import annotations

import collections
import dataclasses
import importlib
import inspect
import queue
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

from ._contract import Capabilities, Violation, capabilities_of, name_of
from ._evidence import Evidence
from ._layout import ChainLayout, StepInputs, StepLayout, layout_of, load_sampler
from ._reach import ReachRecorder
from ._worker import PendingCall, SamplerProcess, WorkerDied, WorkerHung, WorkerLoadError, WorkerRaised, identity, unchanged
from .errors import SamplerFault, SamplerSpecError

__all__ = ["CallLimit", "SamplerFault", "SamplerUnderTest", "importable_source", "check_device"]

#: Rows per call when the sampler declares no ``max_batch``: bounds the harness's memory.
DEFAULT_CHUNK = 65_536
#: An unbatched sampler's outputs are audited together, this many rows at a time.
UNBATCHED_AUDIT_ROWS = 4_096


def check_device(device: str | None) -> None:
    """Raise :class:`SamplerSpecError` with one line if ``device`` is not usable here."""
    if device is None:
        return
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise SamplerSpecError(f"--device {device!r} is not a torch device (cpu, cuda, cuda:1, mps, ...)") from exc
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise SamplerSpecError(f"device {device!r}: torch sees no CUDA device here")
    if parsed.type == "cuda" and parsed.index is not None and parsed.index >= torch.cuda.device_count():
        raise SamplerSpecError(f"device {device!r}: torch sees {torch.cuda.device_count()} CUDA device(s) here")
    if parsed.type not in ("cpu", "cuda", "meta"):
        try:
            torch.empty(1, device=parsed)
        except Exception as exc:  # noqa: BLE001 - any backend's refusal is the answer
            raise SamplerSpecError(f"device {device!r} is not available here: {exc}") from exc
    if parsed.type == "meta":
        raise SamplerSpecError("device 'meta' holds no data; a sampler cannot be checked on it")


def importable_source(sampler: Any, spec: str | None = None) -> tuple[str, ...] | str:
    """How a worker process can load this sampler (a source), or why it cannot (a reason).

    A spec string loads as such; a callable loads by reference when its module and name (or
    ``spec``'s attribute, read without calling a factory) find this very object again.
    """
    if isinstance(sampler, str):
        return ("spec", sampler)
    candidates = []
    if spec and ":" in spec:
        module, _, attr = spec.partition(":")
        candidates.append((module, attr))
    home: str | None = getattr(sampler, "__module__", None)
    qualname = getattr(sampler, "__qualname__", None) if inspect.isfunction(sampler) or inspect.isclass(sampler) else None
    if home and qualname:
        candidates.append((home, qualname))
    if home in sys.modules:
        candidates += [(home, name) for name, value in vars(sys.modules[home]).items() if value is sampler and not name.startswith("__")]
    for module, attr in candidates:
        if module == "__main__" or "<locals>" in attr or "<lambda>" in attr:
            continue
        try:
            found: Any = importlib.import_module(module)
            for part in attr.split("."):
                found = getattr(found, part)
        except Exception:  # noqa: BLE001 - not importable this way: try the next
            continue
        if found is sampler:
            return ("ref", module, attr)
    return (
        "the sampler cannot be imported by name in another process (a closure, a lambda, an object "
        "built at run time, or defined in __main__): give its 'module:attribute' spec to run it isolated"
    )


class CallLimit:
    """How long one call may take before it is a hang.

    A fixed ``timeout`` is that limit for every call.  Otherwise a call before the sampler's speed
    is known gets ``first`` seconds; later ones ``first + SAFETY x`` the time the call should take:
    the smallest call's time (the fixed cost) plus the steepest cost per input element seen so far
    beyond it, on calls of at least :attr:`MEASURED_ELEMENTS` elements (smaller ones are fixed cost
    and jitter; a worker's first call aside: it may compile), scaled to this call's elements.  So a
    slow sampler is given the time its size needs, and small calls' fixed costs do not inflate the
    limit of large ones.  After a hang the floor drops to ``short``, so a sampler that hangs on
    every call is through the battery in minutes.
    """

    SAFETY = 10.0
    MEASURED_ELEMENTS = 65_536

    def __init__(self, *, timeout: float | None, first: float, short: float = 5.0) -> None:
        self.timeout, self.first, self.short = timeout, first, short
        self.fixed: float | None = None  # seconds of the fastest call
        self.per_element = 0.0  # seconds per input element beyond the fixed cost, the most seen
        self.hung = False

    def __call__(self, elements: int) -> float:
        if self.timeout is not None:
            return self.timeout
        floor = self.short if self.hung else self.first
        if self.fixed is None:
            return floor
        return floor + self.SAFETY * (self.fixed + self.per_element * elements)

    def observe(self, elements: int, seconds: float, *, warm: bool) -> None:
        if not warm and self.fixed is not None:
            return  # a fresh worker's first call may compile: it says nothing of the speed
        self.fixed = seconds if self.fixed is None else min(self.fixed, seconds)
        if elements >= self.MEASURED_ELEMENTS:
            self.per_element = max(self.per_element, (seconds - self.fixed) / elements)


class Supervised:
    """What a sampler under test (chain or tree) shares: its call limit, its process (or none, in
    process) and the evidence a fault keeps (the sampler's traceback and last output)."""

    limit: CallLimit
    last_fault: SamplerFault | None
    device: torch.device
    hangs: int
    crashes: int
    worker_starts: int  # processes the sampler was loaded into: 1 + restarts after a crash or hang
    _warm: bool
    _process: SamplerProcess | None

    @property
    def timeout(self) -> float | None:
        return self.limit.timeout

    @property
    def on_wait(self) -> Callable[[float, float], None] | None:
        """Called with (seconds waited, limit) while a call is slow (isolated only)."""
        return self._process.on_wait if self._process is not None else None

    @on_wait.setter
    def on_wait(self, callback: Callable[[float, float], None] | None) -> None:
        if self._process is not None:
            self._process.on_wait = callback

    def _load(self) -> dict[str, Any]:
        assert self._process is not None
        try:
            return self._process.start()
        except WorkerLoadError as exc:
            raise SamplerSpecError(str(exc)) from None

    def hand_over(self) -> SamplerProcess | None:
        """The process that loaded the sampler, given up to a sampler under test of another
        contract (:func:`specverify._runner.load_sut`), so the sampler is not imported and built twice."""
        process, self._process = self._process, None
        return process

    def close(self) -> None:
        """End the sampler's process (or keep it, idle, for the next run of this harness)."""
        if self._process is not None:
            self._process.release()

    def kill(self) -> None:
        """End the sampler's process now (Ctrl-C)."""
        if self._process is not None:
            self._process.kill()

    def generator(self, seed: int) -> torch.Generator:
        """A generator on the sampler's device, seeded."""
        return torch.Generator(device=self.device).manual_seed(seed)

    def _fresh_process(self) -> None:
        """Start the sampler's process afresh where it died or hung in an earlier call (its first
        call may compile, so it is not timed as warm)."""
        assert self._process is not None
        if self._process.alive() or self._process.in_flight:
            return
        self._warm = False
        self.worker_starts += 1
        try:
            self._process.start()
        except WorkerLoadError as exc:
            raise self._fault(Violation("crashed", f"the sampler's process could not be restarted: {exc}")) from None

    def _worker_fault(self, exc: WorkerRaised | WorkerHung | WorkerDied, first_call: int, where: str) -> SamplerFault:
        """The fault a call's end in the sampler's process is: it raised, hung (and was killed), or died."""
        if isinstance(exc, WorkerRaised):
            return self._fault(Violation("raised", f"the sampler raised {exc.type_name}: {exc.text}"), self._evidence(trace=exc.trace))
        if isinstance(exc, WorkerHung):
            self.hangs += 1
            self.limit.hung = True
            message = f"the sampler did not return within {exc.limit:g} s (call {first_call + exc.calls}: {where}); its process was killed"
            return self._fault(Violation("hang", message), self._evidence())
        self.crashes += 1
        return self._fault(Violation("crashed", f"the sampler's process died in call {first_call + exc.calls} ({where}): {exc.how}"), self._evidence())

    def _fault(self, violation: Violation, details: Evidence | None = None) -> SamplerFault:
        self.last_fault = SamplerFault(violation, details)
        return self.last_fault

    def _evidence(self, trace: str | None = None) -> Evidence:
        return process_evidence(self._process, trace)


def process_evidence(process: SamplerProcess | None, trace: str | None = None) -> Evidence:
    """What a fault keeps to debug it: the traceback, and the last 16 KiB the sampler printed."""
    evidence: Evidence = {"traceback": trace} if trace else {}
    output = process.output() if process is not None else ""
    if output:
        evidence["sampler_output"] = output[-16_384:]
    return evidence


class SamplerUnderTest(Supervised):
    """A sampler with its capabilities, called safely.

    Args:
        sampler: the callable under test, or its ``"package.module:attribute"`` spec.
        device: where to put inputs when the sampler does not declare a device.
        timeout: seconds one call may take before it counts as a hang; ``None`` derives the
            limit from the sampler's measured speed (:class:`CallLimit`).
        first_timeout: the limit of a call before the sampler's speed is known.
        isolation: ``"process"`` (the sampler runs in a supervised process of its own; a callable
            must be importable by name, see :func:`importable_source`) or ``"in-process"``.
        spec: the sampler's spec, tried to load a callable by name.
        timed: in-process only: make calls in a helper thread, so a hang is abandoned at its limit
            (``False``: in the caller's thread, untimed, so ``breakpoint()`` works).

    Raises:
        SamplerSpecError: the sampler cannot be loaded (import or factory failure, bad device).
    """

    def __init__(
        self,
        sampler: Callable[..., Any] | str,
        *,
        device: str | None = None,
        timeout: float | None = None,
        first_timeout: float = 120.0,
        isolation: str = "in-process",
        spec: str | None = None,
        timed: bool = True,
    ) -> None:
        if isolation not in ("process", "in-process"):
            raise ValueError(f"isolation must be 'process' or 'in-process', not {isolation!r}")
        check_device(device)
        self.isolation = isolation
        self.limit = CallLimit(timeout=timeout, first=first_timeout)
        self.calls = 0
        self.rows = 0
        self.seconds = 0.0  # the sampler's own time, measured around its calls
        self.crashes = 0
        self.hangs = 0
        self.last_fault: SamplerFault | None = None
        self.reach = ReachRecorder()  # what the sampler is given, reset by the runner per check
        self._process: SamplerProcess | None = None
        self._thread: _CallThread | None = None
        self._staging = _Staging()
        self.timed = timed
        self._warm = False
        self.worker_starts = 0
        if isolation == "process":
            source = importable_source(sampler, spec)
            if isinstance(source, str):
                raise SamplerSpecError(source)
            self.sampler: Callable[..., Any] | None = None
            self._process = SamplerProcess.acquire(source, device)
            info = self._load()
            self.worker_starts = 1
            self.name = info["name"]
            self.capabilities: Capabilities = info["capabilities"]
            self.device = torch.device(info["device"])
            self.contract: str = info.get("contract", "step")  # "tree": the runner puts it through the trees family
        else:
            self.sampler = load_sampler(sampler) if isinstance(sampler, str) else layout_of(sampler).posed(sampler)
            self.name = name_of(self.sampler)
            self.capabilities = capabilities_of(self.sampler)
            self.contract = getattr(self.sampler, "contract", "step")
            self.device = torch.device(self.capabilities.device or device or "cpu")
            check_device(str(self.device))
        self.dtype = self.capabilities.dtypes[0]
        self.layout: StepLayout[Any] = layout_of(self)  # how its outputs are audited and coded

    def step(
        self,
        target_probs: torch.Tensor,
        draft_probs: torch.Tensor,
        draft_tokens: torch.Tensor,
        *,
        generator: torch.Generator | None = None,
        uniforms: torch.Tensor | None = None,
        dtype: torch.dtype | None = None,
        seeds: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run the sampler over a batch of any size; outputs audited, returned on the CPU.

        Larger batches are split into calls of the sampler's ``max_batch`` (one row per call for
        an unbatched sampler); the same generator is passed to every call, as an engine would.
        ``seeds`` (int64 ``[B]``) are per-request seeds, for a logits sampler that declares them.
        """
        batch, k = draft_tokens.shape
        if batch == 0:
            return torch.empty((0, k + 1), dtype=torch.int64), torch.empty(0, dtype=torch.int64)
        dtype = dtype or self.dtype
        if self._process is not None and self.capabilities.batched and uniforms is None and seeds is None:
            (output,) = self.steps([(target_probs, draft_probs, draft_tokens)], generator=generator, dtype=dtype)  # its chunks overlap
            return output
        chunk, per_row = self._chunking()
        outputs = []
        for rows, parts in self._chunks(target_probs, draft_probs, draft_tokens, uniforms, seeds, chunk):  # chunks of rows, not rows
            if self._process is not None:
                outputs.append(self._finish(self._send(parts, dtype, generator, per_row=per_row, start=rows.start)))
            else:
                outputs.append(self._direct(parts, dtype, generator, per_row=per_row, start=rows.start))
        if len(outputs) == 1:
            return outputs[0][0].to("cpu"), outputs[0][1].to("cpu")
        return torch.cat([o[0] for o in outputs]).to("cpu"), torch.cat([o[1] for o in outputs]).to("cpu")

    def steps(
        self,
        batches: Iterable[tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
        *,
        generator: torch.Generator | None = None,
        dtype: torch.dtype | None = None,
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """:meth:`step` on each of ``batches`` (target, draft probabilities, draft tokens) in turn:
        the same calls, generator and outputs, so the same results in either isolation.

        Isolated, the next call is staged and sent before this one's output is audited and handed
        back, so the harness's work on an output (the audit, the caller's tally, the next batch)
        overlaps the sampler's next call on another core.  ``batches`` is therefore read one call
        ahead of the outputs: a batch must not depend on an earlier batch's output, nor draw from a
        generator the caller also draws from on outputs.  Leaving the loop early waits for the
        call in flight and drops its output.
        """
        if self._process is None or not self.capabilities.batched:
            for target, draft, drafts in batches:
                yield self.step(target, draft, drafts, generator=generator, dtype=dtype)
            return
        dtype = dtype or self.dtype
        chunk, _ = self._chunking()
        flying: collections.deque[_Flight] = collections.deque()
        done: list[tuple[torch.Tensor, torch.Tensor]] = []  # the oldest unfinished batch's outputs so far
        try:
            for target, draft, drafts in batches:
                if drafts.shape[0] == 0:
                    while flying:
                        output = self._landed(flying, done)
                        if output is not None:
                            yield output
                    yield self.step(target, draft, drafts)
                    continue
                for rows, parts in self._chunks(target, draft, drafts, None, None, chunk):
                    if len(flying) == 2:
                        output = self._landed(flying, done)
                        if output is not None:
                            yield output
                    flying.append(self._send(parts, dtype, generator, per_row=False, start=rows.start, last=rows.stop >= drafts.shape[0]))
            while flying:
                output = self._landed(flying, done)
                if output is not None:
                    yield output
        except KeyboardInterrupt:
            if flying:
                self._process.kill()  # Ctrl-C waits for no call: what was in flight ends with the process
            raise
        finally:
            if flying and self._process.alive():  # left early, or a call failed: the call behind it is dropped
                self._process.drain(self.limit(flying[0].elements))

    def _landed(self, flying: collections.deque[_Flight], done: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Finish the oldest call in flight: its batch's outputs once that was the batch's last call."""
        flight = flying.popleft()
        done.append(self._finish(flight))
        if not flight.last:
            return None
        output = done[0] if len(done) == 1 else (torch.cat([o[0] for o in done]), torch.cat([o[1] for o in done]))
        done.clear()
        return output

    def _chunking(self) -> tuple[int, bool]:
        """Rows per call, and whether the sampler is called one row at a time within them."""
        if not self.capabilities.batched:
            return UNBATCHED_AUDIT_ROWS, True
        chunk = self.capabilities.max_batch or DEFAULT_CHUNK
        return (chunk - chunk % 2 if chunk > 1 else chunk), False  # adjacent row pairs (2i, 2i+1) stay in one call

    def _chunks(
        self, target: torch.Tensor, draft: torch.Tensor, drafts: torch.Tensor, uniforms: torch.Tensor | None, seeds: torch.Tensor | None, chunk: int
    ) -> Iterator[tuple[slice, list[torch.Tensor | None]]]:
        """A batch's rows, ``chunk`` at a time, where the sampler reads them (a worker: shared CPU memory)."""
        place = self.device if self._process is None else torch.device("cpu")
        # Broadcast views stay views and dtypes stay as given: the tensors the sampler is given are laid
        # out dense, in its dtype, once per distinct input (see _Staging), not once per call.
        target, draft = target.to(device=place), draft.to(device=place)
        drafts = drafts.to(device=place, dtype=torch.int64)
        if uniforms is not None:
            uniforms = uniforms.to(device=place, dtype=torch.float64)
        if seeds is not None:
            seeds = seeds.to(device=place, dtype=torch.int64)
        batch = drafts.shape[0]
        for start in range(0, batch, chunk):
            rows = slice(start, min(start + chunk, batch))
            yield rows, [target[rows], draft[rows], drafts[rows], None if uniforms is None else uniforms[rows], None if seeds is None else seeds[rows]]

    @staticmethod
    def _described(parts: list[torch.Tensor | None], dtype: torch.dtype, per_row: bool) -> tuple[int, str, dict[str, Any]]:
        """A chunk's calls: the input elements of one call, where they are in words, and what the
        check's reach records of them."""
        drafts, target = parts[2], parts[0]
        assert drafts is not None and target is not None
        rows, k = drafts.shape
        vocab = target.shape[-1]
        name = str(dtype).removeprefix("torch.")
        where = f"{'one row' if per_row else f'a batch of {rows} rows'}, K={k}, V={vocab}, {name}"
        return (1 if per_row else rows) * (2 * k + 1) * vocab, where, {"batch": 1 if per_row else rows, "rows": rows, "k": k, "vocab": vocab, "dtype": name}

    def _direct(self, parts: list[torch.Tensor | None], dtype: torch.dtype, generator: torch.Generator | None, *, per_row: bool, start: int) -> tuple[torch.Tensor, torch.Tensor]:
        """In process: a chunk's calls (one, or one per row), each time-limited, audited."""
        elements, _, given_shape = self._described(parts, dtype, per_row)
        self.reach.record(**given_shape)
        outputs, seconds, given, changed = self._direct_calls(parts, dtype, generator, per_row, elements)
        return self._accepted(outputs, seconds, given, changed, parts, per_row=per_row, start=start, elements=elements)

    def _send(
        self, parts: list[torch.Tensor | None], dtype: torch.dtype, generator: torch.Generator | None, *, per_row: bool, start: int, last: bool = True
    ) -> _Flight:
        """Isolated: stage a chunk's calls in the worker's arena and send them; :meth:`_finish` waits."""
        assert self._process is not None
        elements, where, given_shape = self._described(parts, dtype, per_row)
        self._fresh_process()
        first_call = self.calls + 1 + self._process.in_flight  # a call in flight is a single call
        pending = self._process.submit(parts, dtype=dtype, per_row=per_row, generator=generator)
        return _Flight(pending, parts, per_row, start, elements, where, given_shape, first_call, last)

    def _finish(self, flight: _Flight) -> tuple[torch.Tensor, torch.Tensor]:
        """Wait for a chunk's calls sent by :meth:`_send`: their output, audited."""
        assert self._process is not None
        limit = self.limit(flight.elements)
        self.reach.record(**flight.given_shape)
        try:
            outputs, seconds, staged, changed = self._process.collect(flight.pending, limit=limit)
        except (WorkerRaised, WorkerHung, WorkerDied) as exc:
            raise self._worker_fault(exc, flight.first_call, flight.where) from None
        given = [t for t in staged[:3] if t is not None]
        return self._accepted(outputs, seconds, given, changed, flight.parts, per_row=flight.per_row, start=flight.start, elements=flight.elements)

    def _accepted(
        self, outputs: list[Any], seconds: list[float], given: list[torch.Tensor], changed: list[int], parts: list[torch.Tensor | None], *, per_row: bool, start: int, elements: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Account for a chunk's calls and audit their output: the chunk's (tokens, num_accepted),
        or the :class:`SamplerFault` that says which rule it broke, at which row of the batch."""
        drafts = parts[2]
        assert drafts is not None
        rows, k = drafts.shape
        for index, spent in enumerate(seconds):
            self.limit.observe(elements, spent, warm=self._warm or index > 0)
        self._warm = self._warm or bool(seconds)
        self.seconds += sum(seconds)
        self.calls += len(outputs)
        layout = self.layout
        assert isinstance(layout, ChainLayout)  # a tree sampler is called by TreeSamplerUnderTest
        inputs = StepInputs(*given)
        device = drafts.device if self._process is None else self.device
        for index, output in enumerate(outputs):
            self.rows += 1 if per_row else rows
            problems = layout.structure(inputs.rows(slice(index, index + 1)) if per_row else inputs, output, device=device)
            if problems:
                raise self._fault(problems[0])
        output = outputs[0] if not per_row else (torch.cat([c[0] for c in outputs]), torch.cat([c[1] for c in outputs]))
        if changed:
            name = ("target_probs", "draft_probs", "draft_tokens")[changed[0]]
            raise self._fault(Violation("inputs-unmodified", f"the sampler modified its input {name} in place"))
        violations = layout.audit(inputs, output, first_only=True)
        if violations:
            v = violations[0]
            raise self._fault(dataclasses.replace(v, row=None if v.row is None else v.row + start))
        return output

    def _direct_calls(
        self, parts: list[Any], dtype: torch.dtype, generator: torch.Generator | None, per_row: bool, elements: int
    ) -> tuple[list[Any], list[float], list[torch.Tensor], list[int]]:
        sampler = self.sampler
        assert sampler is not None, "direct calls are made in-process only"
        given = self._staging.given(parts[:3], dtype)  # copies: the sampler's in-place writes show
        target, draft, drafts = given
        uniforms, seeds = parts[3], parts[4]
        slices = [slice(i, i + 1) for i in range(drafts.shape[0])] if per_row else [slice(None)]
        requests = [
            ((target[s], draft[s], drafts[s], generator), ({} if uniforms is None else {"uniforms": uniforms[s]}) | ({} if seeds is None else {"seeds": seeds[s]}))
            for s in slices
        ]
        try:
            if self.timed:
                if self._thread is None:
                    self._thread = _CallThread(self.device)
                try:
                    outputs, seconds = self._thread.run(sampler, requests, self.limit(elements))
                except SamplerFault as fault:
                    if fault.violation.rule == "hang":
                        self._thread = None  # abandoned with its hung call; the next call gets a fresh thread
                        self.hangs += 1
                        self.limit.hung = True
                    self.last_fault = fault
                    raise
                return outputs, seconds, given, self._staging.changed()
            outputs, seconds = [], []
            for args, kwargs in requests:
                start = time.perf_counter()
                try:
                    outputs.append(sampler(*args, **kwargs))
                    if self.device.type == "cuda":
                        torch.cuda.synchronize(self.device)
                except Exception as exc:  # noqa: BLE001 - everything the sampler raises is evidence
                    raise self._fault(_raised(exc), {"traceback": _last_frames(exc)}) from exc
                seconds.append(time.perf_counter() - start)
            return outputs, seconds, given, self._staging.changed()
        except SamplerFault:
            self._staging.forget()  # whatever it did to its inputs, the next call gets fresh copies
            raise


@dataclasses.dataclass
class _Flight:
    """A chunk's calls sent to the sampler's process, and what auditing their output needs."""

    pending: PendingCall
    parts: list[torch.Tensor | None]
    per_row: bool
    start: int  # the chunk's first row in its batch
    elements: int  # input elements of one call
    where: str
    given_shape: dict[str, Any]  # recorded in the check's reach once the call is waited for (a dropped call is not)
    first_call: int
    last: bool  # the last chunk of its batch


class _Staging:
    """In-process: the copies the sampler is given, kept while the harness passes the same tensors.

    A large batch built once is passed to many calls; each distinct input is laid out dense, in the
    sampler's dtype, once, and compared after every call with the harness's own tensor (or a
    converted copy of it), so a write to it is seen and the next call gets a fresh copy.
    """

    def __init__(self) -> None:
        self._held: list[tuple[tuple[Any, ...], torch.Tensor, torch.Tensor, torch.Tensor] | None] = [None, None, None]

    def given(self, parts: list[torch.Tensor], dtype: torch.dtype) -> list[torch.Tensor]:
        out = []
        for slot, tensor in enumerate(parts):
            want = dtype if slot < 2 else torch.int64
            key = identity(tensor, want)
            held = self._held[slot]
            if held is None or held[0] != key:
                pristine = tensor if tensor.dtype == want else tensor.to(want)
                copy = tensor.to(dtype=want, memory_format=torch.contiguous_format, copy=True)
                held = (key, tensor, pristine, copy)  # the source is kept alive: its address is not reused
                self._held[slot] = held
            out.append(held[3])
        return out

    def changed(self) -> list[int]:
        """The slots whose copy no longer equals the harness's tensor (forgotten: copied afresh next time)."""
        changed = [slot for slot, held in enumerate(self._held) if held is not None and not unchanged(held[3], held[2])]
        for slot in changed:
            self._held[slot] = None
        return changed

    def forget(self) -> None:
        self._held = [None, None, None]


class _CallThread:
    """In-process only: a daemon thread that makes the sampler's calls, so a hang can be abandoned,
    not awaited (the abandoned thread lives on: isolation is the cure).

    It takes a list of calls at a time (an unbatched sampler's chunk of rows, one call each) and
    beats a heartbeat before each: a call that has not returned ``timeout`` seconds after its beat
    is a hang, whatever came before it.  An abandoned worker makes no further call; the next call
    gets a fresh worker.  On a CUDA device each call is synchronised before it counts as returned,
    so a hung kernel is a hang of the call that launched it (and the time measured is the kernel's).
    """

    def __init__(self, device: torch.device) -> None:
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._device = device
        threading.Thread(target=self._serve, name="specverify-sampler-calls", daemon=True).start()

    def _serve(self) -> None:
        cuda = self._device.type == "cuda"
        if cuda:
            torch.cuda.set_device(self._device)  # the current device is per thread
        while True:
            fn, calls, state, done = self._requests.get()
            try:
                for args, kwargs in calls:
                    if state["abandoned"]:
                        break
                    state["beat"] = time.monotonic()
                    state["results"].append(fn(*args, **kwargs))
                    if cuda:
                        torch.cuda.synchronize(self._device)
                    state["seconds"].append(time.monotonic() - state["beat"])
            except BaseException as exc:  # noqa: BLE001 - everything the sampler raises is evidence
                state["error"] = exc
            done.set()

    def run(self, fn: Callable[..., Any], calls: list[tuple[tuple, dict]], timeout: float) -> tuple[list[Any], list[float]]:
        state: dict[str, Any] = {"beat": time.monotonic(), "results": [], "seconds": [], "error": None, "abandoned": False}
        done = threading.Event()
        self._requests.put((fn, calls, state, done))
        poll = min(0.5, timeout / 8)
        while not done.wait(poll):
            if time.monotonic() - state["beat"] > timeout:
                state["abandoned"] = True
                raise SamplerFault(Violation("hang", f"the sampler did not return within {timeout:g} s"))
        if state["error"] is not None:
            exc = state["error"]
            raise SamplerFault(_raised(exc), {"traceback": _last_frames(exc)}) from exc
        return state["results"], state["seconds"]


def _raised(exc: BaseException) -> Violation:
    text = str(exc).strip().splitlines()
    return Violation("raised", f"the sampler raised {type(exc).__name__}: {text[0] if text else '(no message)'}")


def _last_frames(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-8))
