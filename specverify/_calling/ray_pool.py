"""An experiment's units on Ray actors: ``--executor ray`` (``pip install 'speculative-verify[ray]'``).

Each actor holds a sampler under test of its own, supervised as on this machine (a process of its
own where the sampler loads by name), so a sampler's crash, hang or exit inside an actor is the
check's fault exactly as it is locally.  The loss of an actor itself (its process killed, its node
gone) is Ray's to mend: the actor is restarted and the unit it was running retried on it
(``max_restarts``, ``max_task_retries``), with the same seed, so the counts are those of a run that
lost nothing; an actor lost more often than that ends the check in an error, never a pass.

Units are the same as on local workers (:mod:`specverify._calling.pool`), so a run's JSON does not
depend on the executor or the number of actors.  The run's own sampler under test stays here and
runs every check that is not cut into units.
"""

from __future__ import annotations

import collections
import sys
from collections.abc import Callable, Generator, Iterable
from typing import Any

from ..errors import SamplerFault, SamplerSpecError, UsageError
from .pool import COUNTERS, IN_FLIGHT_PER_WORKER, UnitDone, run_unit

__all__ = ["ACTOR_RESTARTS", "RayPool", "ray_usable"]

#: How often Ray restarts a lost actor (and retries the unit it was running) before the check errs.
ACTOR_RESTARTS = 3


class _Worker:
    """The body of a Ray actor: one sampler under test, loaded as the run's own was."""

    def __init__(self, sampler: Any, device: str | None, options: dict[str, Any], path: list[str]) -> None:
        sys.path.extend(
            p for p in path if p not in sys.path
        )  # a spec that loads in the driver loads here (same machine)
        from .sut import SamplerUnderTest

        self.sut = SamplerUnderTest(sampler, isolation="auto", device=device, **options)

    def ready(self) -> dict[str, float]:
        """The sampler's name once loaded, and its counters so far (its process's start)."""
        return {name: getattr(self.sut, name, 0) for name in COUNTERS}

    def run(self, work: Callable[[Any, Any], Any], unit: Any) -> UnitDone:
        return run_unit(self.sut, work, unit)

    def close(self) -> None:
        self.sut.close()


def ray_usable(address: str | None, seconds: float = 5.0) -> None:
    """Fail at once, in one line, where Ray is not installed or nothing listens at a ``host:port``
    address (Ray itself retries for minutes); ``None``, ``"auto"`` and the like are Ray's to resolve.

    Raises:
        UsageError: saying which.
    """
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        raise UsageError("--executor ray needs Ray: pip install 'speculative-verify[ray]'")
    if not address or ":" not in address:
        return
    host, _, port = address.rpartition("://")[2].rpartition(":")
    if not port.isdigit():
        return
    import socket

    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=seconds).close()
    except OSError as exc:
        raise UsageError(
            f"no Ray cluster could be joined at {address!r}: nothing answers there ({exc.strerror or exc})"
        ) from None


def _joined_as_asked(ray: Any, address: str | None) -> None:
    """Ray is already initialised in this process: its cluster is the run's, so a ``host:port``
    address naming another one is refused rather than silently ignored (a ``ray://`` client
    address names a proxy, not the cluster's own address, so it cannot be compared).

    Raises:
        UsageError: ``address`` is not the cluster this process is joined to.
    """
    if not address or address == "auto" or "://" in address:
        return
    try:
        current = ray.get_runtime_context().gcs_address
    except Exception:  # noqa: BLE001 - whatever this Ray version does not know
        current = None
    if current != address:
        raise UsageError(
            f"Ray is already initialised in this process (cluster {current or 'unknown'}), so --address {address!r} "
            "cannot be joined: leave --address out to run there, or ray.shutdown() first"
        )


