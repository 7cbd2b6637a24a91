"""The sampler contract: what a sampler is, what it may declare, and how one is named.

A sampler is any callable

    sampler(target_probs, draft_probs, draft_tokens, generator) -> (tokens, num_accepted)

with ``target_probs [B, K+1, V]``, ``draft_probs [B, K, V]``, ``draft_tokens [B, K]`` (int64) and a
``torch.Generator``.  Row ``i`` of ``target_probs`` is the target law after ``draft_tokens[:, :i]``;
row ``K`` is the law of the bonus token.  It returns ``tokens [B, K+1]`` (int64: the accepted drafts,
then the replacement or bonus token, then ``-1`` padding) and ``num_accepted [B]`` (int64): row ``b``
emits ``num_accepted[b] + 1`` tokens.

Rows are normalised as well as their dtype allows, as engines pass them: what a softmax in that
dtype returns, rounded low-precision rows included (a bf16 row may sum to 1 within bf16 rounding).
The law a row stands for is the row divided by its sum.  Rows far from normalised (a draft row that
sums to 1.01, a row scaled by 2) are given only to a sampler that declares ``unnormalised=True``.

Everything else is optional and declared as attributes, so that a plain function is a sampler:

* ``name``: shown in reports (default: the qualified name of the callable);
* ``capabilities``: a :class:`Capabilities` saying where and on what the sampler runs, so the harness
  skips, with a stated reason, what it cannot do instead of counting it as a pass.

Samplers that declare ``uniforms=True`` also accept a keyword ``uniforms [B, K+1]`` (float64 in
``[0, 1)``) and then use no other randomness, following the canonical convention:

* draft ``i`` (``i < K``) is accepted iff ``uniforms[:, i] * q_i(y_i) < p_i(y_i)``;
* the emitted token after the last acceptance (the replacement, or the bonus when all ``K`` drafts
  are accepted) is the smallest token ``t`` whose cumulative mass, in token order, exceeds
  ``uniforms[:, K]`` times the total mass of the distribution it is drawn from.

That lets the exact-enumeration check compute the sampler's output law over the uniforms themselves,
with no sampling error.

:func:`audit_output` checks an output against this contract exactly (no statistics) and returns the
rules it breaks (each a :class:`Violation`), as :func:`specverify._trees.contract.audit_tree_output` does for the
tree contract; :mod:`specverify._kinds` puts each behind its kind's step layout.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import torch

from ._not_found import not_found
from .errors import SamplerSpecError, Violation

__all__ = [
    "Capabilities",
    "ForeignTensor",
    "Sampler",
    "SamplerSpecError",
    "Violation",
    "audit_output",
    "capabilities_of",
    "describe",
    "resolve_sampler",
    "malformed",
    "malformed_pair",
    "name_of",
    "sampler",
]


@runtime_checkable
class Sampler(Protocol):
    """The call signature every sampler meets (see the module docstring)."""

    def __call__(
        self,
        target_probs: torch.Tensor,
        draft_probs: torch.Tensor,
        draft_tokens: torch.Tensor,
        generator: torch.Generator,
    ) -> tuple[torch.Tensor, torch.Tensor]: ...


@dataclasses.dataclass(frozen=True)
class Capabilities:
    """What a sampler can be given.  Every field has the permissive default.

    Attributes:
        device: ``"cpu"``, ``"cuda"``, ... or ``None`` for "whatever device the inputs are on".
        dtypes: probability dtypes the sampler accepts, best first.  A case is passed in its own
            precision when the sampler takes it (a bf16-rounded case in bf16), else in the first
            declared dtype at least as wide.
        max_k: largest number of draft tokens, or ``None`` for no limit.
        max_vocab: largest vocabulary, or ``None`` for no limit.
        max_batch: largest batch per call, or ``None``; larger requests are split into calls.
        batched: ``False`` if the sampler handles one row per call (the harness then loops).
        uniforms: accepts ``uniforms=`` following the canonical convention (module docstring).
        deterministic: same generator state, same output.  ``False`` skips the determinism check.
        canonical: implements the canonical token-wise verification, so its law *given the
            drafts* must be the canonical algorithm's.  ``False`` for another lossless verifier
            (block verification, sample-and-compare): the checks of the canonical law are skipped,
            and the target's own law alone decides whether it is lossless.
        unnormalised: renormalises its inputs, so rows far from normalised (any positive scale)
            stand for the row divided by its sum.  ``True`` adds a check on such rows, whose
            failure is its own finding ("does not renormalise its inputs"); ``False`` (engines'
            kernels) means the sampler is given only rows normalised as well as their dtype allows.
        inputs: ``"probs"`` (the contract above) or ``"logits"``: the sampler takes
            ``(target_logits [B, K+1, V], draft_probs, draft_tokens, generator, params)`` and must
            preserve ``specverify.laws.warp(target_logits, params)`` (see docs/loops.md); every case of
            the battery is posed to it as logits and per-row parameters whose warp is the case's law.
        params: the sampling parameters a logits sampler honours (``temperature``, ``top_k``,
            ``top_p``, ``min_p``, and ``seeds`` for per-request seeds: the ``seeds`` family then
            gives rows their own seeds); it is given only those.
        max_children: a tree sampler's most children of one node (real buffers hold 10, say), or
            ``None``.  The ``trees`` family poses no tree wider and says which it left out.
        max_depth: a tree sampler's deepest node, the root at depth 0 (the most candidates one path
            accepts), or ``None``.
        max_nodes: a tree sampler's most nodes in one tree, the root included
            (:attr:`TreeBatch.width <specverify.trees.TreeBatch>`), or ``None``.
        reserved_tokens: token ids a tree sampler treats specially (0 as padding, 2 as end): none is
            ever a candidate token of a tree the family poses (the laws still give them mass).
    """

    device: str | None = None
    dtypes: tuple[torch.dtype, ...] = (torch.float64, torch.float32)
    max_k: int | None = None
    max_vocab: int | None = None
    max_batch: int | None = None
    batched: bool = True
    uniforms: bool = False
    deterministic: bool = True
    canonical: bool = True
    unnormalised: bool = False
    inputs: str = "probs"
    params: tuple[str, ...] = ()
    max_children: int | None = None
    max_depth: int | None = None
    max_nodes: int | None = None
    reserved_tokens: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not self.dtypes:
            raise ValueError("Capabilities.dtypes must name at least one dtype")
        if self.inputs not in ("probs", "logits"):
            raise ValueError(f"Capabilities.inputs must be 'probs' or 'logits', got {self.inputs!r}")
        warps = ("temperature", "top_k", "top_p", "min_p", "seeds")
        unknown = [name for name in self.params if name not in warps]
        if unknown or (self.params and self.inputs != "logits"):
            raise ValueError(
                f"Capabilities.params names the warps a logits sampler honours, some of {warps}; got "
                f"{tuple(self.params)!r}" + ("" if self.inputs == "logits" else " on a sampler of probabilities")
            )
        for field in ("max_k", "max_vocab", "max_batch", "max_children", "max_depth", "max_nodes"):
            value = getattr(self, field)
            least = 2 if field == "max_nodes" else 1  # a tree of one node has no candidate
            if value is not None and (not _is_int(value) or value < least):
                what = " (the root and at least one candidate)" if least == 2 else ""
                raise ValueError(f"Capabilities.{field} must be an integer >= {least}{what} or None, got {value!r}")
        self._check_reserved()

    @property
    def tree_limits(self) -> bool:
        """Whether the sampler declares any of the tree fields (``max_children``, ``max_depth``,
        ``max_nodes``, ``reserved_tokens``), which only a tree sampler may."""
        return any(v is not None for v in (self.max_children, self.max_depth, self.max_nodes)) or bool(
            self.reserved_tokens
        )

    def _check_reserved(self) -> None:
        reserved = self.reserved_tokens
        if isinstance(reserved, (str, bytes)) or not isinstance(reserved, (tuple, list, set, frozenset)):
            raise ValueError(f"Capabilities.reserved_tokens must be a tuple of token ids, got {reserved!r}")
        top = "" if self.max_vocab is None else f", {self.max_vocab}"
        bad = [t for t in reserved if not _is_int(t) or t < 0 or (self.max_vocab is not None and t >= self.max_vocab)]
        if bad:
            raise ValueError(f"Capabilities.reserved_tokens must be token ids in [0{top or ', V'}), got {bad[0]!r}")
        object.__setattr__(self, "reserved_tokens", tuple(sorted({int(t) for t in reserved})))

    def unsupported(self, *, k: int, vocab: int) -> str | None:
        """Why a case of this size cannot run on the sampler, or ``None`` if it can."""
        if self.max_k is not None and k > self.max_k:
            return f"needs K={k}, sampler declares max_k={self.max_k}"
        if self.max_vocab is not None and vocab > self.max_vocab:
            return f"needs V={vocab}, sampler declares max_vocab={self.max_vocab}"
        return None

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["dtypes"] = [str(d).removeprefix("torch.") for d in self.dtypes]
        return data


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclasses.dataclass(frozen=True)
class ForeignTensor:
    """A tensor the sampler returned on another device than its inputs' (``meta`` included), as the
    sampler's process describes it: the tensor itself cannot travel back."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    device: str


