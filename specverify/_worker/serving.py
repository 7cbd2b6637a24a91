"""The worker's side: what runs in the sampler's own process (``python -m specverify._worker``).

One loop reads a message, looks its verb up in :data:`SERVES` and replies.  ``load`` imports and
builds the sampler and detects its kind (:func:`specverify._kinds.kind_of`), which names the verb
its calls come with: a chain step and a tree step read their inputs from the lane's arena
(:class:`~specverify._worker.arena.WorkerArena`) and put outputs of the contract's shapes back
there; a subject called as itself (a generation loop, an engine) is called by its kind
(:meth:`specverify._kinds.Kind.serve`: a loop's models rebuilt from their descriptions).  Every call the
sampler is given beats the shared counter first, which is how the harness tells a slow call from a
hung one.
"""

from __future__ import annotations

import dataclasses
import io
import mmap
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

import torch

from .arena import PageWatch, WorkerArena
from .wire import DIRECT, LOAD, STEP, TREE_STEP, UNIT, Channel, encode, encode_value, set_state, state_of, well_formed

__all__ = ["SERVES", "serve"]

#: Frames of the sampler's traceback kept (the innermost).
TRACEBACK_FRAMES = 8


@dataclasses.dataclass
class Worker:
    """What the worker holds between messages: the sampler, its device, the lanes' arenas, the
    generator a call sent behind another goes on with, and the count of calls started (beaten)."""

    reply: Channel
    beat: mmap.mmap
    page_watch: PageWatch | None
    sampler: Any = None
    kind: Any = None  # the sampler's kind, as its declarations give it here
    raw: Any = None  # the sampler as loaded, before its kind posed it (what a unit's sampler under test wraps)
    local: Any = None  # the in-process sampler under test units run on, built at the first unit
    device: torch.device = dataclasses.field(default_factory=lambda: torch.device("cpu"))
    arenas: dict[int, WorkerArena] = dataclasses.field(default_factory=dict)
    generator: torch.Generator | None = None
    watch: PageWatch | None = None
    calls: int = 1  # the count of calls started, plus one: nonzero once this process is up

    def beat_once(self) -> None:
        """One more call started (or, for a loop, one more model call)."""
        self.calls += 1
        self.beat[:8] = self.calls.to_bytes(8, "little")

    def send(self, message: Any) -> None:
        self.reply.send(message)

    def beating(self, sampler: Any) -> Any:
        """``sampler``, beating the shared counter at each call (a unit's calls, timed as the
        harness times its own)."""
        return _Beating(sampler, self.beat_once)

    def arena(self, body: dict[str, Any]) -> WorkerArena:
        """The lane's arena, mapped afresh where the parent made a new one."""
        lane = body["lane"]
        if body["arena"] is not None:
            self.arenas[lane] = WorkerArena(body["arena"], body["size"], self.watch)
        return self.arenas[lane]


def last_frames(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-TRACEBACK_FRAMES))


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else "(no message)"


def raised(exc: BaseException, *, what: str = "the sampler") -> tuple[Any, ...]:
    """The reply to a call the sampler (or loop) raised in (``sys.exit`` included)."""
    if isinstance(exc, SystemExit):
        return ("raised", "SystemExit", f"sys.exit({exc.code!r}) in {what}", last_frames(exc))
    return ("raised", type(exc).__name__, first_line(exc), last_frames(exc))


def load(worker: Worker, body: dict[str, Any]) -> None:
    """Import and build the sampler, pose it as its kind is called, and say what it is."""
    from .._contract import capabilities_of, name_of, resolve_sampler
    from .._kinds import kind_of

    sys.path[:] = body["sys_path"]
    worker.watch, worker.generator = (worker.page_watch if body["page_watch"] else None), None
    worker.arenas.clear()
    torch.set_num_threads(body["threads"])
    try:
        sampler = (
            resolve_sampler(body["source"][1])
            if body["source"][0] == "spec"
            else _by_reference(body["source"][1], body["source"][2])
        )
        kind = worker.kind = kind_of(sampler)
        worker.raw, worker.local = sampler, None
        warp = kind.warp_of(sampler)  # the oracle, by name (specverify._warps.declared)
        sampler = worker.sampler = kind.posed(sampler)
        capabilities = capabilities_of(sampler)
        device = worker.device = torch.device(capabilities.device or body["device"] or "cpu")
        if device.type == "cuda":
            torch.cuda.set_device(device)
        torch.empty(1, device=device)  # the device is there
    except SystemExit as exc:
        worker.send(("load-error", f"importing or building the sampler called sys.exit({exc.code!r})"))
        return
    except BaseException as exc:  # noqa: BLE001 - the message is the evidence
        message = (
            str(exc)
            if type(exc).__name__ == "SamplerSpecError"
            else f"loading the sampler raised {type(exc).__name__}: {first_line(exc)}"
        )
        worker.send(("load-error", message))
        return
    info = {
        "name": name_of(sampler),
        "capabilities": capabilities,
        "device": str(device),
        "kind": kind,
        "page_watch": worker.watch is not None,
        "warp": warp,
    }
    worker.send(("ready", info))


