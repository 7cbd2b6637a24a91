"""The wire between the harness and the sampler's process: messages, replies and how values travel.

Every message is one pickled tuple on a pipe: ``(verb, body)`` from the harness (:data:`LOAD`, then
the verb of the sampler's kind, :attr:`specverify._kinds.Kind.verb`), and a reply tagged by what
happened (``"ready"``, ``"load-error"``, ``"raised"``, ``"done"``).  Tensors of the contract's shapes travel
through the arena (:mod:`specverify._worker.arena`), never the pipe; anything else a sampler returns
is encoded as it is (a tensor on another device described, an unpicklable value named), so the
parent's audit sees exactly what came back.  A generator's state travels as plain bytes.

The exceptions here are how the harness reads a call's end in the worker: it raised, it died, it hung.
"""

from __future__ import annotations

import pickle
from multiprocessing.connection import Connection
from typing import Any

import torch

from .._contract import ForeignTensor
from .._kinds import KINDS, ChainKind, TreeKind

__all__ = [
    "DIRECT",
    "LOAD",
    "STEP",
    "TREE_STEP",
    "UNIT",
    "Channel",
    "WorkerDied",
    "WorkerHung",
    "WorkerLoadError",
    "WorkerRaised",
    "encode",
    "encode_value",
    "set_state",
    "state_of",
    "well_formed",
]

#: The verb that loads a sampler into the worker.
LOAD = "load"
#: The verbs that call it, one per way of calling, each the one its kind names (``Kind.verb``): a
#: chain step on arena inputs, a tree step on a tree batch in the arena, and the verbs of the kinds
#: whose subject is called as itself (a loop on models, an engine on prompts), each served by its
#: kind (:meth:`specverify._kinds.Kind.serve`).
STEP = ChainKind.verb
TREE_STEP = TreeKind.verb
DIRECT = tuple(kind.verb for kind in KINDS if not kind.steps)
#: A unit of an experiment (:mod:`specverify._calling.pool`), run and tallied in the worker: its
#: counts travel back, not its tokens.
UNIT = "unit"


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


class Channel:
    """One direction of the pipe: pickled messages, one per frame."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def send(self, message: Any) -> None:
        self.connection.send_bytes(pickle.dumps(message))

    def receive(self) -> Any:
        return pickle.loads(self.connection.recv_bytes())

    def poll(self, seconds: float) -> bool:
        return self.connection.poll(seconds)

    def close(self) -> None:
        self.connection.close()


def state_of(generator: torch.Generator) -> bytes:
    """A generator's state as plain bytes: a pickled tensor costs a torch serialisation each way
    (about 0.3 ms each, as much as a small call itself)."""
    return generator.get_state().numpy().tobytes()


def set_state(generator: torch.Generator, state: bytes) -> None:
    generator.set_state(torch.frombuffer(bytearray(state), dtype=torch.uint8))


def encode_value(value: Any, device: torch.device) -> Any:
    """A value as it can travel back: a tensor copied to the CPU (described where it is on another
    device than the inputs'), anything picklable as it is, the rest by its type's name."""
    if isinstance(value, torch.Tensor):
        if value.device != device:
            return ForeignTensor(tuple(value.shape), value.dtype, str(value.device))
        return value.detach().to("cpu", copy=True)
    try:
        pickle.dumps(value)
        return value
    except Exception:  # noqa: BLE001 - an unpicklable return is described, not carried
        return Unpicklable(type(value).__name__)


class Unpicklable:
    """What the sampler returned that cannot be pickled, by its type's name."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


def encode(output: Any, device: torch.device) -> Any:
    """An output that is not of the contract's shapes, each member encoded (:func:`encode_value`)."""
    if isinstance(output, (tuple, list)):
        return (
            type(output)(encode_value(v, device) for v in output)
            if isinstance(output, tuple)
            else [encode_value(v, device) for v in output]
        )
    return encode_value(output, device)


def well_formed(output: Any, rows: int, k: int, device: torch.device) -> bool:
    """Whether ``output`` is a pair of int64 tensors on ``device`` shaped ``[rows, k+1]``, ``[rows]``:
    what travels back through the arena."""
    return (
        isinstance(output, (tuple, list))
        and len(output) == 2
        and all(isinstance(t, torch.Tensor) and t.dtype == torch.int64 and t.device == device for t in output)
        and tuple(output[0].shape) == (rows, k + 1)
        and tuple(output[1].shape) == (rows,)
    )
