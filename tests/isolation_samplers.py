"""Samplers that misbehave the ways a real kernel does, for tests/test_isolation.py.

Each is loaded by spec (``isolation_samplers:NAME``) into the harness's worker process; counters
are per process, so "the Nth call" means the Nth call that process made.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time

import specverify

_calls = {"n": 0}


def _count() -> int:
    _calls["n"] += 1
    return _calls["n"]


def exits_on_call_3(t, d, y, g):
    if _count() == 3:
        os._exit(0)
    return specverify.reference(t, d, y, g)


def aborts(t, d, y, g):
    os.abort()


def segfaults(t, d, y, g):
    ctypes.string_at(0)


def calls_sys_exit(t, d, y, g):
    sys.exit(3)


def raises(t, d, y, g):
    raise IndexError("index 7 is out of bounds for the vocabulary")


def hangs(t, d, y, g):
    time.sleep(3600)


def on_meta(t, d, y, g):
    tokens, accepted = specverify.reference(t, d, y, g)
    return tokens.to("meta"), accepted.to("meta")


def floods(t, d, y, g):
    sys.stdout.write("flood " * 200_000 + "\n")  # 1.2 MB per call
    return specverify.reference(t, d, y, g)


@specverify.sampler(batched=False)
def slow(t, d, y, g):
    """Correct, unbatched and slow: 20 ms a row (calls of one row each)."""
    pid_file = os.environ.get("ISOLATION_PID_FILE")
    if pid_file and not os.path.exists(pid_file):
        with open(pid_file, "w") as handle:
            handle.write(str(os.getpid()))
    time.sleep(0.02)
    return specverify.reference(t, d, y, g)


def slow_batched(t, d, y, g):
    """Correct and batched, 1 ms a row: a large call takes seconds, far over a 1 s first limit."""
    time.sleep(1e-3 * t.shape[0])
    return specverify.reference(t, d, y, g)


def factory_exits():
    sys.exit(4)


def factory_raises():
    raise RuntimeError("no GPU kernel built for this machine")


def writes_draft(t, d, y, g):
    d[0, 0, 0] += 1.0  # one element, in place
    return specverify.reference(t, d, y, g)


_writes: list[int] = []


def writes_target_on_call_2(t, d, y, g):
    _writes.append(1)
    if len(_writes) == 2:
        t[-1, -1, -1] = 0.5  # the last element, in place, on the second call only
    return specverify.reference(t, d, y, g)


@specverify.sampler(batched=False)
def unbatched_int32(t, d, y, g):
    if y.shape[0] != 1:
        raise AssertionError(f"an unbatched sampler was given {y.shape[0]} rows")
    tokens, n = specverify.reference(t, d, y, g)
    return tokens.int(), n  # int32: a contract violation


def tells_its_threads(t, d, y, g):
    import torch

    raise RuntimeError(f"threads={torch.get_num_threads()}")


@specverify.sampler(max_batch=6)
def six_rows_a_call(t, d, y, g):
    """Correct, at most 6 rows a call: a batch of 16 is three calls."""
    return specverify.reference(t, d, y, g)


_raises_calls: list[int] = []


def raises_on_call_2(t, d, y, g):
    _raises_calls.append(1)  # a counter of its own: another sampler loaded into the same process counts apart
    if len(_raises_calls) == 2:
        raise ValueError("the second call's tile overflowed")
    return specverify.reference(t, d, y, g)
