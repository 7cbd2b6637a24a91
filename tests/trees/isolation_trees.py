"""Tree samplers that misbehave on the first check's batches (64 rows: ``trees.output[shapes]``),
for tests/trees/test_tree_isolation.py.

On any other batch each is the reference (SpecInfer), so the next check, in a fresh worker, passes.
"""

from __future__ import annotations

import os
import signal
import time

import torch

from specverify._calling.tree import tree_sampler
from specverify.samplers import tree_reference

FIRST = 64  # trees.output[shapes] calls on 64 rows; trees.support[zero-coins] on 512


def _misbehaving(act, name):
    @tree_sampler(algorithm="specinfer", name=name, uniforms=True)
    def sampler(tree, generator=None, *, uniforms=None):
        if tree.batch == FIRST:
            act(tree)
        return tree_reference(tree, generator, uniforms=uniforms)

    return sampler


def _segfault(tree):
    print("about to fault", flush=True)
    os.kill(os.getpid(), signal.SIGSEGV)


def _raise(tree):
    raise IndexError("index 9 is out of bounds")


def _write(tree):
    tree.target_probs[:, 0, 0] += 1.0  # an in-place write to an input


segfaults = _misbehaving(_segfault, "segfaults")
exits = _misbehaving(lambda tree: os._exit(3), "exits")
raises = _misbehaving(_raise, "raises")
hangs = _misbehaving(lambda tree: time.sleep(600), "hangs")
writes_inputs = _misbehaving(_write, "writes-inputs")


BUILDS = [0]


def counted_factory():
    """A zero-argument factory whose sampler's name counts the builds made in this process so far
    (``load_sut`` must build once)."""
    BUILDS[0] += 1

    def sampler(tree, generator=None, *, uniforms=None):
        return tree_reference(tree, generator, uniforms=uniforms)

    return tree_sampler(sampler, algorithm="specinfer", name=f"counted-{BUILDS[0]}", uniforms=True)


@tree_sampler(algorithm="specinfer", name="one-tree-per-call", uniforms=True, batched=False)
def one_tree_per_call(tree, generator=None, *, uniforms=None):
    """An unbatched tree sampler (one tree a call) that misbehaves on marked trees: first candidate
    token 4, a path one column too wide; third candidate 4, a step to a node that is not a child;
    third candidate 0, token 0 emitted (whatever its probability)."""
    assert tree.batch == 1
    path, token = tree_reference(tree, generator, uniforms=uniforms)
    if int(tree.tokens[0, 1]) == 4:
        path = torch.cat([path, torch.full_like(path[:, :1], -1)], dim=1)
    if int(tree.tokens[0, 3]) == 4:
        path = torch.tensor([[0, 2] + [-1] * (path.shape[1] - 2)])
    if int(tree.tokens[0, 3]) == 0:
        token = torch.zeros_like(token)
    return path, token
