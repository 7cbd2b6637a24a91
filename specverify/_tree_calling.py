"""Calling a tree sampler under test: batching, time limits, reach and an exact audit of every output.

The tree counterpart of :class:`specverify._calling.SamplerUnderTest`, with the same surface for the
runner (``reach``, ``last_fault``, counters, ``close``), so :func:`specverify.check` runs the
``trees`` family through :func:`specverify._runner.run_check` like any other.  Every output is
audited with :func:`specverify._tree.audit_tree_output` and every input is checked unmodified, so a
broken output stops its check with a :class:`~specverify._calling.SamplerFault` naming the rule.

Tree samplers run **in the harness's process** (the isolation worker speaks the chain contract
only): a call runs in a helper thread under the time limit, so a hang is abandoned, not killed, and
a crash of the sampler's native code ends the run.  A run says so in ``run["isolation"]``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from ._calling import CallLimit, SamplerFault, Violation, _CallThread, _last_frames, _raised
from ._contract import Capabilities, capabilities_of, load_sampler, name_of
from ._reach import ReachRecorder
from ._tree import ALGORITHMS, TreeBatch, audit_tree_output

__all__ = ["ISOLATION_REASON", "TreeSamplerUnderTest", "is_tree_sampler", "tree_sampler"]

#: Why a tree sampler runs in-process, as a run records it in ``run["isolation"]["reason"]``.
ISOLATION_REASON = (
    "tree samplers run in the harness's process: the isolation worker speaks the chain contract only "
    "(calls are timed in a helper thread, so a hang is abandoned; a crash ends the run)"
)

#: Most input elements (rows x N x V, both laws counted) in one call when the sampler sets no max_batch.
MAX_CALL_ELEMENTS = 2**23


def is_tree_sampler(sampler: Any) -> bool:
    """Whether ``sampler`` declares the tree contract (``contract = "tree"``)."""
    return getattr(sampler, "contract", None) == "tree"


def tree_sampler(fn: Any = None, *, algorithm: str | None = None, name: str | None = None, **capabilities: Any) -> Any:
    """Declare a callable a tree sampler (``specverify._tree``) in one line.

    ``algorithm`` names the lossless algorithm it implements (one of ``ALGORITHMS``; ``None``: an
    unlisted verifier, judged on the target's law and on its efficiency against the listed ones).
    """
    if algorithm is not None and algorithm not in ALGORITHMS:
        raise ValueError(f"unknown tree algorithm {algorithm!r}; known: {ALGORITHMS}")

    def declare(f: Any) -> Any:
        f.contract = "tree"
        f.algorithm = algorithm
        if name is not None:
            f.name = name
        if capabilities:
            f.capabilities = Capabilities(**capabilities)
        return f

    return declare(fn) if fn is not None else declare


def rows_of(tree: TreeBatch, rows: slice) -> TreeBatch:
    """Rows ``rows`` of a batch, trailing all-padding columns kept (the width is the batch's)."""
    if rows.start in (0, None) and (rows.stop is None or rows.stop >= tree.batch):
        return tree
    draft = None if tree.draft_probs is None else tree.draft_probs[rows]
    return TreeBatch(tree.parents[rows], tree.tokens[rows], tree.target_probs[rows], draft)


class TreeSamplerUnderTest:
    """A tree sampler with its capabilities, called safely, in this process.

    Args:
        sampler: the tree sampler, or its ``"package.module:attribute"`` spec.
        device: where to put inputs when the sampler declares no device.
        timeout: seconds one call may take (``None``: derived from its measured speed).
        first_timeout: the limit of a call before the sampler's speed is known.
    """

    isolation = "in-process"
    contract = "tree"

    def __init__(
        self, sampler: Callable[..., Any] | str, *, device: str | None = None, timeout: float | None = None, first_timeout: float = 120.0
    ) -> None:
        self.sampler = load_sampler(sampler) if isinstance(sampler, str) else sampler
        self.name = name_of(self.sampler)
        self.capabilities: Capabilities = capabilities_of(self.sampler)
        self.algorithm: str | None = getattr(self.sampler, "algorithm", None)
        self.device = torch.device(self.capabilities.device or device or "cpu")
        self.dtype = self.capabilities.dtypes[0]
        self.limit = CallLimit(timeout=timeout, first=first_timeout)
        self.reach = ReachRecorder()
        self.last_fault: SamplerFault | None = None
        self.calls = self.rows = self.crashes = self.hangs = 0
        self.seconds = 0.0
        self.worker_starts = 0
        self.on_wait: Callable[[float, float], None] | None = None
        self._thread: _CallThread | None = None

    @property
    def timeout(self) -> float | None:
        return self.limit.timeout

    def close(self) -> None:
        """Nothing to end: the sampler runs in this process."""

    def kill(self) -> None:
        """Nothing to end: a hung call's thread is abandoned."""

    def generator(self, seed: int) -> torch.Generator:
        return torch.Generator(device=self.device).manual_seed(seed)

    def passed(self, tree: TreeBatch) -> TreeBatch:
        """The tree with its laws rounded as the sampler receives them (exact laws are computed from it)."""
        if self.dtype == torch.float64:
            return tree
        draft = None if tree.draft_probs is None else tree.draft_probs.to(self.dtype).to(torch.float64)
        return TreeBatch(tree.parents, tree.tokens, tree.target_probs.to(self.dtype).to(torch.float64), draft)

    def unsupported(self, vocab: int) -> str | None:
        return self.capabilities.unsupported(k=1, vocab=vocab)

    def step(
        self, tree: TreeBatch, *, generator: torch.Generator | None = None, uniforms: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run the sampler over a batch of trees of any size; outputs audited, returned on the CPU,
        paths padded to the batch's depth."""
        caps = self.capabilities
        per_row = not caps.batched
        chunk = 1 if per_row else caps.max_batch or max(1, MAX_CALL_ELEMENTS // (2 * tree.width * tree.vocab))
        paths, tokens = [], []
        for start in range(0, tree.batch, chunk):  # loops over chunks of rows, not rows
            rows = slice(start, start + chunk)
            part = rows_of(tree, rows)
            given = self._placed(part)
            u = None if uniforms is None else uniforms[rows].to(device=self.device, dtype=torch.float64).contiguous()
            self.reach.record(batch=part.batch, k=part.width - 1, vocab=part.vocab, dtype=str(self.dtype).removeprefix("torch."))
            kept = [given.parents.clone(), given.tokens.clone(), given.target_probs.clone()]
            output = self._call(given, generator, u)
            for label, before, after in zip(("parents", "tokens", "target_probs"), kept, (given.parents, given.tokens, given.target_probs)):
                if not torch.equal(before, after):
                    raise self._fault(Violation("inputs-unmodified", f"the sampler modified its input {label} in place"))
            violations = audit_tree_output(given, output, first_only=True)
            if violations:
                v = violations[0]
                details: dict[str, Any] = {"last_output": _shown(output)}
                if v.row is not None:  # the failing row's output, for the report's drawing of its tree
                    details.update(failing_row=v.row + start, failing_path=output[0][v.row].tolist(), failing_token=int(output[1][v.row]))
                raise self._fault(dataclasses.replace(v, row=None if v.row is None else v.row + start), details)
            path, token = (x.to("cpu") for x in output)
            paths.append(torch.nn.functional.pad(path, (0, tree.depth + 1 - path.shape[1]), value=-1))
            tokens.append(token)
        return torch.cat(paths), torch.cat(tokens)

    def _placed(self, tree: TreeBatch) -> TreeBatch:
        tensors = [tree.parents, tree.tokens, tree.target_probs] + ([] if tree.draft_probs is None else [tree.draft_probs])
        if all(t.device == self.device and t.is_contiguous() for t in tensors) and all(t.dtype == self.dtype for t in tensors[2:]):
            return tree  # already as the sampler takes it: no copy, no second validation
        draft = None if tree.draft_probs is None else tree.draft_probs.to(device=self.device, dtype=self.dtype).contiguous()
        return TreeBatch(
            tree.parents.to(self.device).contiguous(),
            tree.tokens.to(self.device).contiguous(),
            tree.target_probs.to(device=self.device, dtype=self.dtype).contiguous(),
            draft,
        )

    def _call(self, tree: TreeBatch, generator: torch.Generator | None, uniforms: torch.Tensor | None) -> Any:
        kwargs = {} if uniforms is None else {"uniforms": uniforms}
        elements = 2 * tree.batch * tree.width * tree.vocab
        if self._thread is None:
            self._thread = _CallThread(self.device)
        try:
            outputs, seconds = self._thread.run(self.sampler, [((tree, generator), kwargs)], self.limit(elements))
        except SamplerFault as fault:
            if fault.violation.rule == "hang":
                self._thread = None  # abandoned with its hung call
                self.hangs += 1
                self.limit.hung = True
            self.last_fault = fault
            raise
        except Exception as exc:  # noqa: BLE001 - the helper thread itself failing is evidence too
            raise self._fault(_raised(exc), {"traceback": _last_frames(exc)}) from exc
        self.limit.observe(elements, seconds[0], warm=self.calls > 0)
        self.seconds += sum(seconds)
        self.calls += 1
        self.rows += tree.batch
        return outputs[0]

    def _fault(self, violation: Violation, details: dict[str, Any] | None = None) -> SamplerFault:
        self.last_fault = SamplerFault(violation, details)
        return self.last_fault


def _shown(output: Any) -> str:
    try:
        return f"path={output[0][:4].tolist()}, token={output[1][:4].tolist()} (first rows)"
    except Exception:  # noqa: BLE001 - whatever it returned, say what it was
        return repr(output)[:200]
