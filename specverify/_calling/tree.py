"""Calling a sampler of the tree kind: batching, time limits, reach and an exact audit of every output.

:class:`TreeCalls` are the calls :class:`specverify._calling.sut.SamplerUnderTest` makes of a tree
sampler, so :func:`specverify.check` runs the ``trees`` family through
:func:`specverify._run._driver.run_check` like any other.  Every output is audited by its kind's layout
(:class:`specverify._kinds.TreeLayout`) and every input is checked unmodified, so a broken output
stops its check with a :class:`~specverify._calling.sut.SamplerFault` naming the rule.

With ``isolation="process"`` (what :func:`specverify.check` and the CLI choose for a spec or a
callable importable by name) a tree sampler runs, like a chain sampler, in the supervised worker of
:mod:`specverify._worker`: its inputs travel through the worker's
shared-memory arena, its generator's state as bytes, and a sampler that raises, exits, segfaults or
hangs fails the check it was in, the next check getting a fresh worker.  ``isolation="in-process"``
calls it in this process: in a helper thread under the time limit (a hang is abandoned, not killed;
a crash of native code ends the run), or in the caller's thread, untimed, for pdb (``timed=False``).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import torch

from .._calling.supervised import UNBATCHED_AUDIT_ROWS, CallThread, Supervised, last_frames, raised
from .._contract import Capabilities, Violation
from .._kinds import TreeKind
from .._record.evidence import Evidence
from .._trees.contract import ALGORITHMS, TreeBatch, rows_of
from .._trees.limits import TreeLimits
from .._worker import WorkerDied, WorkerHung, WorkerRaised
from ..errors import SamplerFault

__all__ = ["TreeCalls", "tree_sampler"]

#: Most input elements (rows x N x V, both laws counted) in one call when the sampler sets no max_batch.
MAX_CALL_ELEMENTS = 2**23


def tree_sampler(fn: Any = None, *, algorithm: str | None = None, name: str | None = None, **capabilities: Any) -> Any:
    """Declare a callable a tree sampler (``specverify._trees.contract``) in one line.

    ``algorithm`` names the lossless algorithm it implements (one of ``ALGORITHMS``; ``None``: an
    unlisted verifier, judged on the target's law and on its efficiency against the listed ones).
    """
    if algorithm is not None and algorithm not in ALGORITHMS:
        raise ValueError(f"unknown tree algorithm {algorithm!r}; known: {ALGORITHMS}")

    def declare(f: Any) -> Any:
        f.contract = TreeKind.declared
        f.algorithm = algorithm
        if name is not None:
            f.name = name
        if capabilities:
            f.capabilities = Capabilities(**capabilities)
        return f

    return declare(fn) if fn is not None else declare


class TreeCalls(Supervised):
    """The calls of a tree sampler, as the sampler under test makes them."""

    @property
    def algorithm(self) -> str | None:
        """The tree algorithm the sampler declares (``None``: an unlisted verifier, or not a tree sampler)."""
        return getattr(self.kind, "algorithm", None)

    @property
    def tree_limits(self) -> TreeLimits:
        """The trees the sampler declares it takes (children a node, depth, nodes, reserved ids)."""
        return TreeLimits.of(self.capabilities)

    def passed(self, tree: TreeBatch) -> TreeBatch:
        """The tree with its laws rounded as the sampler receives them (exact laws are computed from it)."""
        if self.dtype == torch.float64:
            return tree
        draft = None if tree.draft_probs is None else tree.draft_probs.to(self.dtype).to(torch.float64)
        return TreeBatch(tree.parents, tree.tokens, tree.target_probs.to(self.dtype).to(torch.float64), draft)

    def unsupported(self, vocab: int) -> str | None:
        return self.capabilities.unsupported(k=1, vocab=vocab)

    def tree_step(
        self, tree: TreeBatch, *, generator: torch.Generator | None = None, uniforms: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run the sampler over a batch of trees of any size; outputs audited, returned on the CPU,
        paths padded to the batch's depth."""
        caps = self.capabilities
        per_row = not caps.batched
        # an unbatched sampler isolated: its worker makes one call per row, a chunk of rows a round trip
        rows_in_worker = per_row and self._process is not None
        chunk = (
            UNBATCHED_AUDIT_ROWS
            if rows_in_worker
            else 1
            if per_row
            else caps.max_batch or max(1, MAX_CALL_ELEMENTS // (2 * tree.width * tree.vocab))
        )
        paths, tokens = [], []
        for start in range(0, tree.batch, chunk):  # loops over chunks of rows, not rows
            rows = slice(start, start + chunk)
            part = rows_of(tree, rows)
            given = self._placed(part)
            u = (
                None
                if uniforms is None
                else uniforms[rows].to(device=given.parents.device, dtype=torch.float64).contiguous()
            )
            self.reach.record(
                batch=1 if per_row else part.batch,
                rows=part.batch,
                k=part.width - 1,
                vocab=part.vocab,
                dtype=str(self.dtype).removeprefix("torch."),
            )
            output, changed = self._call(given, generator, u, per_row=rows_in_worker)
            if changed:
                label = ("parents", "tokens", "target_probs")[changed[0]]
                raise self._fault(Violation("inputs-unmodified", f"the sampler modified its input {label} in place"))
            if rows_in_worker:
                self._audit_rows(given, output, start)
            else:
                self._audit(given, output, start)
            path, token = (x.to("cpu") for x in output)
            paths.append(torch.nn.functional.pad(path, (0, tree.depth + 1 - path.shape[1]), value=-1))
            tokens.append(token)
        return torch.cat(paths), torch.cat(tokens)

    def _audit(self, given: TreeBatch, output: Any, start: int) -> None:
        """Raise the fault of the first contract rule the output of rows ``start`` on breaks."""
        violations = self.layout.audit(given, output, first_only=True)
        if violations:
            v = violations[0]
            details: Evidence = {"last_output": _shown(output)}
            if v.row is not None:  # the failing row's output, for the report's drawing of its tree
                details["failing_row"] = v.row + start
                details["failing_path"] = output[0][v.row].tolist()
                details["failing_token"] = int(output[1][v.row])
            raise self._fault(dataclasses.replace(v, row=None if v.row is None else v.row + start), details)

    def _audit_rows(self, given: TreeBatch, output: Any, start: int) -> None:
        """The audit of calls made one per row in the worker, with the finding the same calls made
        one round trip each would have had: the first row that breaks a rule, audited as its own tree
        (its output as returned, when it was not a pair of the row's shapes)."""
        returned = None
        if isinstance(output, tuple) and output[:1] == ("row",):  # row i's output was not a pair of its shapes
            _, first_bad, returned, output = output
        else:
            first_bad = None
        broken = self._first_broken_row(given, output, given.batch if first_bad is None else first_bad)
        if broken is not None:
            row = rows_of(given, slice(broken, broken + 1))
            self._audit(
                row,
                (output[0][broken : broken + 1, : row.depth + 1].contiguous(), output[1][broken : broken + 1]),
                broken + start,
            )
        if first_bad is not None:
            self._audit(rows_of(given, slice(first_bad, first_bad + 1)), returned, first_bad + start)
            raise self._fault(
                Violation(
                    "shape-dtype",
                    f"row {first_bad + start}: the sampler's output is not a (path, token) pair of the row's shapes: "
                    f"{_shown(returned)}",
                )
            )

    def _first_broken_row(self, given: TreeBatch, output: tuple[torch.Tensor, torch.Tensor], end: int) -> int | None:
        """The first of rows ``[0, end)`` whose output breaks a rule, as auditing them one by one
        would find it. A batch's audit skips some rules when another row breaks an earlier one (no
        support check on a broken path), so a row found first is confirmed by a clean audit of the
        rows before it."""
        found = None
        while end > 0:
            prefix = rows_of(given, slice(0, end))
            violations = self.layout.audit(prefix, (output[0][:end, : prefix.depth + 1], output[1][:end]))
            rows = [v.row for v in violations if v.row is not None]
            if not rows:
                break
            found = end = min(rows)
        return found

    def _placed(self, tree: TreeBatch) -> TreeBatch:
        place = self.device if self._process is None else torch.device("cpu")  # a worker reads shared CPU memory
        tensors = [tree.parents, tree.tokens, tree.target_probs] + (
            [] if tree.draft_probs is None else [tree.draft_probs]
        )
        if all(t.device == place and t.is_contiguous() for t in tensors) and all(
            t.dtype == self.dtype for t in tensors[2:]
        ):
            return tree  # already as the sampler takes it: no copy, no second validation
        draft = None if tree.draft_probs is None else tree.draft_probs.to(device=place, dtype=self.dtype).contiguous()
        return TreeBatch(
            tree.parents.to(place).contiguous(),
            tree.tokens.to(place).contiguous(),
            tree.target_probs.to(device=place, dtype=self.dtype).contiguous(),
            draft,
        )

    def _call(
        self,
        tree: TreeBatch,
        generator: torch.Generator | None,
        uniforms: torch.Tensor | None,
        *,
        per_row: bool = False,
    ) -> tuple[Any, list[int]]:
        """A time-limited call (with ``per_row``, isolated only: one per row, each time-limited):
        its output and which of parents, tokens, target_probs it wrote to."""
        elements = 2 * (1 if per_row else tree.batch) * tree.width * tree.vocab
        if self._process is not None:
            output, seconds, changed = self._process_call(tree, generator, uniforms, elements, per_row)
        else:
            output, one, changed = self._direct_call(tree, generator, uniforms, elements)
            seconds = [one]
        for index, spent in enumerate(seconds):
            self.limit.observe(elements, spent, warm=self._warm or index > 0)
        self._warm = self._warm or bool(seconds)
        self.seconds += sum(seconds)
        self.calls += len(seconds)
        self.rows += len(seconds) if per_row else tree.batch
        return output, changed

    def _direct_call(
        self, tree: TreeBatch, generator: torch.Generator | None, uniforms: torch.Tensor | None, elements: int
    ) -> tuple[Any, float, list[int]]:
        assert self.sampler is not None  # in-process: the sampler is held here
        kwargs = {} if uniforms is None else {"uniforms": uniforms}
        kept = [tree.parents.clone(), tree.tokens.clone(), tree.target_probs.clone()]
        if not self.timed:  # the caller's thread: breakpoint() works, nothing is timed out
            start = time.perf_counter()
            try:
                output = self.sampler(tree, generator, **kwargs)
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
            except Exception as exc:  # noqa: BLE001 - everything the sampler raises is evidence
                raise self._fault(raised(exc), {"traceback": last_frames(exc)}) from exc
            seconds = time.perf_counter() - start
        else:
            if self._thread is None:
                self._thread = CallThread(self.device)
            try:
                outputs, times = self._thread.run(self.sampler, [((tree, generator), kwargs)], self.limit(elements))
            except SamplerFault as fault:
                if fault.violation.rule == "hang":
                    self._thread = None  # abandoned with its hung call
                    self.hangs += 1
                    self.limit.hung = True
                self.last_fault = fault
                raise
            except Exception as exc:  # noqa: BLE001 - the helper thread itself failing is evidence too
                raise self._fault(raised(exc), {"traceback": last_frames(exc)}) from exc
            output, seconds = outputs[0], times[0]
        changed = [
            i
            for i, (before, after) in enumerate(zip(kept, (tree.parents, tree.tokens, tree.target_probs)))
            if not torch.equal(before, after)
        ]
        return output, seconds, changed

    def _process_call(
        self,
        tree: TreeBatch,
        generator: torch.Generator | None,
        uniforms: torch.Tensor | None,
        elements: int,
        per_row: bool,
    ) -> tuple[Any, list[float], list[int]]:
        assert self._process is not None
        where = (
            f"{'one tree' if per_row else f'a batch of {tree.batch} trees'} of {tree.width} nodes, V={tree.vocab}, "
            f"{str(self.dtype).removeprefix('torch.')}"
        )
        self._fresh_process()
        inputs = [tree.parents, tree.tokens, tree.target_probs, tree.draft_probs, uniforms]
        try:
            output, seconds, _, changed = self._process.call_tree(
                inputs,
                dtype=self.dtype,
                path_width=tree.depth + 1,
                generator=generator,
                limit=self.limit(elements),
                per_row=per_row,
            )
        except (WorkerRaised, WorkerHung, WorkerDied) as exc:
            raise self._worker_fault(exc, self.calls + 1, where) from None
        return output, seconds, changed


def _shown(output: Any) -> str:
    try:
        return f"path={output[0][:4].tolist()}, token={output[1][:4].tolist()} (first rows)"
    except Exception:  # noqa: BLE001 - whatever it returned, say what it was
        return repr(output)[:200]
