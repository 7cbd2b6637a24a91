"""Starting the sampler's process, with nothing of torch in this one.

:class:`specverify._worker.SamplerProcess` starts its process here.  The CLI starts one first of all
(:func:`start_early`), before it imports torch itself, so the two torch imports (the harness's and
the process's) overlap; the first :class:`~specverify._worker.SamplerProcess` to start takes it
(:func:`take_early`).  One never taken is ended when the harness exits.
"""

from __future__ import annotations

import atexit
import mmap
import os
import subprocess
import sys
import tempfile

from ._threads import sampler_env

__all__ = ["popen_worker", "start_early", "take_early"]

#: glibc keeps the memory a call frees for the next call (as an engine's caching allocator does),
#: rather than returning it and faulting it in afresh each call; the user's own settings win.
_ALLOCATOR = {"MALLOC_MMAP_THRESHOLD_": str(1 << 32), "MALLOC_TRIM_THRESHOLD_": str(1 << 34)}

_EARLY: list[tuple[subprocess.Popen[bytes], mmap.mmap]] = []


def popen_worker() -> tuple[subprocess.Popen[bytes], mmap.mmap]:
    """``python -m specverify._worker FD`` in a session of its own (the terminal's SIGINT reaches the
    harness only), its pipes open, and the 8-byte beat it counts its calls in, shared by descriptor."""
    root = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    fd, beat_path = tempfile.mkstemp(prefix="specverify-beat-", dir=root)
    os.unlink(beat_path)  # the worker inherits the descriptor: no name is needed
    try:
        os.ftruncate(fd, 8)
        beat = mmap.mmap(fd, 8)
        proc = subprocess.Popen(
            [sys.executable, "-m", "specverify._worker", str(fd)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(fd,),
            start_new_session=True,
            env={**_ALLOCATOR, **sampler_env(), **os.environ, "PYTHONUNBUFFERED": "1"},  # threads: specverify._threads
        )
    finally:
        os.close(fd)
    return proc, beat


def start_early() -> None:
    """Start a process now, for the first sampler this harness loads."""
    _EARLY.append(popen_worker())


def take_early() -> tuple[subprocess.Popen[bytes], mmap.mmap] | None:
    """The process :func:`start_early` started, if it is still alive (else ``None``)."""
    while _EARLY:
        proc, beat = _EARLY.pop()
        if proc.poll() is None:
            return proc, beat
        _end(proc)
    return None


def _end(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, 9)
    except OSError:
        pass
    proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


@atexit.register
def _end_untaken() -> None:
    while _EARLY:
        _end(_EARLY.pop()[0])
