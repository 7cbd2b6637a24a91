"""Where a run's sampler processes go: how many, on which devices, by which executor.

:class:`Placement` validates what the user asked for (``--workers``, ``--devices``, ``--executor``,
``--address``) before anything loads, so a bad option costs nothing and says so in one line;
:func:`open_pool` then starts the workers (:mod:`specverify._calling.pool`) beside the run's own
sampler under test.  With nothing asked, the run has its one embedded worker, as it always had.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from .._calling.pool import LocalPool, Pool, SerialPool
from .._calling.ray_pool import ray_usable
from .._calling.sut import SamplerUnderTest, check_device
from ..errors import SamplerSpecError, UsageError

__all__ = ["EXECUTORS", "Placement", "open_pool"]

#: How workers are run: processes on this machine, or actors of a Ray cluster.
EXECUTORS = ("local", "ray")


@dataclasses.dataclass(frozen=True)
class Placement:
    """The run's workers as asked for: their number, devices (one a worker, in turn), executor."""

    workers: int
    devices: tuple[str, ...] | None
    executor: str
    address: str | None
    default_device: str | None = None

    @classmethod
    def of(
        cls,
        workers: int | None,
        devices: Sequence[str] | None,
        executor: str,
        address: str | None,
        device: str | None = None,
    ) -> Placement:
        """Validate the options; raise :class:`UsageError` (one line) on any that cannot work here."""
        if executor not in EXECUTORS:
            raise UsageError(f"executor must be one of {', '.join(EXECUTORS)}, not {executor!r}")
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
            raise UsageError(f"workers (--workers) must be a whole number of at least 1, not {workers!r}")
        if address is not None and executor != "ray":
            raise UsageError("an address is a Ray cluster's: give it with executor 'ray' (--executor ray)")
        listed = tuple(d.strip() for d in devices) if devices else None
        if listed is not None:
            if not all(listed):
                raise UsageError(f"devices must be named, as in cuda:0,cuda:1; got {','.join(devices or [])!r}")
            if executor == "local":  # a Ray cluster's devices are its nodes', not this machine's
                for name in listed:
                    try:
                        check_device(name)
                    except SamplerSpecError as exc:
                        raise UsageError(str(exc)) from None
        if executor == "ray":
            ray_usable(address)
        return cls(workers or (len(listed) if listed else 1), listed, executor, address, device)

    def device(self, index: int) -> str | None:
        """The device of worker ``index``: the devices in turn, else the run's default."""
        return self.devices[index % len(self.devices)] if self.devices else self.default_device

    @property
    def recorded(self) -> bool:
        """Whether the run's record says where its workers were (not for the one embedded worker)."""
        return self.workers > 1 or self.executor != "local" or self.devices is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "count": self.workers,
            "executor": self.executor,
            "devices": list(self.devices) if self.devices else None,
            "address": self.address,
        }


def open_pool(
    subject: SamplerUnderTest,
    sampler: Any,
    placement: Placement,
    *,
    spec: str | None,
    timeout: float | None,
    first_timeout: float,
) -> Pool:
    """The run's workers: ``subject`` and as many more as asked, each a supervised process of its own.

    Raises:
        UsageError: several workers of a subject that cannot run isolated, or Ray unusable.
        SamplerSpecError: a further worker could not load the sampler.
    """
    if placement.executor == "ray":
        from .._calling.ray_pool import RayPool

        return RayPool.start(subject, sampler, placement, spec=spec, timeout=timeout, first_timeout=first_timeout)
    if placement.workers == 1:
        return SerialPool(subject)
    if subject.isolation != "process":
        why = f" ({subject.reason})" if subject.reason else ""
        raise UsageError(
            f"{placement.workers} workers need a sampler that runs isolated, loaded by name (a spec, or a callable "
            f"importable by name){why}"
        )
    members: list[Any] = [subject]
    try:
        for index in range(1, placement.workers):
            members.append(
                SamplerUnderTest(
                    sampler,
                    isolation="process",
                    device=placement.device(index),
                    timeout=timeout,
                    first_timeout=first_timeout,
                    spec=spec,
                    kind=subject.kind,  # decided once, as the first worker took it
                )
            )
    except BaseException:
        for member in members[1:]:
            member.close()
        raise
    return LocalPool(members)
