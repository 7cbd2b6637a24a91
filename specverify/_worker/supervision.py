"""Supervising the sampler's own process: starting, loading, calling, restarting, killing it.

Whatever the sampler does in its process (exits, aborts, segfaults, is killed for memory, hangs,
prints megabytes) the harness survives it: :class:`SamplerProcess` sees the process end or a call
outlive its limit (the worker beats a shared counter at every call it starts, so each call gets
the limit of its own), kills what is left and says what happened, with the exit code or signal
and the last output the sampler wrote.  It is started with ``python -m specverify._worker``
(never by re-running the caller's ``__main__``), in a session of its own so the terminal's Ctrl-C
reaches only the harness, which decides.  A process that is still alive when its run ends is kept,
idle, for the next sampler this harness loads.

A second chain call may be sent while one runs (:meth:`SamplerProcess.submit`): it is staged in a
second lane of the arena and goes on with the running call's generator, so the harness's work on
one call's output overlaps the sampler's next call, and the calls and draws are those of calling
one after the other.
"""

from __future__ import annotations

import atexit
import collections
import dataclasses
import mmap
import os
import signal
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

import torch

from .._threads import HarnessThreads, sampler_threads
from .._worker_start import popen_worker, take_early
from .arena import INPUT_DTYPES, Lane, invalidate
from .wire import (
    LOAD,
    STEP,
    TREE_STEP,
    UNIT,
    Channel,
    WorkerDied,
    WorkerHung,
    WorkerLoadError,
    WorkerRaised,
    set_state,
    state_of,
)

__all__ = ["OUTPUT_TAIL", "PendingCall", "SamplerProcess", "prestart"]

#: Bytes of the sampler's stdout and stderr kept (the last ones); older output is dropped.
OUTPUT_TAIL = 64 * 1024
#: Seconds a call may take before the progress display says the harness is waiting on it.
SLOW_CALL = 2.0


def _how_it_ended(code: int | None) -> str:
    """How a process ended, from its exit code, in words."""
    if code is None:
        return "it stopped answering"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"it was killed by {name} (signal {-code})" + (
            " (the out-of-memory killer sends SIGKILL)" if -code == signal.SIGKILL else ""
        )
    return f"it exited with status {code}"


@dataclasses.dataclass
class PendingCall:
    """A chain call sent to the worker whose reply the harness has not read yet."""

    lane: int
    rows: int
    k: int
    outputs_at: list[int]
    staged: list[torch.Tensor | None]
    started: int  # the worker's beat count before the call's first sampler call
    generator: torch.Generator | None