def capabilities_of(sampler: Callable[..., Any]) -> Capabilities:
    """The sampler's declared capabilities, or the defaults."""
    caps = getattr(sampler, "capabilities", None)
    if caps is None:
        return Capabilities()
    if not isinstance(caps, Capabilities):
        raise SamplerSpecError(
            f"{name_of(sampler)}.capabilities is a {type(caps).__name__}, expected specverify.Capabilities"
        )
    return caps


def name_of(sampler: Callable[..., Any]) -> str:
    """A human name for the sampler: its ``name`` attribute, else its qualified name."""
    name = getattr(sampler, "name", None)
    if isinstance(name, str) and name:
        return name
    target = sampler if inspect.isfunction(sampler) or inspect.ismethod(sampler) else type(sampler)
    module = getattr(target, "__module__", None) or "?"
    return f"{module}.{getattr(target, '__qualname__', repr(target))}"


def describe(sampler: Callable[..., Any]) -> dict[str, Any]:
    """Name and capabilities, as recorded in a run's JSON."""
    return {"name": name_of(sampler), "capabilities": capabilities_of(sampler).to_json()}


def sampler(
    fn: Callable[..., Any] | None = None, *, name: str | None = None, warp: Any = None, **capabilities: Any
) -> Any:
    """Declare a function a sampler, with a name and capabilities, in one line.

    ``@specverify.sampler(name="mine", device="cuda", dtypes=(torch.float32,))`` on a function sets
    its ``name`` and ``capabilities`` attributes and returns the function itself.  ``warp`` (a logits
    sampler): its engine's own warp, a preset's name (``"vllm"``) or a callable ``(logits, params)
    -> probabilities``, set as its ``warp`` attribute: the law it must preserve (default transformers').
    """
    if warp is not None:
        from ._warps.declared import resolve_warp

        resolve_warp(warp)  # an unknown preset fails where it is declared, in one line

    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        if warp is not None:
            f.warp = warp  # type: ignore[attr-defined]
        if name is not None:
            f.name = name  # type: ignore[attr-defined]
        f.capabilities = Capabilities(**capabilities)  # type: ignore[attr-defined]
        return f

    return decorate(fn) if fn is not None else decorate


