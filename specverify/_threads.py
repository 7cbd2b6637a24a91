"""How many CPU threads the harness and the sampler's process compute on, unless the user says.

The battery's calls are many and small (V <= 8 for most checks): a call's work is shorter than
what OpenMP spends waking and then spin-waiting its idle threads, and those spinning threads take
the cores the other process (harness or sampler) needs.  Measured on a loaded two-core machine,
the quick budget took 177 s with torch's default threads and 70 s with one thread each.  So where
``OMP_NUM_THREADS`` is not set, the sampler's process starts with ``OMP_NUM_THREADS=1`` and one
torch thread, and the ``specverify`` command and the pytest plugin set the harness's torch threads
to one.  A user's own ``OMP_NUM_THREADS`` (say, for a CPU sampler that is fast on many threads at
large vocabularies) is kept as given, for both processes: set it to choose.

Imports nothing heavy (torch only inside the functions that set threads).
"""

from __future__ import annotations

import os

__all__ = [
    "DEFAULT_THREADS",
    "HarnessThreads",
    "chosen_by_user",
    "sampler_env",
    "sampler_threads",
    "use_default_threads",
]

#: Threads each process computes on where the user has not set ``OMP_NUM_THREADS``.
DEFAULT_THREADS = 1


def chosen_by_user() -> bool:
    """Whether the user set ``OMP_NUM_THREADS`` (then it is theirs, and kept)."""
    return bool(os.environ.get("OMP_NUM_THREADS", "").strip())


def sampler_env() -> dict[str, str]:
    """What the sampler process's environment gets on top of the harness's (before it, so a
    variable the user set wins)."""
    return {} if chosen_by_user() else {"OMP_NUM_THREADS": str(DEFAULT_THREADS)}


def sampler_threads(harness_threads: int) -> int:
    """The torch thread count the sampler's process is given: the harness's own where the user
    chose (``OMP_NUM_THREADS``), else :data:`DEFAULT_THREADS`."""
    return harness_threads if chosen_by_user() else DEFAULT_THREADS


def use_default_threads() -> None:
    """The ``specverify`` command's and the pytest plugin's harness: one torch thread unless the
    user set ``OMP_NUM_THREADS``."""
    if not chosen_by_user():
        import torch

        torch.set_num_threads(DEFAULT_THREADS)


class HarnessThreads:
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
        import torch

        if self.users == 0:
            self.saved = torch.get_num_threads()
            torch.set_num_threads(1)
        self.users += 1

    def leave(self) -> None:
        import torch

        self.users = max(0, self.users - 1)
        if self.users == 0 and self.saved is not None:
            torch.set_num_threads(self.saved)
            self.saved = None

    def theirs(self) -> int:
        """The thread count the sampler's process gets: the harness's own before it gave them up."""
        import torch

        return self.saved if self.saved is not None else torch.get_num_threads()
