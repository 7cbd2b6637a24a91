"""What every sampler under test shares, whatever its kind: its time limits, its process, its faults.

A call to a sampler under test ends in an output, or in a :class:`SamplerFault` that says exactly
what happened (it raised, hung, died, or returned something its contract forbids).  Isolated, the
sampler runs in a supervised process (:mod:`specverify._worker`) and a fault of the process is read
from how the call ended there; in process, calls go through a helper thread (:class:`CallThread`)
so a hang is abandoned at its limit.  :class:`CallLimit` says how long one call may take.
"""

from __future__ import annotations

import importlib
import inspect
import queue
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import torch

from .._contract import Capabilities, Violation
from .._kinds import Kind
from .._layout import StepLayout
from .._record.evidence import Evidence
from .._record.reach import ReachRecorder
from .._worker import SamplerProcess, WorkerDied, WorkerHung, WorkerLoadError, WorkerRaised
from ..errors import SamplerFault, SamplerSpecError

__all__ = [
    "UNBATCHED_AUDIT_ROWS",
    "CallLimit",
    "CallThread",
    "SamplerFault",
    "Supervised",
    "check_device",
    "importable_source",
    "last_frames",
    "process_evidence",
    "raised",
]

#: An unbatched sampler's outputs are audited together, this many rows at a time.
UNBATCHED_AUDIT_ROWS = 4_096
#: What runs a unit in the sampler's process (:func:`specverify._calling.sut.host_unit`), named so
#: the worker runs it by reference and never imports the calling layer.
UNIT_HOST = ("specverify._calling.sut", "host_unit")


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
    qualname = (
        getattr(sampler, "__qualname__", None) if inspect.isfunction(sampler) or inspect.isclass(sampler) else None
    )
    if home and qualname:
        candidates.append((home, qualname))
    if home in sys.modules:
        candidates += [
            (home, name)
            for name, value in vars(sys.modules[home]).items()
            if value is sampler and not name.startswith("__")
        ]
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
    """What a sampler under test shares, whatever its kind: its call limit, its process (or none, in
    process) and the evidence a fault keeps (the sampler's traceback and last output)."""

    kind: Kind  # what the sampler is (detected once, at load)
    layout: StepLayout[Any]
    name: str
    capabilities: Capabilities
    isolation: str
    sampler: Callable[..., Any] | None  # in process: the sampler, posed as its kind is called
    device: torch.device
    dtype: torch.dtype
    limit: CallLimit
    last_fault: SamplerFault | None
    reach: ReachRecorder
    timed: bool
    calls: int
    rows: int
    seconds: float
    hangs: int
    crashes: int
    worker_starts: int  # processes the sampler was loaded into: 1 + restarts after a crash or hang
    _warm: bool
    _process: SamplerProcess | None
    _thread: CallThread | None

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

    def unit(self, work: Callable[[Any, Any], Any], unit: Any, *, there: bool) -> Any:
        """``work(self, unit)`` (:func:`specverify._calling.pool.run_unit`): with ``there`` and an
        isolated step sampler, run and tallied in the sampler's process, so only the unit's result
        (counts) travels back and the harness's work on it runs on the worker's core; else here.
        Either way the same calls and audits, the same result.
        """
        from .pool import UnitDone, run_unit

        if not there or self._process is None or not self.kind.units_in_worker:
            return run_unit(self, work, unit)
        self._fresh_process()
        started = time.perf_counter()
        try:
            tag, value = self._process.call_unit(
                UNIT_HOST,
                (work.__module__, work.__qualname__),
                unit,
                limit=self.limit(getattr(unit, "call_elements", CallLimit.MEASURED_ELEMENTS)),
            )
        except WorkerRaised as exc:  # the unit's own code, not the sampler: a harness error, never a pass
            raise RuntimeError(
                f"a unit failed in the sampler's process: {exc.type_name}: {exc.text}\n{exc.trace}"
            ) from None
        except (WorkerHung, WorkerDied) as exc:
            raise self._worker_fault(exc, self.calls + 1, "a unit of an experiment, run in its process") from None
        if tag == "fault":
            value.details = {**self._evidence(), **value.details}
            self.last_fault = value
            raise value
        done: UnitDone = value
        for name in ("calls", "rows", "seconds"):
            setattr(self, name, getattr(self, name) + done.usage.get(name, 0))
        self._warm = True
        self.limit.observe(0, (time.perf_counter() - started) / max(1, int(done.usage.get("calls", 1))), warm=True)
        return done

    def _worker_fault(self, exc: WorkerRaised | WorkerHung | WorkerDied, first_call: int, where: str) -> SamplerFault:
        """The fault a call's end in the sampler's process is: it raised, hung (and was killed), or died."""
        if isinstance(exc, WorkerRaised):
            return self._fault(
                Violation("raised", f"the sampler raised {exc.type_name}: {exc.text}"), self._evidence(trace=exc.trace)
            )
        if isinstance(exc, WorkerHung):
            self.hangs += 1
            self.limit.hung = True
            message = (
                f"the sampler did not return within {exc.limit:g} s (call {first_call + exc.calls}: {where}); its "
                "process was killed"
            )
            return self._fault(Violation("hang", message), self._evidence())
        self.crashes += 1
        return self._fault(
            Violation("crashed", f"the sampler's process died in call {first_call + exc.calls} ({where}): {exc.how}"),
            self._evidence(),
        )

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


class CallThread:
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

    def run(
        self, fn: Callable[..., Any], calls: list[tuple[tuple, dict]], timeout: float
    ) -> tuple[list[Any], list[float]]:
        state: dict[str, Any] = {
            "beat": time.monotonic(),
            "results": [],
            "seconds": [],
            "error": None,
            "abandoned": False,
        }
        done = threading.Event()
        self._requests.put((fn, calls, state, done))
        poll = min(0.5, timeout / 8)
        while not done.wait(poll):
            if time.monotonic() - state["beat"] > timeout:
                state["abandoned"] = True
                raise SamplerFault(Violation("hang", f"the sampler did not return within {timeout:g} s"))
        if state["error"] is not None:
            exc = state["error"]
            raise SamplerFault(raised(exc), {"traceback": last_frames(exc)}) from exc
        return state["results"], state["seconds"]


def raised(exc: BaseException) -> Violation:
    text = str(exc).strip().splitlines()
    return Violation("raised", f"the sampler raised {type(exc).__name__}: {text[0] if text else '(no message)'}")


def last_frames(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-8))