def _by_reference(module: str, qualname: str) -> Any:
    import importlib

    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


def serve_step(worker: Worker, body: dict[str, Any]) -> None:
    """A chain step (one call, or one per row of an unbatched sampler) on inputs in the arena."""
    arena = worker.arena(body)
    staged = [None if spec is None else arena.view(*spec) for spec in body["inputs"]]
    given = list(staged)
    if worker.device.type != "cpu":  # the device keeps its own copies while the parent's are unchanged
        given = [
            None if spec is None else arena.on_device(slot, spec, worker.device)
            for slot, spec in enumerate(body["inputs"])
        ]
    drafts = given[2]
    assert given[0] is not None and given[1] is not None and drafts is not None, "a chain call has its three inputs"
    rows, k = drafts.shape
    if body["generator"] is None:
        worker.generator = None
    elif body["generator"] != "continue":
        worker.generator = torch.Generator(device=worker.device)
        set_state(worker.generator, body["generator"])
    outputs = (arena.output(body["outputs"][0], (rows, k + 1)), arena.output(body["outputs"][1], (rows,)))
    per_call = [(slice(i, i + 1), 1) for i in range(rows)] if body["per_row"] else [(slice(0, rows), rows)]
    encoded: list[Any] = []
    seconds: list[float] = []
    try:
        try:
            for part, n in per_call:
                if not _step_call(worker, given, part, n, k, outputs, encoded, seconds):
                    break  # the parent's audit stops at this call
        finally:
            written = arena.written(body["inputs"][:3], staged[:3], given[:3])
    except BaseException as exc:  # noqa: BLE001 - everything the sampler raises is evidence
        worker.send((*raised(exc), written))
        return
    worker.send(("done", encoded, None if worker.generator is None else state_of(worker.generator), seconds, written))


def _step_call(
    worker: Worker,
    given: list[torch.Tensor | None],
    part: slice,
    n: int,
    k: int,
    outputs: tuple[torch.Tensor, torch.Tensor],
    encoded: list[Any],
    seconds: list[float],
) -> bool:
    """One call of a chain step on rows ``part``: its output placed in the arena (``True``), or
    encoded as it is for the parent's audit (``False``: no later call is made)."""
    target, draft, drafts, uniforms, seeds = given
    assert target is not None and draft is not None and drafts is not None
    worker.beat_once()
    kwargs: dict[str, Any] = {} if uniforms is None else {"uniforms": uniforms[part]}
    if seeds is not None:
        kwargs["seeds"] = seeds[part]
    start = time.perf_counter()
    output = worker.sampler(target[part], draft[part], drafts[part], worker.generator, **kwargs)
    if worker.device.type == "cuda":
        torch.cuda.synchronize(worker.device)
    seconds.append(time.perf_counter() - start)
    if not well_formed(output, n, k, worker.device):
        encoded.append(("object", encode(output, worker.device)))
        return False
    outputs[0][part].copy_(output[0])
    outputs[1][part].copy_(output[1])
    encoded.append(("placed", part.start, n))
    return True


def serve_tree_step(worker: Worker, body: dict[str, Any]) -> None:
    """A tree sampler call on a :class:`~specverify._trees.contract.TreeBatch` viewed in the arena, or (``per_row``,
    for an unbatched sampler) one call per row, each beating."""
    from .._trees.contract import rows_of

    arena = worker.arena(body)
    specs = body["inputs"]
    tree, staged, given = _tree_of(worker, arena, specs)
    uniforms = given[4]
    generator = None
    if body["generator"] is not None:
        generator = torch.Generator(device=worker.device)
        set_state(generator, body["generator"])
    rows, width = tree.batch, body["path_width"]
    per_row = body.get("per_row", False)
    parts = [(slice(i, i + 1), 1) for i in range(rows)] if per_row else [(slice(0, rows), rows)]
    paths_out, tokens_out = arena.output(body["outputs"][0], (rows, width)), arena.output(body["outputs"][1], (rows,))
    seconds: list[float] = []
    output: Any = "placed"
    try:
        try:
            for part, n in parts:
                worker.beat_once()
                given_tree = rows_of(tree, part) if per_row else tree
                kwargs = {} if uniforms is None else {"uniforms": uniforms[part]}
                start = time.perf_counter()
                result = worker.sampler(given_tree, generator, **kwargs)
                if worker.device.type == "cuda":
                    torch.cuda.synchronize(worker.device)
                seconds.append(time.perf_counter() - start)
                depth = given_tree.depth if per_row else width - 1  # a row's path is as long as its own tree is deep
                if not well_formed(result, n, depth, worker.device):
                    output = (
                        ("row", part.start, encode(result, worker.device)) if per_row else encode(result, worker.device)
                    )
                    break  # the parent audits this call's output; no later row is called
                paths_out[part, : depth + 1].copy_(result[0])
                paths_out[part, depth + 1 :] = -1
                tokens_out[part].copy_(result[1])
        finally:
            written = arena.written(specs[:3], staged[:3], given[:3])
            if written:
                arena.tree = None
    except BaseException as exc:  # noqa: BLE001 - everything the sampler raises is evidence
        worker.send((*raised(exc), written))
        return
    worker.send(("done", output, None if generator is None else state_of(generator), seconds, written))