def resolve_sampler(spec: str) -> Callable[..., Any]:
    """Resolve ``"package.module:attribute"`` to a sampler, as it declares itself.

    The attribute may be a sampler or a zero-argument factory that returns one (told apart by
    signature: a callable taking four positional arguments is a sampler).  It is returned as
    written; :func:`specverify._kinds.load_sampler` poses it as its kind is called (the kinds build
    on this contract, so this module never imports them).  Every failure raises
    :class:`SamplerSpecError` with a one-line message.
    """
    module_name, sep, attr_path = spec.partition(":")
    if not sep or not module_name or not attr_path:
        raise SamplerSpecError(
            f"sampler spec {spec!r} is not of the form 'package.module:attribute' "
            "(for example specverify.samplers:reference)"
        )
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise SamplerSpecError(not_found(spec, exc.name or module_name)) from exc
    except Exception as exc:  # an import that runs user code can raise anything
        raise SamplerSpecError(
            f"importing {module_name!r} of spec {spec!r} raised {type(exc).__name__}: {_one_line(exc)}"
        ) from exc
    obj: Any = module
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            raise SamplerSpecError(f"module {module_name!r} has no attribute {attr_path!r}") from exc
        except Exception as exc:  # lazy module attributes run code too
            raise SamplerSpecError(
                f"reading {attr_path!r} of {module_name!r} raised {type(exc).__name__}: {_one_line(exc)}"
            ) from exc
    if not callable(obj):
        raise SamplerSpecError(f"{spec!r} is a {type(obj).__name__}, not a sampler or a zero-argument factory")
    if _is_factory(obj):
        try:
            made = obj()
        except Exception as exc:
            raise SamplerSpecError(f"factory {spec!r} raised {type(exc).__name__}: {_one_line(exc)}") from exc
        if not callable(made):
            raise SamplerSpecError(f"factory {spec!r} returned a {type(made).__name__}, which is not callable")
        obj = made
    try:
        capabilities_of(obj)
    except SamplerSpecError as exc:
        raise SamplerSpecError(f"{spec!r}: {exc}") from exc
    from ._warps.declared import declared_warp

    try:
        declared_warp(obj)
    except ValueError as exc:  # an unknown preset name: the user's mistake, at load
        raise SamplerSpecError(f"{spec!r}: {exc}") from exc
    return obj


