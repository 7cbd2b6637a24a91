"""The shared-memory arena a call's inputs and outputs travel through, and the watch on its pages.

The parent writes a tensor into a lane's arena once and, while it passes the same tensor again
(same memory, layout, dtype and version: :func:`identity`), never again; the worker gives the
sampler views of it in place, no copy.  On Linux the worker maps the inputs copy-on-write and
reads, after each call, which of their pages became its own (:class:`PageWatch`, from
``/proc/self/pagemap``): a write to an input is seen exactly, at the cost of a few bytes per page,
and never reaches the shared copy.  Elsewhere the parent keeps a pristine copy and compares
(:func:`invalidate`).  Two lanes let the next call be staged while the one before it runs.
"""

from __future__ import annotations

import dataclasses
import mmap
import os
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

__all__ = ["INPUT_DTYPES", "Arena", "Lane", "PageWatch", "WorkerArena", "identity", "invalidate", "unchanged"]

_ALIGN = 64


class Arena:
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


def _offsets(specs: list[tuple[tuple[int, ...], torch.dtype] | None]) -> tuple[list[int | None], int]:
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


#: What a chain call's input slots hold: target and draft probabilities (``None``: in the sampler's
#: dtype), draft tokens, uniforms, per-request seeds.
INPUT_DTYPES: tuple[torch.dtype | None, ...] = (None, None, torch.int64, torch.float64, torch.int64)


@dataclasses.dataclass
class _Slot:
    """What one input region of the arena holds: a copy of ``source`` (kept alive, so its address
    is not reused) in ``dtype``, written as input ``stamp``."""

    source: torch.Tensor
    key: tuple[Any, ...]
    offset: int
    nbytes: int
    stamp: int  # the input's number, as the arena numbers inputs written
    pristine: torch.Tensor | None = None  # the parent's copy, where the worker cannot see writes


@dataclasses.dataclass
class Lane:
    """Room for one call in shared memory: its arena and what the arena's input slots hold.  Two
    lanes let the next call be staged and sent while the one before it runs."""

    arena: Arena | None = None
    slots: dict[int, _Slot] = dataclasses.field(default_factory=dict)

    def drop(self) -> None:
        if self.arena is not None:
            self.arena.unlink()
            self.arena = None
        self.slots.clear()

    def stage(
        self,
        inputs: list[torch.Tensor | None],
        dtypes: list[torch.dtype],
        outputs: list[tuple[int, ...]],
        *,
        keep_pristine: bool,
        generation: Callable[[], int],
    ) -> tuple[dict[str, Any], list[torch.Tensor | None], list[int]]:
        """Lay ``inputs`` (each in its dtype; ``None`` for an absent one) out in the arena, those
        passed before unchanged excepted, and room for int64 ``outputs`` after them: the request's
        arena fields, the staged inputs and the outputs' offsets.  Slots 0-2 are the inputs watched
        for writes; ``keep_pristine``: the worker cannot see writes, so the parent keeps copies;
        ``generation`` numbers each input written (a worker keeps a device copy while it stands)."""
        specs: list[tuple[tuple[int, ...], torch.dtype] | None] = [
            None if t is None else (tuple(t.shape), d) for t, d in zip(inputs, dtypes)
        ]
        specs += [(shape, torch.int64) for shape in outputs]
        n = len(inputs)
        offsets, size = _offsets(specs)
        if self.arena is None or self.arena.size < size:
            old = self.arena.size if self.arena is not None else size
            self.drop()
            self.arena = Arena(max(size, 2 * old, 1 << 20))
        staged: list[torch.Tensor | None] = []
        sent: list[Any] = []
        for slot, (tensor, spec, offset) in enumerate(zip(inputs, specs[:n], offsets[:n])):
            if tensor is None or spec is None or offset is None:
                staged.append(None)
                sent.append(None)
                continue
            view, written = self._placed(slot, tensor, spec, offset, keep_pristine, generation)
            staged.append(view)
            sent.append((offset, spec[0], spec[1], written))
        outputs_at = offsets[n]
        assert outputs_at is not None
        _forget(self.slots, outputs_at, size - outputs_at)  # the worker writes the outputs there
        request = {
            "arena": self.arena.path if self.arena.linked else None,
            "size": self.arena.size,
            "inputs": sent,
            "outputs": tuple(offsets[n:]),
        }
        return request, staged, [o for o in offsets[n:] if o is not None]

    def _placed(
        self,
        slot: int,
        tensor: torch.Tensor,
        spec: tuple[tuple[int, ...], torch.dtype],
        offset: int,
        keep_pristine: bool,
        generation: Callable[[], int],
    ) -> tuple[torch.Tensor, int]:
        """The arena's view of one input, written there unless it holds this very tensor already."""
        assert self.arena is not None
        view = self.arena.view(offset, spec[0], spec[1])
        key = identity(tensor, spec[1])
        held = self.slots.get(slot)
        if held is None or held.key != key or held.offset != offset or held.nbytes != view.nbytes:
            view.copy_(tensor)  # converts, and lays a broadcast view out dense
            _forget(self.slots, offset, view.nbytes)
            held = _Slot(tensor, key, offset, view.nbytes, generation())
            if slot < 3 and keep_pristine:
                held.pristine = view.clone()  # the worker cannot tell writes: the parent compares
            self.slots[slot] = held
        return view, held.stamp