class SamplerProcess:
    """A supervised worker process holding one sampler.

    Args:
        source: what to load: ``("spec", "pkg.module:attr")`` or ``("ref", module, qualname)``.
        device: the device a sampler that declares none runs on.
    """

    def __init__(self, source: tuple[str, ...], device: str | None, *, page_watch: bool = True) -> None:
        self.source = source
        self.device_hint = device
        #: Whether the worker may see the sampler's writes to its inputs by their pages (where the
        #: kernel says); ``False``: the parent keeps copies and compares, as on other systems.
        self.page_watch = page_watch
        self._proc: subprocess.Popen | None = None
        self._tail: collections.deque[bytes] = collections.deque()
        self._tail_bytes = 0
        self._tail_lock = threading.Lock()
        self._lanes = (Lane(), Lane())
        self._in_flight: collections.deque[PendingCall] = collections.deque()
        self._beat: mmap.mmap | None = None
        self.starts = 0
        self.info: dict[str, Any] = {}
        self._generation = 0  # inputs written into the arena so far
        self._acquired = False  # a run holds it: the harness computes on one thread meanwhile
        self.exchanges = 0  # round trips of calls (a call message and its reply)
        #: Called with (seconds waited on the current call, its limit) while a call is slow.
        self.on_wait: Any = None

    # -- lifetime ---------------------------------------------------------------------------
    def start(self, load_limit: float = 600.0) -> dict[str, Any]:
        """Load the sampler (into a fresh process, or an idle one of this harness): its name,
        capabilities and device."""
        if self.alive():
            self.drain(load_limit)
        else:
            self._spawn()
        for lane in self._lanes:  # the worker maps afresh for this sampler
            lane.drop()
        self._send(
            (
                LOAD,
                {
                    "source": self.source,
                    "device": self.device_hint,
                    "sys_path": list(sys.path),
                    "threads": sampler_threads(_HARNESS_THREADS.theirs()),
                    "page_watch": self.page_watch,
                },
            )
        )
        try:
            reply = self._wait(load_limit, calls_before=self._beat_count())
        except WorkerDied as died:
            raise WorkerLoadError(
                f"the sampler's process died while importing and building it: {died.how}" + _tail_note(self.output())
            ) from None
        except WorkerHung:
            raise WorkerLoadError(f"importing and building the sampler took more than {load_limit:g} s") from None
        if reply[0] == "load-error":
            self.kill()
            raise WorkerLoadError(reply[1] + _tail_note(self.output()))
        self.info = reply[1]
        return self.info

    def _spawn(self) -> None:
        self.kill()
        self._tail.clear()
        self._tail_bytes = 0
        proc, self._beat = take_early() or popen_worker()  # specverify._worker_start
        self._proc = proc
        self._owner = os.getpid()
        _LIVE.add(self)
        self.starts += 1
        assert proc.stdin is not None and proc.stdout is not None  # both are pipes
        self._send_to = Channel(Connection(os.dup(proc.stdin.fileno()), readable=False))
        self._recv_from = Channel(Connection(os.dup(proc.stdout.fileno()), writable=False))
        proc.stdin.close()
        proc.stdout.close()
        threading.Thread(
            target=self._drain, args=(self._proc.stderr,), name="specverify-sampler-output", daemon=True
        ).start()
        # No wait: the first message waits in the pipe while the worker imports torch, and the
        # harness goes on with its own work (see prestart).

    def release(self) -> None:
        """Keep a live process for the next sampler this harness loads (one torch import per
        harness, not per run); a process that died or was killed is not kept."""
        for lane in self._lanes:  # the run's tensors are not held beyond it
            lane.slots.clear()
        if self._acquired:
            self._acquired = False
            _HARNESS_THREADS.leave()
        if self.alive() and getattr(self, "_owner", None) == os.getpid():
            _IDLE.setdefault(_pool_key(self.device_hint), []).append(self)
        else:
            self.kill()

    @classmethod
    def acquire(cls, source: tuple[str, ...], device: str | None) -> SamplerProcess:
        """An idle process of this harness if there is one (same device and ``sys.path``), else a new one."""
        idle = _IDLE.get(_pool_key(device), [])
        while idle:
            process = idle.pop()
            if process.alive() and getattr(process, "_owner", None) == os.getpid():
                process.source = source
                process.page_watch = True
                return process._enter()
            process.kill()
        return cls(source, device)._enter()

    def _enter(self) -> SamplerProcess:
        if not self._acquired:
            self._acquired = True
            _HARNESS_THREADS.enter()
        return self

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def kill(self) -> None:
        """End the process (and everything it started in its session) and free its memory."""
        proc, self._proc = self._proc, None
        _LIVE.discard(self)
        if proc is not None and getattr(self, "_owner", None) != os.getpid():
            return  # a forked copy of the harness: the process is its parent's
        if proc is not None:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    proc.kill()
            proc.wait()
            for conn in (getattr(self, "_send_to", None), getattr(self, "_recv_from", None)):
                if conn is not None:
                    conn.close()
        self._in_flight.clear()
        for lane in self._lanes:
            lane.drop()

    def output(self) -> str:
        """The last :data:`OUTPUT_TAIL` bytes the sampler wrote to stdout and stderr."""
        with self._tail_lock:
            data = b"".join(self._tail)
        return data[-OUTPUT_TAIL:].decode("utf-8", "replace")

    def _drain(self, stream: Any) -> None:
        fd = stream.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            with self._tail_lock:
                self._tail.append(chunk)
                self._tail_bytes += len(chunk)
                while self._tail_bytes - len(self._tail[0]) >= OUTPUT_TAIL:
                    self._tail_bytes -= len(self._tail.popleft())
        stream.close()

    # -- calls ------------------------------------------------------------------------------
    def call(
        self,
        inputs: list[torch.Tensor | None],
        *,
        dtype: torch.dtype,
        per_row: bool,
        generator: torch.Generator | None,
        limit: float,
    ) -> tuple[list[Any], list[float], list[torch.Tensor | None], list[int]]:
        """Make the calls on ``inputs`` (one, or one per row); outputs, seconds per call, the inputs as
        the sampler was given them, and which of the first three it wrote to.

        ``inputs`` (target and draft probabilities, given in ``dtype``; draft tokens; uniforms and
        per-request seeds, or ``None``) may be broadcast views: the arena holds them dense.  A tensor passed again,
        unchanged, is not copied again.
        """
        self.drain(limit)
        return self.collect(self.submit(inputs, dtype=dtype, per_row=per_row, generator=generator), limit=limit)

    @property
    def in_flight(self) -> int:
        """Calls sent whose replies have not been read."""
        return len(self._in_flight)

    def submit(
        self, inputs: list[torch.Tensor | None], *, dtype: torch.dtype, per_row: bool, generator: torch.Generator | None
    ) -> PendingCall:
        """Stage and send a call as :meth:`call` would, without waiting for it; :meth:`collect` reads
        its reply.  With a call already in flight (at most one), this one is staged in the other lane
        while that one runs, and the worker goes on with that call's generator, as the next call
        after it would (where it is the same generator: else this call's own state)."""
        if len(self._in_flight) > 1 or (self._in_flight and per_row):
            raise RuntimeError("at most two single calls may be in flight")
        lane = 1 - self._in_flight[-1].lane if self._in_flight else 0
        drafts = inputs[2]
        assert drafts is not None, "a chain call always has its draft tokens"
        rows, k = drafts.shape
        inputs = [*inputs, *[None] * (len(INPUT_DTYPES) - len(inputs))]
        dtypes = [dtype if d is None else d for d in INPUT_DTYPES]
        request, staged, outputs_at = self._lanes[lane].stage(
            inputs,
            dtypes,
            [(rows, k + 1), (rows,)],
            keep_pristine=not self.info.get("page_watch"),
            generation=self._next_generation,
        )
        follows = bool(self._in_flight)
        continues = (
            follows and generator is not None and generator is self._in_flight[-1].generator
        )  # another generator (the next unit's) starts from its own state
        request.update(
            per_row=per_row,
            lane=lane,
            generator="continue" if continues else None if generator is None else state_of(generator),
        )
        started = (
            self._in_flight[-1].started + 1 if follows else self._beat_count()
        )  # read before sending: a fast worker beats at once
        self.exchanges += 1
        self._send((STEP, request))
        pending = PendingCall(lane, rows, k, outputs_at, staged, started, generator)
        self._in_flight.append(pending)
        return pending

    def collect(
        self, pending: PendingCall, *, limit: float
    ) -> tuple[list[Any], list[float], list[torch.Tensor | None], list[int]]:
        """The reply to the oldest call in flight, as :meth:`call` returns it (or the exception that
        says how it ended)."""
        assert self._in_flight and self._in_flight[0] is pending, "replies come in the order of the calls"
        (_, encoded, state, seconds, _), changed = self._exchange(pending.staged, limit, pending.started, pending.lane)
        if pending.generator is not None and state is not None:
            set_state(pending.generator, state)
        arena = self._lanes[pending.lane].arena
        assert arena is not None
        rows, k = pending.rows, pending.k
        tokens = arena.view(pending.outputs_at[0], (rows, k + 1), torch.int64).clone()  # the arena is reused
        accepted = arena.view(pending.outputs_at[1], (rows,), torch.int64).clone()
        outputs = [
            (tokens[first : first + n], accepted[first : first + n]) if kind == "placed" else value
            for kind, first, n, value in (
                (*item, None) if item[0] == "placed" else (item[0], 0, 0, item[1]) for item in encoded
            )
        ]
        return outputs, seconds, pending.staged, changed

    def drain(self, limit: float) -> None:
        """Wait for the calls in flight and drop their replies (a caller that stopped early, or
        whose earlier call failed); a call that fails meanwhile ends the draining, its process
        killed where it died or hung."""
        while self._in_flight:
            dropped = self._in_flight[0]
            dropped.generator = None  # the caller's generator stays where its last output left it
            try:
                self.collect(dropped, limit=limit)
            except (WorkerRaised, WorkerDied, WorkerHung):
                pass
        self._in_flight.clear()

    def call_tree(
        self,
        inputs: list[torch.Tensor | None],
        *,
        dtype: torch.dtype,
        path_width: int,
        generator: torch.Generator | None,
        limit: float,
        per_row: bool = False,
    ) -> tuple[Any, list[float], list[torch.Tensor | None], list[int]]:
        """A tree sampler call (``specverify._trees.contract``), or with ``per_row`` one per row in the worker
        (one round trip for an unbatched sampler's rows): its output, seconds per call, the inputs as
        the sampler was given them, and which of parents, tokens and target probabilities it wrote to.

        ``inputs`` are a :class:`~specverify._trees.contract.TreeBatch`'s parents, tokens, target and draft
        probabilities (given in ``dtype``; draft ``None`` where the tree has none), and uniforms
        or ``None``.  A ``(path [B, path_width], token [B])`` int64 output comes back through the
        arena (a row's path padded with -1 beyond its own tree's depth); anything else pickled, as
        it is, for the parent's audit: per row, ``("row", i, that output, (paths, tokens) of the rows
        before i)``.
        """
        self.drain(limit)
        parents = inputs[0]
        assert parents is not None, "a tree call always has its parents"
        rows = parents.shape[0]
        dtypes = [torch.int64, torch.int64, dtype, dtype, torch.float64]
        request, staged, (path_at, token_at) = self._lanes[0].stage(
            inputs,
            dtypes,
            [(rows, path_width), (rows,)],
            keep_pristine=not self.info.get("page_watch"),
            generation=self._next_generation,
        )
        request.update(
            path_width=path_width, per_row=per_row, lane=0, generator=None if generator is None else state_of(generator)
        )
        started = self._beat_count()  # read before sending: a fast worker beats at once
        self.exchanges += 1
        self._send((TREE_STEP, request))
        (_, output, state, seconds, _), changed = self._exchange(staged, limit, started, 0)
        if generator is not None and state is not None:
            set_state(generator, state)
        placed = (
            rows
            if output == "placed"
            else output[1]
            if per_row and isinstance(output, tuple) and output[:1] == ("row",)
            else 0
        )
        if placed:
            arena = self._lanes[0].arena
            assert arena is not None
            paths = arena.view(path_at, (rows, path_width), torch.int64)[:placed].clone()
            tokens = arena.view(token_at, (rows,), torch.int64)[:placed].clone()
            output = (paths, tokens) if output == "placed" else (*output, (paths, tokens))
        return output, seconds, staged, changed

    def _exchange(
        self, staged: list[torch.Tensor | None], limit: float, started: int, lane_index: int
    ) -> tuple[Any, list[int]]:
        """Wait for the reply to the oldest call sent: the reply and the inputs the sampler changed,
        or the exception that says how it ended (:class:`WorkerRaised`, :class:`WorkerDied`, :class:`WorkerHung`)."""
        lane = self._lanes[lane_index]
        try:
            reply = self._wait(limit, calls_before=started)
        except (WorkerDied, WorkerHung):
            self._in_flight.clear()  # the process is gone, with every call sent to it
            for each in self._lanes:
                # a new process maps the arena afresh; the parent's copies stay valid, but start clean
                each.slots.clear()
            raise
        if self._in_flight:
            self._in_flight.popleft()
        assert lane.arena is not None
        lane.arena.unlink()  # the worker has it mapped; the name is no longer needed
        calls_made = self._beat_count() - started
        if reply[0] == "raised":
            _, type_name, text, trace, written = reply
            invalidate(lane.slots, written, staged)
            raise WorkerRaised(type_name, text, trace, calls_made)
        return reply, invalidate(lane.slots, reply[-1], staged)

    def call_direct(self, verb: str, request: dict[str, Any], *, limit: float) -> tuple[Any, int]:
        """Call a subject called as itself (a loop, an engine) once: its output, and the beats it made.

        ``request`` is what its kind sends (:meth:`specverify._kinds.Kind.request`: a loop's models as
        descriptions, rebuilt in the worker, never pickled closures).  The worker beats at every
        model call a loop makes (an engine's: once a call), so ``limit`` is how long it may go
        without one (or returning) before it is a hang.
        """
        self.drain(limit)
        started = self._beat_count()  # read before sending: a fast worker beats at once
        self._send((verb, request))
        try:
            reply = self._wait(limit, calls_before=started)
        except WorkerDied as died:  # counted in model calls made, not in calls started
            raise WorkerDied(died.how, self._beat_count() - started) from None
        except WorkerHung as hung:
            raise WorkerHung(hung.limit, self._beat_count() - started) from None
        calls_made = self._beat_count() - started
        if reply[0] == "raised":
            _, type_name, text, trace = reply[:4]
            raise WorkerRaised(type_name, text, trace, calls_made)
        return reply[1], calls_made

    def call_unit(self, host: tuple[str, str], work: tuple[str, str], unit: Any, *, limit: float) -> tuple[str, Any]:
        """Run an experiment's unit in the worker (``work`` by module and name, run there by ``host``,
        the harness's function that runs a unit on the sampler loaded there): ``("done", UnitDone)``
        or ``("fault", SamplerFault)``.  The worker beats at every sampler call, so ``limit`` is
        how long one call may take.

        Raises:
            WorkerRaised: the unit's harness code raised there (a harness bug, not the sampler's).
            WorkerDied, WorkerHung: as for a call.
        """
        self.drain(limit)
        started = self._beat_count()
        self._send((UNIT, {"host": host, "work": work, "unit": unit}))
        reply = self._wait(limit, calls_before=started)
        if reply[0] == "raised":
            _, type_name, text, trace = reply[:4]
            raise WorkerRaised(type_name, text, trace, self._beat_count() - started)
        return reply[0], reply[1]

    def _next_generation(self) -> int:
        self._generation += 1
        return self._generation

    def _beat_count(self) -> int:
        return int.from_bytes(self._beat[:8], "little") if self._beat is not None else 0

    def _send(self, message: Any) -> None:
        try:
            self._send_to.send(message)
        except OSError:
            pass  # it died; the wait that follows says how

    def _wait(self, limit: float, *, calls_before: int) -> Any:
        """The next reply; each call the worker starts gets ``limit`` seconds of its own."""
        last_count, beat = calls_before, time.monotonic()
        poll = max(0.005, min(0.25, limit / 8))
        while True:
            try:
                ready = self._recv_from.poll(poll)
            except (OSError, EOFError):
                ready = True
            if ready:
                try:
                    return self._recv_from.receive()
                except (EOFError, OSError):
                    raise self._died(last_count - calls_before) from None
            count = self._beat_count()
            if count != last_count:
                last_count, beat = count, time.monotonic()
            waited = time.monotonic() - beat
            if self.on_wait is not None and waited >= SLOW_CALL:
                self.on_wait(waited, limit)
            if self._proc is None or self._proc.poll() is not None:
                raise self._died(last_count - calls_before)
            if time.monotonic() - beat > limit:
                self.kill()
                raise WorkerHung(limit, max(0, last_count - calls_before - 1))

    def _died(self, calls: int) -> WorkerDied:
        code = None
        if self._proc is not None:
            try:
                code = self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        how = _how_it_ended(code)
        self.kill()
        time.sleep(0.05)  # let the output reader take the last bytes
        return WorkerDied(how, max(0, calls - 1))


#: Every process this harness started and has not killed; the idle ones by device and ``sys.path``.
_LIVE: set[SamplerProcess] = set()
_IDLE: dict[tuple[Any, ...], list[SamplerProcess]] = {}


_HARNESS_THREADS = HarnessThreads()


def _pool_key(device: str | None) -> tuple[Any, ...]:
    return (device, tuple(sys.path))


def prestart(device: str | None) -> None:
    """Start a worker process now, idle, for the next sampler loaded on ``device``: its torch import
    then overlaps the harness's own start (the CLI calls this before importing the battery)."""
    process = SamplerProcess(("none",), device)
    process._spawn()
    _IDLE.setdefault(_pool_key(device), []).append(process)


def _tail_note(output: str) -> str:
    lines = output.strip().splitlines()
    return ("; its last output: " + " | ".join(lines[-3:])[-400:]) if lines else ""


@atexit.register
def _kill_all() -> None:
    for process in list(_LIVE):
        process.kill()