def _tree_of(worker: Worker, arena: WorkerArena, specs: list[Any]) -> tuple[Any, list[Any], list[Any]]:
    """The tree batch in the arena (the last one's, kept with its derived structure, where the same
    tree comes again unchanged), the inputs as mapped, and as given to the sampler."""
    from .._trees.contract import TreeBatch

    device = worker.device
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
            given[:4] = [
                None if spec is None else arena.on_device(slot, spec, device) for slot, spec in enumerate(specs[:4])
            ]
        tree = object.__new__(TreeBatch)  # validated by the parent, which holds the same values
        for name, value in zip(("parents", "tokens", "target_probs", "draft_probs"), given[:4]):
            object.__setattr__(tree, name, value)
        arena.tree = (key, tree)
    if device.type != "cpu" and specs[4] is not None:
        given[4] = arena.on_device(4, specs[4], device)
    return tree, staged, given


def serve_direct(worker: Worker, body: dict[str, Any]) -> None:
    """One call of a subject called as itself (a loop, an engine), as its kind serves it, beating."""
    try:
        output = worker.kind.serve(worker.sampler, body, worker.beat_once)
    except BaseException as exc:  # noqa: BLE001 - everything the subject raises is evidence
        worker.send(raised(exc, what=f"the {worker.kind.noun}"))
        return
    worker.send(("done", encode_value(output, torch.device("cpu"))))


class _Beating:
    """The sampler, beating the shared counter at each call (so the harness times each call of a
    unit, as it times each call it makes itself); its declarations read through."""

    def __init__(self, sampler: Any, beat: Callable[[], None]) -> None:
        self._sampler, self._beat = sampler, beat

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._beat()
        return self._sampler(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sampler, name)


def serve_unit(worker: Worker, body: dict[str, Any]) -> None:
    """An experiment's unit (:mod:`specverify._calling.pool`), run here by the harness's own code,
    named in the message as the unit's work is (``host``: it runs the unit on an in-process sampler
    under test of the sampler loaded here, the same calls and audits as the harness makes, its
    calls beating the counter), and tallied here: the reply is its result (counts), what it
    reached and its counters, or the sampler's fault."""
    from ..errors import SamplerFault

    try:
        done = _by_reference(*body["host"])(worker, _by_reference(*body["work"]), body["unit"])
    except SamplerFault as fault:
        worker.send(("fault", fault))
        return
    except BaseException as exc:  # noqa: BLE001 - the unit's own code failed here: a harness error, reported
        worker.send(raised(exc, what="the harness's unit"))
        return
    worker.send(("done", done))


#: What serves each verb (:mod:`specverify._worker.wire`): one entry per way a sampler is called.
SERVES: dict[str, Callable[[Worker, dict[str, Any]], None]] = {
    LOAD: load,
    STEP: serve_step,
    TREE_STEP: serve_tree_step,
    **dict.fromkeys(DIRECT, serve_direct),
    UNIT: serve_unit,
}


def _isolated() -> tuple[Channel, Channel]:
    """Take the pipes to the harness off stdin and stdout (the sampler's stdout joins its stderr, in
    the harness's bounded capture), ignore the terminal's Ctrl-C and die with the harness."""
    proto_in, proto_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    if isinstance(sys.stdout, io.TextIOWrapper):  # it is, unless the interpreter was started oddly
        sys.stdout.reconfigure(line_buffering=True)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the harness decides what Ctrl-C does
    try:  # die with the harness, even mid-hang
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except OSError:
        pass
    return Channel(Connection(proto_in, writable=False)), Channel(Connection(proto_out, readable=False))


def serve() -> None:  # pragma: no cover - runs in the worker process (covered by tests/test_isolation.py)
    """The worker's loop: one message, its verb's server, until the harness closes the pipe."""
    receive, reply = _isolated()
    beat = mmap.mmap(int(sys.argv[1]), 8)
    os.close(int(sys.argv[1]))
    worker = Worker(reply=reply, beat=beat, page_watch=PageWatch.works())
    beat[:8] = worker.calls.to_bytes(8, "little")
    while True:
        try:
            verb, body = receive.receive()
        except EOFError:
            return
        SERVES[verb](worker, body)
