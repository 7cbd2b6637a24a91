"""The sampler's own process: it imports and builds the sampler and makes every call.

Whatever the sampler does there (exits, aborts, segfaults, is killed for memory, hangs, prints
megabytes) the harness survives it: :class:`SamplerProcess` sees the process end or a call outlive
its limit, kills what is left and says what happened, with the exit code or signal and the last
output the sampler wrote.  It is started with ``python -m specverify._worker`` (never by re-running
the caller's ``__main__``), in a session of its own so the terminal's Ctrl-C reaches only the
harness, which decides.

Inputs travel through a shared-memory arena the parent writes once per call and the worker reads
in place (the sampler is given views of it, so an in-place write shows in the parent); outputs of
the contract's shapes come back through the same arena; anything else comes back pickled, as it is,
for the parent's audit.  The generator's state travels with each call and back, so the sampler
draws exactly what it would have drawn in the parent's process.
"""

from __future__ import annotations

import atexit
import collections
import dataclasses
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

import torch

__all__ = ["ForeignTensor", "SamplerProcess", "WorkerDied", "WorkerHung", "WorkerLoadError", "WorkerRaised"]

#: Bytes of the sampler's stdout and stderr kept (the last ones); older output is dropped.
OUTPUT_TAIL = 64 * 1024
#: Frames of the sampler's traceback kept (the innermost).
TRACEBACK_FRAMES = 8
_ALIGN = 64
#: Seconds a call may take before the progress display says the harness is waiting on it.
SLOW_CALL = 2.0


