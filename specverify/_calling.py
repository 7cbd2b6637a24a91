"""Calling a sampler under test: placement, batching, time limits and an exact audit of every output.

Every call the harness makes goes through :class:`SamplerUnderTest`, so whatever check is running,
an output that breaks the contract (shape, dtype, padding, range, accepted tokens that are not the
drafts, a token of target probability 0, an input modified in place), an exception or a hang stops
that check with a :class:`SamplerFault` that says exactly what happened, and the run goes on.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import torch

from ._contract import Capabilities, SamplerSpecError, capabilities_of, name_of
from ._reach import ReachRecorder

__all__ = ["SamplerFault", "SamplerUnderTest", "Violation", "audit_output"]

#: Rows per call when the sampler declares no ``max_batch``: bounds the harness's memory.
DEFAULT_CHUNK = 65_536
#: An unbatched sampler's outputs are audited together, this many rows at a time.
UNBATCHED_AUDIT_ROWS = 4_096


@dataclasses.dataclass(frozen=True)
class Violation:
    """One broken rule of the contract, with the first row that shows it."""

    rule: str  # shape-dtype, num-accepted-range, token-range, padding, accepted-drafts, zero-target, ...
    message: str
    finding: str = "contract"  # or "support"
    row: int | None = None


class SamplerFault(Exception):
    """The sampler raised, hung, or returned something the contract forbids."""

    def __init__(self, violation: Violation) -> None:
        super().__init__(violation.message)
        self.violation = violation


class SamplerUnderTest:
    """A sampler with its capabilities, called safely.

    Args:
        sampler: the callable under test.
        device: where to put inputs when the sampler does not declare a device.
        timeout: seconds one call may take before it counts as a hang.
    """

    def __init__(self, sampler: Callable[..., Any], *, device: str | None = None, timeout: float = 120.0) -> None:
        self.sampler = sampler
        self.name = name_of(sampler)
        self.capabilities: Capabilities = capabilities_of(sampler)
        self.device = torch.device(self.capabilities.device or device or "cpu")
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise SamplerSpecError(f"{self.name} runs on {self.device}, but torch sees no CUDA device here")
        self.dtype = self.capabilities.dtypes[0]
        self.timeout = timeout
        self._worker: _Worker | None = None
        self.calls = 0
        self.rows = 0
        self.seconds = 0.0
        self.reach = ReachRecorder()  # what the sampler is given, reset by the runner per check

    def generator(self, seed: int) -> torch.Generator:
        """A generator on the sampler's device, seeded."""
        return torch.Generator(device=self.device).manual_seed(seed)

    def step(
        self,
        target_probs: torch.Tensor,
        draft_probs: torch.Tensor,
        draft_tokens: torch.Tensor,
        *,
        generator: torch.Generator | None = None,
        uniforms: torch.Tensor | None = None,
        dtype: torch.dtype | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run the sampler over a batch of any size; outputs audited, returned on the CPU.

        Larger batches are split into calls of the sampler's ``max_batch`` (one row per call for
        an unbatched sampler); the same generator is passed to every call, as an engine would.
        """
        batch, k = draft_tokens.shape
        if batch == 0:
            return torch.empty((0, k + 1), dtype=torch.int64), torch.empty(0, dtype=torch.int64)
        dtype = dtype or self.dtype
        target = target_probs.to(device=self.device, dtype=dtype).contiguous()
        draft = draft_probs.to(device=self.device, dtype=dtype).contiguous()
        drafts = draft_tokens.to(device=self.device, dtype=torch.int64).contiguous()
        if uniforms is not None:
            uniforms = uniforms.to(device=self.device, dtype=torch.float64).contiguous()
        if self.capabilities.batched:
            chunk, per_call = self.capabilities.max_batch or DEFAULT_CHUNK, None
            if chunk > 1:
                chunk -= chunk % 2  # keep adjacent row pairs (2i, 2i+1) in one call
        else:
            chunk, per_call = UNBATCHED_AUDIT_ROWS, 1
        outputs = []
        vocab = target.shape[-1]
        for start in range(0, batch, chunk):  # loops over chunks of rows, not rows
            rows = slice(start, start + chunk)
            chunk_rows = min(chunk, batch - start)
            self.reach.record(
                batch=chunk_rows if per_call is None else 1, rows=chunk_rows, k=k, vocab=vocab, dtype=str(dtype).removeprefix("torch.")
            )
            parts = [target[rows], draft[rows], drafts[rows], None if uniforms is None else uniforms[rows]]
            originals = [p.clone() for p in parts[:3]]  # the sampler sees views of these: in-place writes show
            if per_call is None:
                output = self._calls([parts], generator)[0]
            else:  # one row per call, as the sampler asks; the chunk is audited at once
                rows_parts = [[p if p is None else p[i : i + 1] for p in parts] for i in range(parts[2].shape[0])]
                calls = self._calls(rows_parts, generator)
                output = (torch.cat([c[0] for c in calls]), torch.cat([c[1] for c in calls]))
            for name, before, after in zip(("target_probs", "draft_probs", "draft_tokens"), originals, parts):
                if not torch.equal(before, after):
                    raise SamplerFault(Violation("inputs-unmodified", f"the sampler modified its input {name} in place"))
            violations = audit_output(output, parts[0], parts[2], first_only=True)
            if violations:
                v = violations[0]
                raise SamplerFault(dataclasses.replace(v, row=None if v.row is None else v.row + start))
            outputs.append(output)
        return torch.cat([o[0] for o in outputs]).to("cpu"), torch.cat([o[1] for o in outputs]).to("cpu")

    def _calls(self, calls: list[list[torch.Tensor | None]], generator: torch.Generator | None) -> list[Any]:
        """Make the sampler's calls in order, each time-limited, each output of the contract's structure."""
        if self._worker is None:
            self._worker = _Worker(self.device)
        requests = [
            ((target, draft, drafts, generator), {} if uniforms is None else {"uniforms": uniforms})
            for target, draft, drafts, uniforms in calls
        ]
        start = time.perf_counter()
        try:
            outputs = self._worker.run(self.sampler, requests, self.timeout)
        except SamplerFault as fault:
            if fault.violation.rule == "hang":
                self._worker = None  # abandoned with its hung call; the next call gets a fresh worker
            raise
        self.seconds += time.perf_counter() - start
        self.calls += len(calls)
        for (_, _, drafts, _), output in zip(calls, outputs):
            self.rows += drafts.shape[0]
            problems = _structure(output, drafts.shape[0], drafts.shape[1])
            if problems:
                raise SamplerFault(problems[0])
        return outputs


def audit_output(
    output: Any, target_probs: torch.Tensor, draft_tokens: torch.Tensor, *, first_only: bool = False
) -> list[Violation]:
    """Every contract rule the output breaks (exact; no statistics)."""
    batch, k = draft_tokens.shape
    vocab = target_probs.shape[-1]
    problems = _structure(output, batch, k)
    if problems:
        return problems[:1] if first_only else problems
    tokens, accepted = output
    tokens = tokens.to(draft_tokens.device)
    accepted = accepted.to(draft_tokens.device)

    def first_row(mask: torch.Tensor) -> int | None:
        rows = mask.nonzero()
        return int(rows[0, 0]) if rows.numel() else None

    checks: list[tuple[str, torch.Tensor, Callable[[int], str], str]] = []
    bad = (accepted < 0) | (accepted > k)
    checks.append(("num-accepted-range", bad, lambda r: f"row {r}: num_accepted = {int(accepted[r])} is outside [0, {k}]", "contract"))
    if not bad.any():
        positions = torch.arange(k + 1, device=tokens.device)
        emitted = positions <= accepted.unsqueeze(-1)
        out_of_range = emitted & ((tokens < 0) | (tokens >= vocab))
        def token_range(r: int) -> str:
            n, position = int(accepted[r]), int(out_of_range[r].nonzero()[0, 0])
            token = int(tokens[r, position])
            text = (
                f"row {r}: num_accepted = {n} declares {n} accepted draft{'s' if n != 1 else ''}, so the row emits "
                f"{n + 1} token{'s' if n else ''} ({'position 0' if n == 0 else f'positions 0 to {n}'}); position {position} holds {token}, "
                f"outside the vocabulary [0, {vocab})"
            )
            if token == -1:
                text += f": -1 is padding, allowed only after position {n}"
            return text

        checks.append(("token-range", out_of_range.any(-1), token_range, "contract"))
        padding = ~emitted & (tokens != -1)
        checks.append(("padding", padding.any(-1), lambda r: f"row {r}: {int(accepted[r]) + 1} tokens emitted but position {int(padding[r].nonzero()[0, 0])} holds {_first(tokens[r], padding[r])}, not -1 padding", "contract"))
        accepted_mask = positions[:k] < accepted.unsqueeze(-1)
        mismatch = accepted_mask & (tokens[:, :k] != draft_tokens)
        checks.append(("accepted-drafts", mismatch.any(-1), lambda r: f"row {r}: accepted position {int(mismatch[r].nonzero()[0, 0])} holds token {_first(tokens[r, :k], mismatch[r])} but the draft was {_first(draft_tokens[r], mismatch[r])}", "contract"))
        if not out_of_range.any():
            safe = tokens.clamp(0, vocab - 1)
            p = target_probs.gather(-1, safe.unsqueeze(-1)).squeeze(-1)
            impossible = emitted & (p == 0)
            checks.append(("zero-target", impossible.any(-1), lambda r: f"row {r}: emitted token {_first(tokens[r], impossible[r])} at position {int(impossible[r].nonzero()[0, 0])}, where the target probability is 0", "support"))
    violations = []
    for rule, mask, describe, finding in checks:
        row = first_row(mask)
        if row is not None:
            violations.append(Violation(rule, describe(row), finding, row))
            if first_only:
                break
    return violations


def _structure(output: Any, batch: int, k: int) -> list[Violation]:
    """A pair of int64 tensors of the contract's shapes, or what is wrong with it."""
    if not isinstance(output, (tuple, list)) or len(output) != 2:
        return [Violation("shape-dtype", f"returned {_describe(output)}, expected a (tokens, num_accepted) pair")]
    problems = []
    for name, value, shape in (("tokens", output[0], (batch, k + 1)), ("num_accepted", output[1], (batch,))):
        if not isinstance(value, torch.Tensor):
            problems.append(Violation("shape-dtype", f"{name} is {_describe(value)}, expected a torch.Tensor"))
        elif tuple(value.shape) != shape:
            problems.append(Violation("shape-dtype", f"{name} has shape {tuple(value.shape)}, expected {shape}"))
        elif value.dtype != torch.int64:
            problems.append(Violation("shape-dtype", f"{name} has dtype {value.dtype}, expected torch.int64"))
    return problems


