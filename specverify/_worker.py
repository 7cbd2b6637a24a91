"""The sampler's own process: it imports and builds the sampler and makes every call.

Whatever the sampler does there (exits, aborts, segfaults, is killed for memory, hangs, prints
megabytes) the harness survives it: :class:`SamplerProcess` sees the process end or a call outlive
its limit, kills what is left and says what happened, with the exit code or signal and the last
output the sampler wrote.  It is started with ``python -m specverify._worker`` (never by re-running
the caller's ``__main__``), in a session of its own so the terminal's Ctrl-C reaches only the
harness, which decides.

Inputs travel through a shared-memory arena: the parent writes a tensor there once and, while it
passes the same tensor again, never again; the worker gives the sampler views of it in place, no
copy.  On Linux the worker maps the inputs copy-on-write and reads, after each call, which of their
pages became its own (``/proc/self/pagemap``): a write to an input is seen exactly, at the cost of
a few bytes per page, and never reaches the shared copy.  Elsewhere the parent compares the inputs
with its own copy.  Outputs of the contract's shapes come back through the arena; anything else
comes back pickled, as it is, for the parent's audit.  The generator's state travels with each call
and back, so the sampler draws exactly what it would have drawn in the parent's process.

A second call may be sent while one runs (:meth:`SamplerProcess.submit`): it is staged in a second
arena (a lane of its own) and goes on with the running call's generator, so the harness's work on
one call's output overlaps the sampler's next call, and the calls and draws are those of calling
one after the other.
"""

from __future__ import annotations

import atexit
import collections
import dataclasses
import io
import mmap
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any

import numpy as np
import torch

from ._contract import ForeignTensor

__all__ = ["SamplerProcess", "WorkerDied", "WorkerHung", "WorkerLoadError", "WorkerRaised", "identity", "unchanged"]

#: Bytes of the sampler's stdout and stderr kept (the last ones); older output is dropped.
OUTPUT_TAIL = 64 * 1024
#: Frames of the sampler's traceback kept (the innermost).
TRACEBACK_FRAMES = 8
_ALIGN = 64
#: glibc keeps the memory a call frees for the next call (as an engine's caching allocator does),
#: rather than returning it and faulting it in afresh each call; the user's own settings win.
_ALLOCATOR = {"MALLOC_MMAP_THRESHOLD_": str(1 << 32), "MALLOC_TRIM_THRESHOLD_": str(1 << 34)}
#: Seconds a call may take before the progress display says the harness is waiting on it.
SLOW_CALL = 2.0


class WorkerLoadError(Exception):
    """The sampler could not be imported or built in its process; the message says why."""


class WorkerRaised(Exception):
    """The sampler raised; ``type_name``, the first line of its message, and its traceback."""

    def __init__(self, type_name: str, text: str, trace: str, calls: int) -> None:
        super().__init__(f"{type_name}: {text}")
        self.type_name, self.text, self.trace, self.calls = type_name, text, trace, calls


class WorkerDied(Exception):
    """The sampler's process ended during a call: how (exit code or signal), and in which call."""

    def __init__(self, how: str, calls: int) -> None:
        super().__init__(how)
        self.how, self.calls = how, calls


class WorkerHung(Exception):
    """A call outlived its limit; the process was killed."""

    def __init__(self, limit: float, calls: int) -> None:
        super().__init__(f"no return within {limit:g} s")
        self.limit, self.calls = limit, calls


def _how_it_ended(code: int | None) -> str:
    if code is None:
        return "it stopped answering"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"it was killed by {name} (signal {-code})" + (" (the out-of-memory killer sends SIGKILL)" if -code == signal.SIGKILL else "")
    return f"it exited with status {code}"