@dataclasses.dataclass(frozen=True)
class ForeignTensor:
    """A tensor the sampler returned on another device than its inputs' (``meta`` included)."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    device: str


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
        count = 1
        for n in shape:
            count *= n
        width = torch.empty((), dtype=dtype).element_size()
        return self.bytes[offset : offset + count * width].view(dtype).view(shape)

    def unlink(self) -> None:
        if self.linked:
            self.linked = False
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass


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


class SamplerProcess:
    """A supervised worker process holding one sampler.

    Args:
        source: what to load: ``("spec", "pkg.module:attr")`` or ``("ref", module, qualname)``.
        device: the device a sampler that declares none runs on.
    """

    def __init__(self, source: tuple[str, ...], device: str | None) -> None:
        self.source = source
        self.device_hint = device
        self._proc: subprocess.Popen | None = None
        self._tail: collections.deque[bytes] = collections.deque()
        self._tail_bytes = 0
        self._tail_lock = threading.Lock()
        self._arena: _Arena | None = None
        self._beat: mmap.mmap | None = None
        self.starts = 0
        self.info: dict[str, Any] = {}
        #: Called with (seconds waited on the current call, its limit) while a call is slow.
        self.on_wait: Any = None

    # -- lifetime ---------------------------------------------------------------------------
    def start(self, load_limit: float = 600.0) -> dict[str, Any]:
        """Load the sampler (into a fresh process, or an idle one of this harness): its name,
        capabilities and device."""
        if not self.alive():
            self._spawn()
        self._send(("load", {"source": self.source, "device": self.device_hint, "sys_path": list(sys.path), "threads": torch.get_num_threads()}))
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
        try:
            os.ftruncate(fd, 8)
            self._beat = mmap.mmap(fd, 8)
        finally:
            os.close(fd)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "specverify._worker", beat_path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # the terminal's SIGINT reaches the harness only
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
        self._owner = os.getpid()
        _LIVE.add(self)
        self.starts += 1
        self._send_to = Connection(os.dup(self._proc.stdin.fileno()), readable=False)
        self._recv_from = Connection(os.dup(self._proc.stdout.fileno()), writable=False)
        self._proc.stdin.close()
        self._proc.stdout.close()
        threading.Thread(target=self._drain, args=(self._proc.stderr,), name="specverify-sampler-output", daemon=True).start()
        try:  # the worker maps the beat file as it starts; the name is then not needed
            self._wait_for(lambda: self._beat_count() != 0 or not self.alive(), 60.0)
        finally:
            os.unlink(beat_path)
        if not self.alive():
            raise WorkerLoadError("the sampler's process did not start: " + _how_it_ended(self._proc.poll() if self._proc else None) + _tail_note(self.output()))

    def _wait_for(self, condition: Any, limit: float) -> None:
        deadline = time.monotonic() + limit
        while not condition() and time.monotonic() < deadline:
            time.sleep(0.01)

    def release(self) -> None:
        """Keep a live process for the next sampler this harness loads (one torch import per
        harness, not per run); a process that died or was killed is not kept."""
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
                return process
            process.kill()
        return cls(source, device)

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
        if self._arena is not None:
            self._arena.unlink()
            self._arena = None

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
        per_row: bool,
        generator: torch.Generator | None,
        limit: float,
    ) -> tuple[list[Any], list[float], list[torch.Tensor | None]]:
        """Make the calls on ``inputs`` (one, or one per row); outputs, seconds per call, staged inputs.

        The staged inputs are the views the sampler was given: compared with ``inputs`` they show
        any write the sampler made to them.
        """
        rows, k = inputs[2].shape
        specs = [None if t is None else (tuple(t.shape), t.dtype) for t in inputs]
        specs += [((rows, k + 1), torch.int64), ((rows,), torch.int64)]
        offsets, size = _layout(specs)
        if self._arena is None or self._arena.size < size:
            if self._arena is not None:
                self._arena.unlink()
            self._arena = _Arena(max(size, 2 * self._arena.size if self._arena else size, 1 << 20))
        arena = self._arena
        staged: list[torch.Tensor | None] = []
        for tensor, offset in zip(inputs, offsets[:4]):
            if tensor is None:
                staged.append(None)
            else:
                view = arena.view(offset, tuple(tensor.shape), tensor.dtype)
                view.copy_(tensor)
                staged.append(view)
        request = {
            "arena": arena.path if arena.linked else None,
            "size": arena.size,
            "inputs": [None if s is None else (o, s[0], s[1]) for s, o in zip(specs[:4], offsets[:4])],
            "outputs": (offsets[4], offsets[5]),
            "per_row": per_row,
            "generator": None if generator is None else generator.get_state(),
        }
        self._send(("call", request))
        started = self._beat_count()
        reply = self._wait(limit, calls_before=started)
        arena.unlink()  # the worker has it mapped; the name is no longer needed
        calls_made = self._beat_count() - started
        if reply[0] == "raised":
            _, type_name, text, trace = reply
            raise WorkerRaised(type_name, text, trace, calls_made)
        _, encoded, state, seconds = reply
        if generator is not None and state is not None:
            generator.set_state(state)
        tokens = arena.view(offsets[4], (rows, k + 1), torch.int64).clone()  # the arena is reused
        accepted = arena.view(offsets[5], (rows,), torch.int64).clone()
        outputs = [
            (tokens[first : first + n], accepted[first : first + n]) if kind == "placed" else value
            for kind, first, n, value in ((*item, None) if item[0] == "placed" else (item[0], 0, 0, item[1]) for item in encoded)
        ]
        return outputs, seconds, staged

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


_LIVE: set[SamplerProcess] = set()
_IDLE: dict[tuple[Any, ...], list[SamplerProcess]] = {}


def _pool_key(device: str | None) -> tuple[Any, ...]:
    return (device, tuple(sys.path))


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
    from ._contract import capabilities_of, load_sampler, name_of, step_sampler

    proto_in, proto_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # the sampler's stdout joins its stderr in the parent's bounded capture
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
    arena: tuple[str, mmap.mmap, torch.Tensor] | None = None
    with open(sys.argv[1], "r+b") as handle:
        beat = mmap.mmap(handle.fileno(), 8)
    calls = 1  # the count of calls started, plus one: nonzero once this process is up
    beat[:8] = calls.to_bytes(8, "little")
    while True:
        try:
            kind, body = pickle.loads(receive.recv_bytes())
        except EOFError:
            return
        if kind == "load":
            sys.path[:] = body["sys_path"]
            torch.set_num_threads(body["threads"])
            try:
                if body["source"][0] == "spec":
                    sampler = load_sampler(body["source"][1])
                else:
                    import importlib

                    sampler = importlib.import_module(body["source"][1])
                    for part in body["source"][2].split("."):
                        sampler = getattr(sampler, part)
                sampler = step_sampler(sampler)
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
            send(("ready", {"name": name_of(sampler), "capabilities": capabilities, "device": str(device), "contract": getattr(sampler, "contract", "step")}))
            continue
        # kind == "call"
        if body["arena"] is not None:
            with open(body["arena"], "r+b") as handle:
                mapped = mmap.mmap(handle.fileno(), body["size"])
            arena = (body["arena"], mapped, torch.frombuffer(mapped, dtype=torch.uint8))
        assert arena is not None
        data = arena[2]

        def view(offset: int, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
            count = 1
            for n in shape:
                count *= n
            width = torch.empty((), dtype=dtype).element_size()
            return data[offset : offset + count * width].view(dtype).view(shape)

        staged = [None if spec is None else view(*spec) for spec in body["inputs"]]
        given = [None if t is None else (t if device.type == "cpu" else t.to(device)) for t in staged]
        target, draft, drafts, uniforms = given
        rows, k = drafts.shape
        generator = None
        if body["generator"] is not None:
            generator = torch.Generator(device=device)
            generator.set_state(body["generator"])
        tokens_out = view(body["outputs"][0], (rows, k + 1), torch.int64)
        accepted_out = view(body["outputs"][1], (rows,), torch.int64)
        per_call = [(slice(i, i + 1), 1) for i in range(rows)] if body["per_row"] else [(slice(0, rows), rows)]
        encoded: list[Any] = []
        seconds: list[float] = []
        try:
            for part, n in per_call:
                calls += 1
                beat[:8] = calls.to_bytes(8, "little")
                args = (target[part], draft[part], drafts[part], generator)
                kwargs = {} if uniforms is None else {"uniforms": uniforms[part]}
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
            for original, sent in zip(staged[:3], given[:3]):
                if sent is not original:
                    original.copy_(sent)  # a write on the device shows in the parent's audit
        except SystemExit as exc:
            send(("raised", "SystemExit", f"sys.exit({exc.code!r}) in the sampler", last_frames(exc)))
            continue
        except BaseException as exc:  # noqa: BLE001 - everything the sampler raises is evidence
            send(("raised", type(exc).__name__, first_line(exc), last_frames(exc)))
            continue
        send(("done", encoded, None if generator is None else generator.get_state(), seconds))


if __name__ == "__main__":
    from specverify._worker import _serve as serve  # the module's own classes, not __main__'s, go into pickles

    serve()