def _is_factory(obj: Callable[..., Any]) -> bool:
    """True for a callable that takes no required arguments (a factory), False for a sampler."""
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return False
    required = [
        p
        for p in signature.parameters.values()
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    takes_varargs = any(p.kind is p.VAR_POSITIONAL for p in signature.parameters.values())
    return not required and not takes_varargs


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else "(no message)"


# --- the exact audit of an output ------------------------------------------------------------


def audit_output(
    output: Any, target_probs: torch.Tensor, draft_tokens: torch.Tensor, *, first_only: bool = False
) -> list[Violation]:
    """Every contract rule the output breaks (exact; no statistics)."""
    batch, k = draft_tokens.shape
    vocab = target_probs.shape[-1]
    problems = malformed(output, batch, k)
    if problems:
        return problems[:1] if first_only else problems
    tokens, accepted = output
    tokens = tokens.to(draft_tokens.device)
    accepted = accepted.to(draft_tokens.device)
    if _clean(tokens, accepted, target_probs, draft_tokens):
        return []

    def first_row(mask: torch.Tensor) -> int | None:
        rows = mask.nonzero()
        return int(rows[0, 0]) if rows.numel() else None

    checks: list[tuple[str, torch.Tensor, Callable[[int], str], str]] = []
    bad = (accepted < 0) | (accepted > k)
    checks.append(
        (
            "num-accepted-range",
            bad,
            lambda r: f"row {r}: num_accepted = {int(accepted[r])} is outside [0, {k}]",
            "contract",
        )
    )
    if not bad.any():
        positions = torch.arange(k + 1, device=tokens.device)
        emitted = positions <= accepted.unsqueeze(-1)
        out_of_range = emitted & ((tokens < 0) | (tokens >= vocab))
        padding = ~emitted & (tokens != -1)
        mismatch = (positions[:k] < accepted.unsqueeze(-1)) & (tokens[:, :k] != draft_tokens)
        safe = tokens.clamp(0, vocab - 1)
        impossible = emitted & (target_probs.gather(-1, safe.unsqueeze(-1)).squeeze(-1) == 0)
        per_row = torch.stack([out_of_range.any(-1), padding.any(-1), mismatch.any(-1), impossible.any(-1)])
        found = per_row.any(-1).tolist()  # one pass decides the common case: nothing wrong
        if not any(found):
            return []

        def token_range(r: int) -> str:
            n, position = int(accepted[r]), int(out_of_range[r].nonzero()[0, 0])
            token = int(tokens[r, position])
            text = (
                f"row {r}: num_accepted = {n} declares {n} accepted draft{'s' if n != 1 else ''}, so the row emits "
                f"{n + 1} token{'s' if n else ''} ({'position 0' if n == 0 else f'positions 0 to {n}'}); position "
                f"{position} holds {token}, outside the vocabulary [0, {vocab})"
            )
            if token == -1:
                text += f": -1 is padding, allowed only after position {n}"
            return text

        checks.append(("token-range", per_row[0], token_range, "contract"))
        checks.append(
            (
                "padding",
                per_row[1],
                lambda r: (
                    f"row {r}: {int(accepted[r]) + 1} tokens emitted but position {int(padding[r].nonzero()[0, 0])} "
                    f"holds {_first(tokens[r], padding[r])}, not -1 padding"
                ),
                "contract",
            )
        )
        checks.append(
            (
                "accepted-drafts",
                per_row[2],
                lambda r: (
                    f"row {r}: accepted position {int(mismatch[r].nonzero()[0, 0])} holds token "
                    f"{_first(tokens[r, :k], mismatch[r])} but the draft was {_first(draft_tokens[r], mismatch[r])}"
                ),
                "contract",
            )
        )
        if not found[0]:  # a token outside the vocabulary has no target probability to look up
            checks.append(
                (
                    "zero-target",
                    per_row[3],
                    lambda r: (
                        f"row {r}: emitted token {_first(tokens[r], impossible[r])} at position "
                        f"{int(impossible[r].nonzero()[0, 0])}, where the target probability is 0"
                    ),
                    "support",
                )
            )
    violations = []
    for rule, mask, describe, finding in checks:
        row = first_row(mask)
        if row is not None:
            violations.append(Violation(rule, describe(row), finding, row))
            if first_only:
                break
    return violations


def _clean(
    tokens: torch.Tensor, accepted: torch.Tensor, target_probs: torch.Tensor, draft_tokens: torch.Tensor
) -> bool:
    """Whether an output of the contract's shapes and dtypes breaks no rule: the common case,
    decided in a few passes over the batch (:func:`audit_output` then words the rule broken, rule by
    rule, only where one is)."""
    batch, k = draft_tokens.shape
    if batch == 0:
        return True
    low, high = torch.aminmax(accepted)
    if low < 0 or high > k:
        return False
    positions = torch.arange(k + 1, device=tokens.device)
    padding = positions > accepted.unsqueeze(-1)
    # before the last emitted position the drafts, after it -1: only the last token is the sampler's own
    expected = torch.cat([draft_tokens, draft_tokens.new_full((batch, 1), -1)], dim=1).masked_fill(padding, -1)
    if ((tokens != expected) & (positions != accepted.unsqueeze(-1))).any():
        return False
    emitted = tokens.masked_fill(padding, 0)
    low, high = torch.aminmax(emitted)
    if low < 0 or high >= target_probs.shape[-1]:
        return False
    return not bool(((target_probs.gather(-1, emitted.unsqueeze(-1)).squeeze(-1) == 0) & ~padding).any())


def malformed(output: Any, batch: int, k: int, *, device: torch.device | None = None) -> list[Violation]:
    """What keeps ``output`` from being a pair of int64 tensors of the contract's shapes (on ``device``
    where given): the audit's first rules, which a batch's calls each pass before their outputs are
    joined and audited whole."""
    return malformed_pair(output, (("tokens", (batch, k + 1)), ("num_accepted", (batch,))), device=device)


def malformed_pair(
    output: Any,
    fields: tuple[tuple[str, tuple[int, ...]], tuple[str, tuple[int, ...]]],
    *,
    device: torch.device | None = None,
) -> list[Violation]:
    """What keeps ``output`` from being a pair of int64 tensors named and shaped as ``fields`` (on
    ``device`` where given; a tensor left on another device, ``meta`` included, never passes): every
    layout's output is such a pair."""
    if not isinstance(output, (tuple, list)) or len(output) != 2:
        return [
            Violation("shape-dtype", f"returned {_describe(output)}, expected a ({fields[0][0]}, {fields[1][0]}) pair")
        ]
    problems = []
    for (name, shape), value in zip(fields, output):
        if isinstance(value, ForeignTensor) or (isinstance(value, torch.Tensor) and value.device.type == "meta"):
            problems.append(
                Violation("device", f"{name} is on {value.device}, the inputs were on {device or 'another device'}")
            )
        elif not isinstance(value, torch.Tensor):
            problems.append(Violation("shape-dtype", f"{name} is {_describe(value)}, expected a torch.Tensor"))
        elif device is not None and value.device != device:
            problems.append(Violation("device", f"{name} is on {value.device}, the inputs were on {device}"))
        elif tuple(value.shape) != shape:
            problems.append(
                Violation(
                    "shape-dtype",
                    f"{name} has shape {tuple(value.shape)}, expected {shape}{_shape_hint(tuple(value.shape), shape)}",
                )
            )
        elif value.dtype != torch.int64:
            problems.append(Violation("shape-dtype", f"{name} has dtype {value.dtype}, expected torch.int64"))
    return problems


def _shape_hint(got: tuple[int, ...], expected: tuple[int, ...]) -> str:
    """The known cause of a wrong output shape, where there is one: one row back for a batch of
    several is a one-row function declared batched (the default)."""
    if len(expected) >= 1 and expected[0] > 1 and (got[:1] == (1,) and got[1:] == expected[1:] or got == expected[1:]):
        return (
            "; one row for a batch of several: a function that handles one row per call must declare batched=False "
            "(@specverify.sampler(batched=False), or capabilities = specverify.Capabilities(batched=False)), and the "
            "harness then calls it row by row"
        )
    return ""


def _first(values: torch.Tensor, mask: torch.Tensor) -> int:
    return int(values[mask][0])


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of length {len(value)}"
    return f"a {type(value).__name__}"