def identity(tensor: torch.Tensor, dtype: torch.dtype) -> tuple[Any, ...]:
    """What makes a tensor the same input again: its memory, layout, dtype, version, and the dtype it
    is given in (an in-place change by the harness bumps the version)."""
    return (
        tensor.data_ptr(),
        tensor.dtype,
        tuple(tensor.shape),
        tensor.stride(),
        tensor.device,
        tensor._version,
        dtype,
    )


def unchanged(given: torch.Tensor, pristine: torch.Tensor) -> bool:
    """Whether a tensor still holds what it was given: equal values, NaN where there was NaN."""
    if _same_bytes(given, pristine) or torch.equal(given, pristine):
        return True
    if given.is_floating_point() and given.shape == pristine.shape:
        return bool(((given == pristine) | (given.isnan() & pristine.isnan())).all())
    return False


def _same_bytes(given: torch.Tensor, pristine: torch.Tensor) -> bool:
    """Whether two dense CPU tensors of one dtype and shape hold the same bytes: numpy compares
    them about twice as fast as ``torch.equal`` (a call's inputs are compared after every call)."""
    dense = given.device.type == pristine.device.type == "cpu" and given.is_contiguous() and pristine.is_contiguous()
    if not dense or given.dtype != pristine.dtype or given.shape != pristine.shape or given.numel() == 0:
        return False
    word = torch.int64 if given.numel() * given.element_size() % 8 == 0 else torch.uint8  # wide words compare fastest
    return bool(
        np.array_equal(
            given.view(-1).view(torch.uint8).view(word).numpy(), pristine.view(-1).view(torch.uint8).view(word).numpy()
        )
    )


class PageWatch:
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
        present, swapped, file_page = (
            (entries >> np.uint64(63)) & 1,
            (entries >> np.uint64(62)) & 1,
            (entries >> np.uint64(61)) & 1,
        )
        return bool(((present & (1 - file_page)) | swapped).any())

    @classmethod
    def works(cls) -> PageWatch | None:
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
                ok = (
                    seen
                    and watch.written(base + page, page)
                    and not watch.written(base, page)
                    and not watch.written(base + 2 * page, 2 * page)
                )
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


def _forget(slots: dict[int, _Slot], offset: int, nbytes: int) -> None:
    """Drop the records of slots a write to ``[offset, offset + nbytes)`` overlaps."""
    for slot, held in list(slots.items()):
        if held.offset < offset + nbytes and offset < held.offset + held.nbytes:
            del slots[slot]


def invalidate(slots: dict[int, _Slot], written: list[int], staged: list[torch.Tensor | None]) -> list[int]:
    """The inputs the sampler changed: as the worker saw it, or by the parent's comparison."""
    changed = sorted(set(written))
    for slot in range(3):
        held, given = slots.get(slot), staged[slot]
        if held is not None and held.pristine is not None and given is not None and not unchanged(given, held.pristine):
            changed.append(slot)
    for slot in changed:
        slots.pop(slot, None)
    return sorted(set(changed))


class WorkerArena:
    """The worker's maps of the arena: shared for outputs, copy-on-write for the sampler's inputs
    where the kernel says which pages were written (else shared, and the parent compares)."""

    def __init__(self, path: str, size: int, watch: PageWatch | None) -> None:
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

    def written(
        self, specs: list[Any], staged: list[torch.Tensor | None], given: list[torch.Tensor | None]
    ) -> list[int]:
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
