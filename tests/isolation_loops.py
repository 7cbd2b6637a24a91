"""Generation loops that misbehave at the first check's length (8 tokens), for tests/test_loop_isolation.py.

At any other length each is the reference loop, so the next check, in a fresh worker, passes.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import specverify
from specverify.samplers import loop_reference

FIRST = 8  # loop.output generates 8 tokens; loop.determinism 6


def _misbehaving(act, name):
    @specverify.loop(parameters=loop_reference.parameters, name=name)
    def loop(target, draft, prompt, num_tokens, params, generator):
        if num_tokens == FIRST:
            target(prompt)  # one model call before it goes wrong
            act()
        return loop_reference(target, draft, prompt, num_tokens, params, generator)

    return loop


def _segfault():
    print("about to fault", flush=True)
    os.kill(os.getpid(), signal.SIGSEGV)


def _raise():
    raise IndexError("index 9 is out of bounds")


segfaults = _misbehaving(_segfault, "segfaults")
exits = _misbehaving(lambda: sys.exit(3), "exits")
raises = _misbehaving(_raise, "raises")
hangs = _misbehaving(lambda: time.sleep(3600), "hangs")


@specverify.loop(parameters=loop_reference.parameters, name="slow")
def slow(target, draft, prompt, num_tokens, params, generator):
    """The reference loop, but slow after the first check: each later call sleeps in its model calls.

    Writes its process id to ``$ISOLATION_PID_FILE`` (for the Ctrl-C test to see it ended)."""
    pid_file = os.environ.get("ISOLATION_PID_FILE")
    if pid_file and not os.path.exists(pid_file):
        with open(pid_file, "w") as handle:
            handle.write(str(os.getpid()))
    if num_tokens != FIRST:
        for _ in range(600):  # a model call every 0.1 s: never a hang, long past the test's Ctrl-C
            target(prompt[:1])
            time.sleep(0.1)
    return loop_reference(target, draft, prompt, num_tokens, params, generator)