class _Arena:
    """A file in shared memory both processes map; grown by replacing it."""

    def __init__(self, size: int) -> None:
        root = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
        fd, self.path = tempfile.mkstemp(prefix="specverify-", dir=root)
        try:
            os.ftruncate(fd, size)
            self.map = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self.size = size
        self.bytes = torch.frombuffer(self.map, dtype=torch.uint8)
        self.linked = True

    def view(self, offset: int, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        return _view(self.bytes, offset, shape, dtype)

    def unlink(self) -> None:
        if self.linked:
            self.linked = False
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass


def _view(data: torch.Tensor, offset: int, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """A tensor of ``shape`` and ``dtype`` over the bytes ``data`` holds from ``offset``."""
    count = 1
    for n in shape:
        count *= n
    width = torch.empty((), dtype=dtype).element_size()
    return data[offset : offset + count * width].view(dtype).view(shape)


def _layout(specs: list[tuple[tuple[int, ...], torch.dtype] | None]) -> tuple[list[int | None], int]:
    offsets: list[int | None] = []
    end = 0
    for spec in specs:
        if spec is None:
            offsets.append(None)
            continue
        shape, dtype = spec
        count = 1
        for n in shape:
            count *= n
        offsets.append(end)
        end += -(-count * torch.empty((), dtype=dtype).element_size() // _ALIGN) * _ALIGN
    return offsets, end


#: What the arena's input slots hold: target and draft probabilities (``None``: in the sampler's
#: dtype), draft tokens, uniforms, per-request seeds.
_INPUT_DTYPES: tuple[torch.dtype | None, ...] = (None, None, torch.int64, torch.float64, torch.int64)


@dataclasses.dataclass
class _Slot:
    """What one input region of the arena holds: a copy of ``source`` (kept alive, so its address
    is not reused) in ``dtype``, written as ``generation``."""

    source: torch.Tensor
    key: tuple[Any, ...]
    offset: int
    nbytes: int
    generation: int
    pristine: torch.Tensor | None = None  # the parent's copy, where the worker cannot see writes


@dataclasses.dataclass
class _Lane:
    """Room for one call in shared memory: its arena and what the arena's input slots hold.  Two
    lanes let the next call be staged and sent while the one before it runs."""

    arena: _Arena | None = None
    slots: dict[int, _Slot] = dataclasses.field(default_factory=dict)

    def drop(self) -> None:
        if self.arena is not None:
            self.arena.unlink()
            self.arena = None
        self.slots.clear()


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


def identity(tensor: torch.Tensor, dtype: torch.dtype) -> tuple[Any, ...]:
    """What makes a tensor the same input again: its memory, layout, dtype, version, and the dtype it
    is given in (an in-place change by the harness bumps the version)."""
    return (tensor.data_ptr(), tensor.dtype, tuple(tensor.shape), tensor.stride(), tensor.device, tensor._version, dtype)


def unchanged(given: torch.Tensor, pristine: torch.Tensor) -> bool:
    """Whether a tensor still holds what it was given: equal values, NaN where there was NaN."""
    if torch.equal(given, pristine):
        return True
    if given.is_floating_point() and given.shape == pristine.shape:
        return bool(((given == pristine) | (given.isnan() & pristine.isnan())).all())
    return False


class _PageWatch:
    """Which pages of a copy-on-write mapping this process wrote, from ``/proc/self/pagemap``.

    A page of a private file mapping that was only read is the file's page; one that was written
    is an anonymous copy (bit 61 clear) or was swapped out (bit 62).  ``works()`` tries it on a
    scratch file first: where the kernel does not say, the parent compares instead.
    """

    def __init__(self) -> None:
        self.fd = os.open("/proc/self/pagemap", os.O_RDONLY)

    def written(self, address: int, nbytes: int) -> bool:
        if nbytes <= 0:
            return False
        page = mmap.PAGESIZE
        first, last = address // page, (address + nbytes - 1) // page
        entries = np.frombuffer(os.pread(self.fd, (last - first + 1) * 8, first * 8), dtype=np.uint64)
        present, swapped, file_page = (entries >> np.uint64(63)) & 1, (entries >> np.uint64(62)) & 1, (entries >> np.uint64(61)) & 1
        return bool(((present & (1 - file_page)) | swapped).any())

    @classmethod
    def works(cls) -> _PageWatch | None:
        try:
            watch = cls()
            page = mmap.PAGESIZE
            root = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
            with tempfile.NamedTemporaryFile(dir=root) as handle:
                handle.truncate(4 * page)
                shared = mmap.mmap(handle.fileno(), 4 * page)
                private = mmap.mmap(handle.fileno(), 4 * page, access=mmap.ACCESS_COPY)
                shared[0:1] = b"\x01"
                seen = private[0] == 1  # another process's write to a page not yet copied shows
                private[page : page + 1] = b"\x02"  # a write, which must show as such
                shared[2 * page : 2 * page + 1] = b"\x03"
                _ = private[2 * page]  # a read, which must not
                base = ctypes_address(private)
                ok = seen and watch.written(base + page, page) and not watch.written(base, page) and not watch.written(base + 2 * page, 2 * page)
                ok = ok and shared[page] == 0
                del base
                private.close()
                shared.close()
            return watch if ok else None
        except (OSError, ValueError, BufferError):
            return None


def ctypes_address(buffer: mmap.mmap) -> int:
    """The address of a mapping's first byte."""
    import ctypes

    holder = ctypes.c_char.from_buffer(buffer)
    try:
        return ctypes.addressof(holder)
    finally:
        del holder


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
        self._lanes = (_Lane(), _Lane())
        self._in_flight: collections.deque[PendingCall] = collections.deque()
        self._beat: mmap.mmap | None = None
        self.starts = 0
        self.info: dict[str, Any] = {}
        self._generation = 0
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
        self._send(("load", {"source": self.source, "device": self.device_hint, "sys_path": list(sys.path), "threads": _HARNESS_THREADS.theirs(), "page_watch": self.page_watch}))
        try:
            reply = self._wait(load_limit, calls_before=self._beat_count())
        except WorkerDied as died:
            raise WorkerLoadError(f"the sampler's process died while importing and building it: {died.how}" + _tail_note(self.output())) from None
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
        root = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
        fd, beat_path = tempfile.mkstemp(prefix="specverify-beat-", dir=root)
        os.unlink(beat_path)  # the worker inherits the descriptor: no name is needed
        try:
            os.ftruncate(fd, 8)
            self._beat = mmap.mmap(fd, 8)
            proc = self._proc = subprocess.Popen(
                [sys.executable, "-m", "specverify._worker", str(fd)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(fd,),
                start_new_session=True,  # the terminal's SIGINT reaches the harness only
                env={**_ALLOCATOR, **os.environ, "PYTHONUNBUFFERED": "1"},
            )
        finally:
            os.close(fd)
        self._owner = os.getpid()
        _LIVE.add(self)
        self.starts += 1
        assert proc.stdin is not None and proc.stdout is not None  # both are pipes
        self._send_to = Connection(os.dup(proc.stdin.fileno()), readable=False)
        self._recv_from = Connection(os.dup(proc.stdout.fileno()), writable=False)
        proc.stdin.close()
        proc.stdout.close()
        threading.Thread(target=self._drain, args=(self._proc.stderr,), name="specverify-sampler-output", daemon=True).start()
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

    def submit(self, inputs: list[torch.Tensor | None], *, dtype: torch.dtype, per_row: bool, generator: torch.Generator | None) -> PendingCall:
        """Stage and send a call as :meth:`call` would, without waiting for it; :meth:`collect` reads
        its reply.  With a call already in flight (at most one), this one is staged in the other lane
        while that one runs, and the worker goes on with that call's generator, as the next call
        after it would."""
        if len(self._in_flight) > 1 or (self._in_flight and per_row):
            raise RuntimeError("at most two single calls may be in flight")
        lane = 1 - self._in_flight[-1].lane if self._in_flight else 0
        drafts = inputs[2]
        assert drafts is not None, "a chain call always has its draft tokens"
        rows, k = drafts.shape
        inputs = [*inputs, *[None] * (len(_INPUT_DTYPES) - len(inputs))]
        dtypes = [dtype if d is None else d for d in _INPUT_DTYPES]
        request, staged, outputs_at = self._stage(inputs, dtypes, [(rows, k + 1), (rows,)], lane)
        follows = bool(self._in_flight)
        request.update(per_row=per_row, lane=lane, generator="continue" if follows and generator is not None else None if generator is None else _state_of(generator))
        started = self._in_flight[-1].started + 1 if follows else self._beat_count()  # read before sending: a fast worker beats at once
        self.exchanges += 1
        self._send(("call", request))
        pending = PendingCall(lane, rows, k, outputs_at, staged, started, generator)
        self._in_flight.append(pending)
        return pending

    def collect(self, pending: PendingCall, *, limit: float) -> tuple[list[Any], list[float], list[torch.Tensor | None], list[int]]:
        """The reply to the oldest call in flight, as :meth:`call` returns it (or the exception that
        says how it ended)."""
        assert self._in_flight and self._in_flight[0] is pending, "replies come in the order of the calls"
        (_, encoded, state, seconds, _), changed = self._exchange(pending.staged, limit, pending.started, pending.lane)
        if pending.generator is not None and state is not None:
            _set_state(pending.generator, state)
        arena = self._lanes[pending.lane].arena
        assert arena is not None
        rows, k = pending.rows, pending.k
        tokens = arena.view(pending.outputs_at[0], (rows, k + 1), torch.int64).clone()  # the arena is reused
        accepted = arena.view(pending.outputs_at[1], (rows,), torch.int64).clone()
        outputs = [
            (tokens[first : first + n], accepted[first : first + n]) if kind == "placed" else value
            for kind, first, n, value in ((*item, None) if item[0] == "placed" else (item[0], 0, 0, item[1]) for item in encoded)
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
        self, inputs: list[torch.Tensor | None], *, dtype: torch.dtype, path_width: int, generator: torch.Generator | None, limit: float, per_row: bool = False
    ) -> tuple[Any, list[float], list[torch.Tensor | None], list[int]]:
        """A tree sampler call (``specverify._tree``), or with ``per_row`` one per row in the worker
        (one round trip for an unbatched sampler's rows): its output, seconds per call, the inputs as
        the sampler was given them, and which of parents, tokens and target probabilities it wrote to.

        ``inputs`` are a :class:`~specverify._tree.TreeBatch`'s parents, tokens, target and draft
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
        request, staged, (path_at, token_at) = self._stage(inputs, [torch.int64, torch.int64, dtype, dtype, torch.float64], [(rows, path_width), (rows,)], 0)
        request.update(path_width=path_width, per_row=per_row, lane=0, generator=None if generator is None else _state_of(generator))
        started = self._beat_count()  # read before sending: a fast worker beats at once
        self.exchanges += 1
        self._send(("tree", request))
        (_, output, state, seconds, _), changed = self._exchange(staged, limit, started, 0)
        if generator is not None and state is not None:
            _set_state(generator, state)
        placed = rows if output == "placed" else output[1] if per_row and isinstance(output, tuple) and output[:1] == ("row",) else 0
        if placed:
            arena = self._lanes[0].arena
            assert arena is not None
            paths = arena.view(path_at, (rows, path_width), torch.int64)[:placed].clone()
            tokens = arena.view(token_at, (rows,), torch.int64)[:placed].clone()
            output = (paths, tokens) if output == "placed" else (*output, (paths, tokens))
        return output, seconds, staged, changed

    def _stage(
        self, inputs: list[torch.Tensor | None], dtypes: list[torch.dtype], outputs: list[tuple[int, ...]], lane_index: int
    ) -> tuple[dict[str, Any], list[torch.Tensor | None], list[int]]:
        """Lay ``inputs`` (each in its dtype; ``None`` for an absent one) out in a lane's arena, those
        passed before unchanged excepted, and room for int64 ``outputs`` after them: the request's
        arena fields, the staged inputs and the outputs' offsets.  Slots 0-2 are the inputs
        watched for writes."""
        lane = self._lanes[lane_index]
        specs: list[tuple[tuple[int, ...], torch.dtype] | None] = [None if t is None else (tuple(t.shape), d) for t, d in zip(inputs, dtypes)]
        specs += [(shape, torch.int64) for shape in outputs]
        n = len(inputs)
        offsets, size = _layout(specs)
        if lane.arena is None or lane.arena.size < size:
            old = lane.arena.size if lane.arena is not None else size
            lane.drop()
            lane.arena = _Arena(max(size, 2 * old, 1 << 20))
        arena = lane.arena
        staged: list[torch.Tensor | None] = []
        sent: list[Any] = []
        for slot, (tensor, spec, offset) in enumerate(zip(inputs, specs[:n], offsets[:n])):
            if tensor is None or spec is None or offset is None:
                staged.append(None)
                sent.append(None)
                continue
            view = arena.view(offset, spec[0], spec[1])
            key = identity(tensor, spec[1])
            held = lane.slots.get(slot)
            if held is None or held.key != key or held.offset != offset or held.nbytes != view.nbytes:
                view.copy_(tensor)  # converts, and lays a broadcast view out dense
                _forget(lane.slots, offset, view.nbytes)
                self._generation += 1
                held = _Slot(tensor, key, offset, view.nbytes, self._generation)
                if slot < 3 and not self.info.get("page_watch"):
                    held.pristine = view.clone()  # the worker cannot tell writes: the parent compares
                lane.slots[slot] = held
            staged.append(view)
            sent.append((offset, spec[0], spec[1], held.generation))
        outputs_at = offsets[n]
        assert outputs_at is not None
        _forget(lane.slots, outputs_at, size - outputs_at)  # the worker writes the outputs there
        request = {"arena": arena.path if arena.linked else None, "size": arena.size, "inputs": sent, "outputs": tuple(offsets[n:])}
        return request, staged, [o for o in offsets[n:] if o is not None]

    def _exchange(self, staged: list[torch.Tensor | None], limit: float, started: int, lane_index: int) -> tuple[Any, list[int]]:
        """Wait for the reply to the oldest call sent: the reply and the inputs the sampler changed,
        or the exception that says how it ended (:class:`WorkerRaised`, :class:`WorkerDied`, :class:`WorkerHung`)."""
        lane = self._lanes[lane_index]
        try:
            reply = self._wait(limit, calls_before=started)
        except (WorkerDied, WorkerHung):
            self._in_flight.clear()  # the process is gone, with every call sent to it
            for each in self._lanes:
                each.slots.clear()  # a new process maps the arena afresh; the parent's copies stay valid, but start clean
            raise
        if self._in_flight:
            self._in_flight.popleft()
        assert lane.arena is not None
        lane.arena.unlink()  # the worker has it mapped; the name is no longer needed
        calls_made = self._beat_count() - started
        if reply[0] == "raised":
            _, type_name, text, trace, written = reply
            _invalidate(lane.slots, written, staged)
            raise WorkerRaised(type_name, text, trace, calls_made)
        return reply, _invalidate(lane.slots, reply[-1], staged)

    def call_loop(self, request: dict[str, Any], *, limit: float) -> tuple[Any, int]:
        """Run a generation loop once on harness-built models: its output, and the models' calls.

        ``request`` holds the models' descriptions (``("markov", logits, context)``: rebuilt in the
        worker, never pickled closures), the prompt, ``num_tokens``, the parameters and the
        generator's state.  The worker beats at every model call, so ``limit`` is how long the
        loop may go without calling a model (or returning) before it is a hang.
        """
        self.drain(limit)
        started = self._beat_count()  # read before sending: a fast worker beats at once
        self._send(("loop", request))
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

    def _beat_count(self) -> int:
        return int.from_bytes(self._beat[:8], "little") if self._beat is not None else 0

    def _send(self, message: Any) -> None:
        try:
            self._send_to.send_bytes(pickle.dumps(message))
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
                    return pickle.loads(self._recv_from.recv_bytes())
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


def _forget(slots: dict[int, _Slot], offset: int, nbytes: int) -> None:
    """Drop the records of slots a write to ``[offset, offset + nbytes)`` overlaps."""
    for slot, held in list(slots.items()):
        if held.offset < offset + nbytes and offset < held.offset + held.nbytes:
            del slots[slot]


def _invalidate(slots: dict[int, _Slot], written: list[int], staged: list[torch.Tensor | None]) -> list[int]:
    """The inputs the sampler changed: as the worker saw it, or by the parent's comparison."""
    changed = sorted(set(written))
    for slot in range(3):
        held, given = slots.get(slot), staged[slot]
        if held is not None and held.pristine is not None and given is not None and not unchanged(given, held.pristine):
            changed.append(slot)
    for slot in changed:
        slots.pop(slot, None)
    return sorted(set(changed))


_LIVE: set[SamplerProcess] = set()
_IDLE: dict[tuple[Any, ...], list[SamplerProcess]] = {}


class _HarnessThreads:
    """The harness computes on one thread while a sampler's process is in use.

    libgomp's idle threads spin-wait after each parallel region: the harness's would spin on the
    cores the sampler's process computes on, and the sampler's on the harness's (measured: the
    README's benchmarks, "The sampler's own process"). The harness's work between calls is bookkeeping; the
    sampler's process gets the thread count the harness had, and the harness gets it back after.
    """

    def __init__(self) -> None:
        self.users = 0
        self.saved: int | None = None

    def enter(self) -> None:
        if self.users == 0:
            self.saved = torch.get_num_threads()
            torch.set_num_threads(1)
        self.users += 1

    def leave(self) -> None:
        self.users = max(0, self.users - 1)
        if self.users == 0 and self.saved is not None:
            torch.set_num_threads(self.saved)
            self.saved = None

    def theirs(self) -> int:
        """The thread count the sampler's process gets: the harness's own before it gave them up."""
        return self.saved if self.saved is not None else torch.get_num_threads()


_HARNESS_THREADS = _HarnessThreads()


def _state_of(generator: torch.Generator) -> bytes:
    """A generator's state as plain bytes: a pickled tensor costs a torch serialisation each way
    (about 0.3 ms each, as much as a small call itself)."""
    return generator.get_state().numpy().tobytes()


def _set_state(generator: torch.Generator, state: bytes) -> None:
    generator.set_state(torch.frombuffer(bytearray(state), dtype=torch.uint8))


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


# -- the worker's side ---------------------------------------------------------------------------
def _encode_value(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        if value.device != device:
            return ForeignTensor(tuple(value.shape), value.dtype, str(value.device))
        return value.detach().to("cpu", copy=True)
    try:
        pickle.dumps(value)
        return value
    except Exception:  # noqa: BLE001 - an unpicklable return is described, not carried
        return _Unpicklable(type(value).__name__)


class _Unpicklable:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


def _encode(output: Any, device: torch.device) -> Any:
    if isinstance(output, (tuple, list)):
        return type(output)(_encode_value(v, device) for v in output) if isinstance(output, tuple) else [_encode_value(v, device) for v in output]
    return _encode_value(output, device)


def _well_formed(output: Any, rows: int, k: int, device: torch.device) -> bool:
    return (
        isinstance(output, (tuple, list))
        and len(output) == 2
        and all(isinstance(t, torch.Tensor) and t.dtype == torch.int64 and t.device == device for t in output)
        and tuple(output[0].shape) == (rows, k + 1)
        and tuple(output[1].shape) == (rows,)
    )


def _serve() -> None:  # pragma: no cover - runs in the worker process (covered by tests/test_isolation.py)
    from ._contract import capabilities_of, name_of
    from ._layout import layout_of, load_sampler

    proto_in, proto_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # the sampler's stdout joins its stderr in the parent's bounded capture
    if isinstance(sys.stdout, io.TextIOWrapper):  # it is, unless the interpreter was started oddly
        sys.stdout.reconfigure(line_buffering=True)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the harness decides what Ctrl-C does
    try:  # die with the harness, even mid-hang
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except OSError:
        pass
    receive = Connection(proto_in, writable=False)
    reply = Connection(proto_out, readable=False)

    def send(message: Any) -> None:
        reply.send_bytes(pickle.dumps(message))

    def last_frames(exc: BaseException) -> str:
        return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-TRACEBACK_FRAMES))

    def first_line(exc: BaseException) -> str:
        text = str(exc).strip().splitlines()
        return text[0] if text else "(no message)"

    sampler: Any = None
    device = torch.device("cpu")
    arenas: dict[int, _WorkerArena] = {}  # per lane
    generator: torch.Generator | None = None  # the last call's, which a call sent behind it goes on with
    watch: _PageWatch | None = None
    page_watch = _PageWatch.works()
    beat = mmap.mmap(int(sys.argv[1]), 8)
    os.close(int(sys.argv[1]))
    calls = 1  # the count of calls started, plus one: nonzero once this process is up
    beat[:8] = calls.to_bytes(8, "little")
    while True:
        try:
            kind, body = pickle.loads(receive.recv_bytes())
        except EOFError:
            return
        if kind == "load":
            sys.path[:] = body["sys_path"]
            watch, generator = (page_watch if body["page_watch"] else None), None
            arenas.clear()
            torch.set_num_threads(body["threads"])
            try:
                if body["source"][0] == "spec":
                    sampler = load_sampler(body["source"][1])
                else:
                    import importlib

                    sampler = importlib.import_module(body["source"][1])
                    for part in body["source"][2].split("."):
                        sampler = getattr(sampler, part)
                contract = getattr(sampler, "contract", "step")  # "step", "loop" or "tree"
                if contract != "loop":  # a generation loop is called as it is (specverify._loop_calling)
                    sampler = layout_of(sampler).posed(sampler)
                capabilities = capabilities_of(sampler)
                device = torch.device(capabilities.device or body["device"] or "cpu")
                if device.type == "cuda":
                    torch.cuda.set_device(device)
                torch.empty(1, device=device)  # the device is there
            except SystemExit as exc:
                send(("load-error", f"importing or building the sampler called sys.exit({exc.code!r})"))
                continue
            except BaseException as exc:  # noqa: BLE001 - the message is the evidence
                message = str(exc) if type(exc).__name__ == "SamplerSpecError" else f"loading the sampler raised {type(exc).__name__}: {first_line(exc)}"
                send(("load-error", message))
                continue
            info = {"name": name_of(sampler), "capabilities": capabilities, "device": str(device), "contract": contract, "page_watch": watch is not None}
            if contract == "tree":
                info["algorithm"] = getattr(sampler, "algorithm", None)
            if contract == "loop":
                info["parameters"] = tuple(getattr(sampler, "parameters", ("temperature",)))
            send(("ready", info))
            continue
        if kind == "loop":
            calls = _serve_loop(sampler, body, beat, calls, send, first_line, last_frames)
            continue
        lane = body["lane"]
        if body["arena"] is not None:  # "call" and "tree": inputs in the lane's arena
            arenas[lane] = _WorkerArena(body["arena"], body["size"], watch)
        arena = arenas[lane]
        if kind == "tree":
            answer, calls = _serve_tree(sampler, body, arena, device, beat, calls, first_line, last_frames)
            send(answer)
            continue
        # kind == "call"
        staged = [None if spec is None else arena.view(*spec) for spec in body["inputs"]]
        given = [None if t is None else t for t in staged]
        if device.type != "cpu":  # the device keeps its own copies while the parent's are unchanged
            given = [None if spec is None else arena.on_device(slot, spec, device) for slot, spec in enumerate(body["inputs"])]
        target, draft, drafts, uniforms, seeds = given
        assert target is not None and draft is not None and drafts is not None, "a chain call has its three inputs"
        rows, k = drafts.shape
        if body["generator"] is None:
            generator = None
        elif body["generator"] != "continue":
            generator = torch.Generator(device=device)
            _set_state(generator, body["generator"])
        tokens_out = arena.output(body["outputs"][0], (rows, k + 1))
        accepted_out = arena.output(body["outputs"][1], (rows,))
        per_call = [(slice(i, i + 1), 1) for i in range(rows)] if body["per_row"] else [(slice(0, rows), rows)]
        encoded: list[Any] = []
        seconds: list[float] = []
        try:
            try:
                for part, n in per_call:
                    calls += 1
                    beat[:8] = calls.to_bytes(8, "little")
                    args = (target[part], draft[part], drafts[part], generator)
                    kwargs = {} if uniforms is None else {"uniforms": uniforms[part]}
                    if seeds is not None:
                        kwargs["seeds"] = seeds[part]
                    start = time.perf_counter()
                    output = sampler(*args, **kwargs)
                    if device.type == "cuda":
                        torch.cuda.synchronize(device)
                    seconds.append(time.perf_counter() - start)
                    if _well_formed(output, n, k, device):
                        tokens_out[part].copy_(output[0])
                        accepted_out[part].copy_(output[1])
                        encoded.append(("placed", part.start, n))
                    else:
                        encoded.append(("object", _encode(output, device)))
                        break  # the parent's audit stops at this call
            finally:
                written = arena.written(body["inputs"][:3], staged[:3], given[:3])
        except SystemExit as exc:
            send(("raised", "SystemExit", f"sys.exit({exc.code!r}) in the sampler", last_frames(exc), written))
            continue
        except BaseException as exc:  # noqa: BLE001 - everything the sampler raises is evidence
            send(("raised", type(exc).__name__, first_line(exc), last_frames(exc), written))
            continue
        send(("done", encoded, None if generator is None else _state_of(generator), seconds, written))


def _serve_loop(sampler: Any, body: dict[str, Any], beat: mmap.mmap, calls: int, send: Any, first_line: Any, last_frames: Any) -> int:  # pragma: no cover - runs in the worker process (covered by tests/test_loop_isolation.py)
    """One generation-loop call: rebuild the harness's models, beat at each model call, reply."""
    from ._loop import MarkovLM

    count = [calls]

    def on_call() -> None:
        count[0] += 1
        beat[:8] = count[0].to_bytes(8, "little")

    def model(description: tuple[Any, ...]) -> MarkovLM:
        kind, logits, context = description
        assert kind == "markov", kind
        built = MarkovLM(logits, context=tuple(context))
        object.__setattr__(built, "on_call", on_call)
        return built

    generator = torch.Generator()
    generator.set_state(body["generator"])
    try:
        output = sampler(model(body["target"]), model(body["draft"]), body["prompt"], body["num_tokens"], body["params"], generator)
    except SystemExit as exc:
        send(("raised", "SystemExit", f"sys.exit({exc.code!r}) in the loop", last_frames(exc)))
        return count[0]
    except BaseException as exc:  # noqa: BLE001 - everything the loop raises is evidence
        send(("raised", type(exc).__name__, first_line(exc), last_frames(exc)))
        return count[0]
    send(("loop-done", _encode_value(output, torch.device("cpu"))))
    return count[0]


def _serve_tree(
    sampler: Any, body: dict[str, Any], arena: _WorkerArena, device: torch.device, beat: mmap.mmap, calls: int, first_line: Any, last_frames: Any
) -> tuple[tuple[Any, ...], int]:  # pragma: no cover - runs in the worker process (covered by tests/trees/test_tree_isolation.py)
    """A tree sampler call on a :class:`~specverify._tree.TreeBatch` viewed in the arena, or (``per_row``,
    for an unbatched sampler) one call per row, each beating: the reply, and the calls made so far."""
    from ._tree import TreeBatch, rows_of

    specs = body["inputs"]
    staged = [None if spec is None else arena.view(*spec) for spec in specs]
    key = (arena.input_bytes, *[None if spec is None else tuple(spec) for spec in specs[:4]])
    held = arena.tree
    if held is not None and held[0][0] is key[0] and held[0][1:] == key[1:]:
        tree = held[1]  # the same tree again, unchanged: its derived structure is kept, as in the harness's process
        given = [tree.parents, tree.tokens, tree.target_probs, tree.draft_probs, staged[4]]
        if device.type == "cpu":
            staged[:4] = given[:4]
    else:
        given = list(staged)
        if device.type != "cpu":
            given[:4] = [None if spec is None else arena.on_device(slot, spec, device) for slot, spec in enumerate(specs[:4])]
        tree = object.__new__(TreeBatch)  # validated by the parent, which holds the same values
        for name, value in zip(("parents", "tokens", "target_probs", "draft_probs"), given[:4]):
            object.__setattr__(tree, name, value)
        arena.tree = (key, tree)
    if device.type != "cpu" and specs[4] is not None:
        given[4] = arena.on_device(4, specs[4], device)
    uniforms = given[4]
    generator = None
    if body["generator"] is not None:
        generator = torch.Generator(device=device)
        _set_state(generator, body["generator"])
    path_at, token_at = body["outputs"]
    rows, width = tree.batch, body["path_width"]
    per_row = body.get("per_row", False)
    parts = [(slice(i, i + 1), 1) for i in range(rows)] if per_row else [(slice(0, rows), rows)]
    paths_out, tokens_out = arena.output(path_at, (rows, width)), arena.output(token_at, (rows,))
    seconds: list[float] = []
    output: Any = "placed"
    try:
        try:
            for part, n in parts:
                calls += 1
                beat[:8] = calls.to_bytes(8, "little")
                given_tree = rows_of(tree, part) if per_row else tree
                row_uniforms = None if uniforms is None else uniforms[part]
                start = time.perf_counter()
                result = sampler(given_tree, generator, **({} if row_uniforms is None else {"uniforms": row_uniforms}))
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                seconds.append(time.perf_counter() - start)
                depth = given_tree.depth if per_row else width - 1  # a row's path is as long as its own tree is deep
                if not _well_formed(result, n, depth, device):
                    output = ("row", part.start, _encode(result, device)) if per_row else _encode(result, device)
                    break  # the parent audits this call's output; no later row is called
                paths_out[part, : depth + 1].copy_(result[0])
                paths_out[part, depth + 1 :] = -1
                tokens_out[part].copy_(result[1])
        finally:
            written = arena.written(specs[:3], staged[:3], given[:3])
            if written:
                arena.tree = None
    except SystemExit as exc:
        return ("raised", "SystemExit", f"sys.exit({exc.code!r}) in the sampler", last_frames(exc), written), calls
    except BaseException as exc:  # noqa: BLE001 - everything the sampler raises is evidence
        return ("raised", type(exc).__name__, first_line(exc), last_frames(exc), written), calls
    return ("tree-done", output, None if generator is None else _state_of(generator), seconds, written), calls


class _WorkerArena:
    """The worker's maps of the arena: shared for outputs, copy-on-write for the sampler's inputs
    where the kernel says which pages were written (else shared, and the parent compares)."""

    def __init__(self, path: str, size: int, watch: _PageWatch | None) -> None:
        self.fd = os.open(path, os.O_RDWR)  # kept: the parent unlinks the name after the first call
        self.size = size
        self.watch = watch
        self.shared = mmap.mmap(self.fd, size)
        self.shared_bytes = torch.frombuffer(self.shared, dtype=torch.uint8)
        self.private: mmap.mmap | None = None
        self.input_bytes = self.shared_bytes
        self._fresh_private()
        self.device_copies: dict[int, tuple[int, torch.Tensor]] = {}
        #: The last tree call's TreeBatch and what it was built on (the input map and slots).
        self.tree: tuple[tuple[Any, ...], Any] | None = None

    def __del__(self) -> None:
        os.close(self.fd)

    def view(self, offset: int, shape: tuple[int, ...], dtype: torch.dtype, generation: int) -> torch.Tensor:
        return _view(self.input_bytes, offset, shape, dtype)

    def output(self, offset: int, shape: tuple[int, ...]) -> torch.Tensor:
        return _view(self.shared_bytes, offset, shape, torch.int64)

    def on_device(self, slot: int, spec: tuple[Any, ...], device: torch.device) -> torch.Tensor:
        """A fresh copy on the device of an input whose pristine device copy is kept per generation."""
        generation = spec[3]
        held = self.device_copies.get(slot)
        if held is None or held[0] != generation:
            held = (generation, _view(self.shared_bytes, *spec[:3]).to(device))
            self.device_copies[slot] = held
        return held[1].clone()

    def written(self, specs: list[Any], staged: list[torch.Tensor | None], given: list[torch.Tensor | None]) -> list[int]:
        """The input slots the sampler wrote to; after a write, the copy-on-write map starts afresh."""
        written, touched = [], False
        for slot, (spec, mapped, sent) in enumerate(zip(specs, staged, given)):
            if spec is None or mapped is None or sent is None:
                continue
            if sent is not mapped:  # a device copy: compared with the pristine one
                if not unchanged(sent, self.device_copies[slot][1]):
                    written.append(slot)
            elif self.watch is not None and self.watch.written(mapped.data_ptr(), mapped.nbytes):
                touched = True
                if not unchanged(mapped, _view(self.shared_bytes, *spec[:3])):
                    written.append(slot)
        if touched:
            self._fresh_private()
        return written

    def _fresh_private(self) -> None:
        """A new copy-on-write map: the pages the sampler made its own are dropped, and the inputs
        read the shared copy again."""
        if self.watch is not None:
            self.private = mmap.mmap(self.fd, self.size, access=mmap.ACCESS_COPY)
            self.input_bytes = torch.frombuffer(self.private, dtype=torch.uint8)


if __name__ == "__main__":
    from specverify._worker import _serve as serve  # the module's own classes, not __main__'s, go into pickles

    serve()