def _first(values: torch.Tensor, mask: torch.Tensor) -> int:
    return int(values[mask][0])


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of length {len(value)}"
    return f"a {type(value).__name__}"


class _Worker:
    """A daemon thread that makes the sampler's calls, so a hang can be abandoned, not awaited.

    It takes a list of calls at a time (an unbatched sampler's chunk of rows, one call each) and
    beats a heartbeat before each: a call that has not returned ``timeout`` seconds after its beat
    is a hang, whatever came before it.  An abandoned worker makes no further call; the next call
    gets a fresh worker.  On a CUDA device each call is synchronised before it counts as returned,
    so a hung kernel is a hang of the call that launched it (and the time measured is the kernel's).
    """

    def __init__(self, device: torch.device) -> None:
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._device = device
        threading.Thread(target=self._serve, name="specverify-sampler-calls", daemon=True).start()

    def _serve(self) -> None:
        cuda = self._device.type == "cuda"
        if cuda:
            torch.cuda.set_device(self._device)  # the current device is per thread
        while True:
            fn, calls, state, done = self._requests.get()
            try:
                for args, kwargs in calls:
                    if state["abandoned"]:
                        break
                    state["beat"] = time.monotonic()
                    state["results"].append(fn(*args, **kwargs))
                    if cuda:
                        torch.cuda.synchronize(self._device)
            except BaseException as exc:  # noqa: BLE001 - everything the sampler raises is evidence
                state["error"] = exc
            done.set()

    def run(self, fn: Callable[..., Any], calls: list[tuple[tuple, dict]], timeout: float) -> list[Any]:
        state: dict[str, Any] = {"beat": time.monotonic(), "results": [], "error": None, "abandoned": False}
        done = threading.Event()
        self._requests.put((fn, calls, state, done))
        poll = min(0.5, timeout / 8)
        while not done.wait(poll):
            if time.monotonic() - state["beat"] > timeout:
                state["abandoned"] = True
                raise SamplerFault(Violation("hang", f"the sampler did not return within {timeout:g} s"))
        if state["error"] is not None:
            exc = state["error"]
            text = str(exc).strip().splitlines()
            raise SamplerFault(
                Violation("raised", f"the sampler raised {type(exc).__name__}: {text[0] if text else '(no message)'}")
            ) from exc
        return state["results"]
