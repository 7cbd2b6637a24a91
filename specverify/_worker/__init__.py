"""The sampler's own process: it imports and builds the sampler and makes every call.

Split by concern:

* :mod:`~specverify._worker.supervision`: the harness's side: starting the process, loading the
  sampler into it, sending calls and waiting for them under their limits, restarting and killing
  it, keeping an idle one for the next run (:class:`SamplerProcess`);
* :mod:`~specverify._worker.arena`: the shared memory a call's tensors travel through, and the
  watch on the pages the sampler writes (a write to an input is seen, and never reaches the
  harness's copy);
* :mod:`~specverify._worker.wire`: the messages, how values and generator states travel, and the
  exceptions that say how a call ended (raised, died, hung);
* :mod:`~specverify._worker.serving`: the worker's own side, one loop dispatching on each message's
  verb (``python -m specverify._worker`` runs it).
"""

from __future__ import annotations

from .arena import identity, unchanged
from .supervision import PendingCall, SamplerProcess, prestart
from .wire import WorkerDied, WorkerHung, WorkerLoadError, WorkerRaised

__all__ = [
    "PendingCall",
    "SamplerProcess",
    "WorkerDied",
    "WorkerHung",
    "WorkerLoadError",
    "WorkerRaised",
    "identity",
    "prestart",
    "unchanged",
]