class RayPool:
    """``N`` Ray actors, one a GPU where the cluster has GPUs, fed units in order."""

    def __init__(self, primary: Any, actors: list[Any], started: list[dict[str, float]], ray: Any) -> None:
        self.primary = primary
        self.size = len(actors)
        self._actors = actors
        self._ray = ray
        self._usage = {name: sum(s.get(name, 0) for s in started) for name in COUNTERS}

    @classmethod
    def start(
        cls,
        subject: Any,
        sampler: Any,
        placement: Any,
        *,
        spec: str | None,
        timeout: float | None,
        first_timeout: float,
    ) -> RayPool:
        """Join the cluster at ``placement.address`` (or start a local one) and load the sampler on
        ``placement.workers`` actors.

        Raises:
            UsageError: Ray is not installed, or no cluster answers at the address.
            SamplerSpecError: an actor could not load the sampler.
        """
        try:
            import ray
        except ImportError:
            raise UsageError("--executor ray needs Ray: pip install 'speculative-verify[ray]'") from None
        if ray.is_initialized():
            _joined_as_asked(ray, placement.address)
        else:
            try:
                ray.init(
                    address=placement.address, include_dashboard=False, log_to_driver=False, configure_logging=False
                )
            except Exception as exc:  # noqa: BLE001 - whatever Ray says of an address that does not answer
                where = f"at {placement.address!r}" if placement.address else "locally"
                raise UsageError(
                    f"no Ray cluster could be joined {where}: {type(exc).__name__}: "
                    f"{str(exc).splitlines()[0] if str(exc) else ''}"
                ) from None
        gpus = 1 if ray.cluster_resources().get("GPU", 0) >= placement.workers else 0
        remote: Any = ray.remote(_Worker).options(
            num_cpus=1, num_gpus=gpus, max_restarts=ACTOR_RESTARTS, max_task_retries=ACTOR_RESTARTS
        )
        options = {
            "timeout": timeout,
            "first_timeout": first_timeout,
            "kind": subject.kind,  # decided once, as the harness took it
            "spec": spec,
        }
        loaded = spec if spec is not None else sampler
        actors: list[Any] = [
            remote.remote(loaded, None if gpus else placement.device(i), options, list(sys.path))
            for i in range(placement.workers)
        ]
        try:
            started = ray.get([actor.ready.remote() for actor in actors])
        except Exception as exc:  # noqa: BLE001 - the actor's load failure, wrapped by Ray
            for actor in actors:
                ray.kill(actor)
            cause = getattr(exc, "cause", exc)
            raise SamplerSpecError(f"a Ray actor could not load the sampler: {cause}") from None
        return cls(subject, actors, started, ray)

    def map(self, work: Callable[[Any, Any], Any], units: Iterable[Any]) -> Generator[UnitDone, None, None]:
        free = collections.deque(
            self._actors * IN_FLIGHT_PER_WORKER
        )  # an actor queues its next unit behind the one it runs
        flying: collections.deque[tuple[Any, Any]] = collections.deque()  # (result ref, its actor), in unit order
        try:
            for unit in units:
                if not free:
                    yield self._landed(flying, free)
                actor = free.popleft()
                flying.append((actor.run.remote(work, unit), actor))
            while flying:
                yield self._landed(flying, free)
        finally:
            if flying:  # left early or a unit failed: the units behind it are dropped, their actors kept
                self._ray.wait([ref for ref, _ in flying], num_returns=len(flying))

    def _landed(self, flying: collections.deque[tuple[Any, Any]], free: collections.deque[Any]) -> UnitDone:
        ref, actor = flying.popleft()
        try:
            done: UnitDone = self._ray.get(ref)
        except self._ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, SamplerFault):
                raise cause from None
            raise
        except self._ray.exceptions.RayActorError as exc:
            raise RuntimeError(
                f"a Ray actor was lost more than {ACTOR_RESTARTS} times running one unit: {exc}"
            ) from None
        free.append(actor)
        for name, value in done.usage.items():
            self._usage[name] = self._usage.get(name, 0) + value
        return done

    def usage(self) -> dict[str, float]:
        here = {name: getattr(self.primary, name, 0) for name in COUNTERS}
        return {name: here[name] + self._usage.get(name, 0) for name in COUNTERS}

    def close(self) -> None:
        self.primary.close()
        for actor in self._actors:
            try:
                self._ray.get(actor.close.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - an actor already gone has nothing to close
                pass
            self._ray.kill(actor)

    def kill(self) -> None:
        self.primary.kill()
        for actor in self._actors:
            self._ray.kill(actor)
