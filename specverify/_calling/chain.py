"""Calling a sampler of the chain contract (chain and logits kinds): batching, overlap, audit.

Every output is audited exactly by the kind's layout (shape, dtype, device, padding, range,
accepted tokens that are not the drafts, a token of target probability 0, an input modified in
place) before it is returned.  Experiments that make a run of independent calls use
:meth:`ChainCalls.steps`: isolated, each call is sent before the previous output is audited and
tallied, so the two processes work at once.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Iterable, Iterator
from typing import Any

import torch

from .._contract import Violation
from .._kinds import ChainLayout
from .._layout import StepInputs
from .._worker import PendingCall, WorkerDied, WorkerHung, WorkerRaised, identity, unchanged
from ..errors import SamplerFault
from .supervised import UNBATCHED_AUDIT_ROWS, CallThread, Supervised, last_frames, raised

__all__ = ["DEFAULT_CHUNK", "ChainCalls"]

#: Rows per call when the sampler declares no ``max_batch``: bounds the harness's memory.
DEFAULT_CHUNK = 65_536


class ChainCalls(Supervised):
    """The calls of a sampler of the chain contract, as the sampler under test makes them."""

    _staging: _Staging  # in process: the copies of the inputs the sampler is given

    def chain_step(
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
            (output,) = self.steps(
                [(target_probs, draft_probs, draft_tokens)], generator=generator, dtype=dtype
            )  # its chunks overlap
            return output
        chunk, per_row = self._chunking()
        outputs = []
        for rows, parts in self._chunks(
            target_probs, draft_probs, draft_tokens, uniforms, seeds, chunk
        ):  # chunks of rows, not rows
            if self._process is not None:
                outputs.append(self._finish(self._send(parts, dtype, generator, per_row=per_row, start=rows.start)))
            else:
                outputs.append(self._direct(parts, dtype, generator, per_row=per_row, start=rows.start))
        if len(outputs) == 1:
            return outputs[0][0].to("cpu"), outputs[0][1].to("cpu")
        return torch.cat([o[0] for o in outputs]).to("cpu"), torch.cat([o[1] for o in outputs]).to("cpu")

    def steps(
        self,
        batches: Iterable[tuple[Any, ...]],
        *,
        generator: torch.Generator | None = None,
        dtype: torch.dtype | None = None,
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """:meth:`step` on each of ``batches`` (target, draft probabilities, draft tokens, and
        optionally the batch's own generator in place of ``generator``) in turn: the same calls,
        generators and outputs, so the same results in either isolation.

        Isolated, the next call is staged and sent before this one's output is audited and handed
        back, so the harness's work on an output (the audit, the caller's tally, the next batch)
        overlaps the sampler's next call on another core.  ``batches`` is therefore read one call
        ahead of the outputs: a batch must not depend on an earlier batch's output, nor draw from a
        generator the caller also draws from on outputs.  Leaving the loop early waits for the
        call in flight and drops its output.
        """
        if self._process is None or not self.capabilities.batched:
            for target, draft, drafts, *own in batches:
                yield self.chain_step(target, draft, drafts, generator=own[0] if own else generator, dtype=dtype)
            return
        dtype = dtype or self.dtype
        chunk, _ = self._chunking()
        flying: collections.deque[_Flight] = collections.deque()
        done: list[tuple[torch.Tensor, torch.Tensor]] = []  # the oldest unfinished batch's outputs so far
        try:
            for target, draft, drafts, *own in batches:
                if drafts.shape[0] == 0:
                    while flying:
                        output = self._landed(flying, done)
                        if output is not None:
                            yield output
                    yield self.chain_step(target, draft, drafts)
                    continue
                for rows, parts in self._chunks(target, draft, drafts, None, None, chunk):
                    if len(flying) == 2:
                        output = self._landed(flying, done)
                        if output is not None:
                            yield output
                    flying.append(
                        self._send(
                            parts,
                            dtype,
                            own[0] if own else generator,
                            per_row=False,
                            start=rows.start,
                            last=rows.stop >= drafts.shape[0],
                        )
                    )
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

    def _landed(
        self, flying: collections.deque[_Flight], done: list[tuple[torch.Tensor, torch.Tensor]]
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
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
        self,
        target: torch.Tensor,
        draft: torch.Tensor,
        drafts: torch.Tensor,
        uniforms: torch.Tensor | None,
        seeds: torch.Tensor | None,
        chunk: int,
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
            yield (
                rows,
                [
                    target[rows],
                    draft[rows],
                    drafts[rows],
                    None if uniforms is None else uniforms[rows],
                    None if seeds is None else seeds[rows],
                ],
            )

    @staticmethod
    def _described(
        parts: list[torch.Tensor | None], dtype: torch.dtype, per_row: bool
    ) -> tuple[int, str, dict[str, Any]]:
        """A chunk's calls: the input elements of one call, where they are in words, and what the
        check's reach records of them."""
        drafts, target = parts[2], parts[0]
        assert drafts is not None and target is not None
        rows, k = drafts.shape
        vocab = target.shape[-1]
        name = str(dtype).removeprefix("torch.")
        where = f"{'one row' if per_row else f'a batch of {rows} rows'}, K={k}, V={vocab}, {name}"
        return (
            (1 if per_row else rows) * (2 * k + 1) * vocab,
            where,
            {"batch": 1 if per_row else rows, "rows": rows, "k": k, "vocab": vocab, "dtype": name},
        )

    def _direct(
        self,
        parts: list[torch.Tensor | None],
        dtype: torch.dtype,
        generator: torch.Generator | None,
        *,
        per_row: bool,
        start: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """In process: a chunk's calls (one, or one per row), each time-limited, audited."""
        elements, _, given_shape = self._described(parts, dtype, per_row)
        self.reach.record(**given_shape)
        outputs, seconds, given, changed = self._direct_calls(parts, dtype, generator, per_row, elements)
        return self._accepted(outputs, seconds, given, changed, parts, per_row=per_row, start=start, elements=elements)

    def _send(
        self,
        parts: list[torch.Tensor | None],
        dtype: torch.dtype,
        generator: torch.Generator | None,
        *,
        per_row: bool,
        start: int,
        last: bool = True,
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
        return self._accepted(
            outputs,
            seconds,
            given,
            changed,
            flight.parts,
            per_row=flight.per_row,
            start=flight.start,
            elements=flight.elements,
        )

    def _accepted(
        self,
        outputs: list[Any],
        seconds: list[float],
        given: list[torch.Tensor],
        changed: list[int],
        parts: list[torch.Tensor | None],
        *,
        per_row: bool,
        start: int,
        elements: int,
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
        assert isinstance(layout, ChainLayout)  # the chain kinds' calls
        inputs = StepInputs(*given)
        device = drafts.device if self._process is None else self.device
        for index, output in enumerate(outputs):
            self.rows += 1 if per_row else rows
            problems = layout.structure(
                inputs.rows(slice(index, index + 1)) if per_row else inputs, output, device=device
            )
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
            (
                (target[s], draft[s], drafts[s], generator),
                ({} if uniforms is None else {"uniforms": uniforms[s]})
                | ({} if seeds is None else {"seeds": seeds[s]}),
            )
            for s in slices
        ]
        try:
            if self.timed:
                if self._thread is None:
                    self._thread = CallThread(self.device)
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
                    raise self._fault(raised(exc), {"traceback": last_frames(exc)}) from exc
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
