"""The cases checks run on: fixed step inputs, and models that drafts are drawn from.

* :class:`StepCase`: one verification step's inputs, fixed: ``target_probs [K+1, V]``,
  ``draft_probs [K, V]``, ``draft_tokens [K]``.  Its exact output law is :func:`step_law`.
* :class:`ModelCase`: a :class:`~specverify.models.Model` and ``K``; the harness draws the drafts from the
  draft model, so the emitted tokens can be set against the target's own law.

Both know how to print themselves as Python a user can paste (``to_code``) and how to fingerprint
themselves, which is what sampling seeds are derived from.
"""

from __future__ import annotations

import dataclasses
import hashlib

import torch

from .._record.evidence import CaseRecord
from .exact import step_law
from .models import ChainModel, Model, TableModel

__all__ = ["ModelCase", "StepCase", "tensor_code"]


def tensor_code(tensor: torch.Tensor) -> str:
    """Python source that rebuilds ``tensor`` exactly (floats printed with ``repr``)."""
    dtype = str(tensor.dtype).removeprefix("torch.")
    return f"torch.tensor({tensor.tolist()!r}, dtype=torch.{dtype})"


def _digest(*tensors: torch.Tensor, extra: str = "") -> str:
    h = hashlib.blake2b(digest_size=12)
    for t in tensors:
        h.update(str(tuple(t.shape)).encode())
        h.update(t.detach().to("cpu").contiguous().numpy().tobytes())
    h.update(extra.encode())
    return h.hexdigest()


@dataclasses.dataclass(frozen=True, eq=False)
class StepCase:
    """Fixed inputs of one verification step (one batch row).

    ``precision`` names the rounding the probabilities went through (``"float64"``, ``"bfloat16"``,
    ...): the harness passes them to the sampler at that precision or finer.
    """

    target_probs: torch.Tensor
    draft_probs: torch.Tensor
    draft_tokens: torch.Tensor
    label: str = "random"
    precision: str = "float64"

    def __post_init__(self) -> None:
        k1, vocab = self.target_probs.shape
        if tuple(self.draft_probs.shape) != (k1 - 1, vocab) or tuple(self.draft_tokens.shape) != (k1 - 1,):
            raise ValueError(
                f"inconsistent step shapes {tuple(self.target_probs.shape)}, "
                f"{tuple(self.draft_probs.shape)}, {tuple(self.draft_tokens.shape)}"
            )

    @property
    def k(self) -> int:
        return int(self.draft_tokens.shape[0])

    @property
    def vocab_size(self) -> int:
        return int(self.target_probs.shape[-1])

    @property
    def shape_key(self) -> tuple[int, int]:
        """Cases with equal keys can share a batch."""
        return (self.k, self.vocab_size)

    def law(self) -> torch.Tensor:
        """``[K+1, V]`` exact law of (accepted drafts, last token)."""
        return step_law(self.target_probs[None], self.draft_probs[None], self.draft_tokens[None])[0]

    def fingerprint(self) -> str:
        return _digest(self.target_probs, self.draft_probs, self.draft_tokens, extra=self.label)

    def batch(self, rows: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The case repeated on ``rows`` batch rows."""
        return (
            self.target_probs.expand(rows, -1, -1),
            self.draft_probs.expand(rows, -1, -1),
            self.draft_tokens.expand(rows, -1),
        )

    def to_code(self) -> str:
        return (
            f"target_probs = {tensor_code(self.target_probs)}  # [K+1, V]\n"
            f"draft_probs = {tensor_code(self.draft_probs)}  # [K, V]\n"
            f"draft_tokens = {tensor_code(self.draft_tokens)}  # [K]"
        )

    def describe(self) -> CaseRecord:
        return {
            "kind": "step",
            "label": self.label,
            "precision": self.precision,
            "K": self.k,
            "V": self.vocab_size,
            "target_probs": self.target_probs.tolist(),
            "draft_probs": self.draft_probs.tolist(),
            "draft_tokens": self.draft_tokens.tolist(),
        }


@dataclasses.dataclass(frozen=True, eq=False)
class ModelCase:
    """A model and a number of drafts per step; drafts are drawn by the harness."""

    model: Model
    k: int
    label: str = "random"
    precision: str = "float64"

    @property
    def vocab_size(self) -> int:
        return self.model.vocab_size

    def rounded(self, dtype: torch.dtype) -> ModelCase:
        """The same case with every table rounded to ``dtype`` (kept in float64)."""

        def r(t: torch.Tensor) -> torch.Tensor:
            return t.to(dtype).to(torch.float64)

        model = self.model
        if isinstance(model, ChainModel):
            model = dataclasses.replace(model, target_table=r(model.target_table), draft_table=r(model.draft_table))
        elif isinstance(model, TableModel):
            model = TableModel(tuple(map(r, model.target_tables)), tuple(map(r, model.draft_tables)))
        else:
            raise TypeError(f"cannot round a {type(model).__name__}")
        return dataclasses.replace(self, model=model)

    def fingerprint(self) -> str:
        return _digest(*_model_tensors(self.model), extra=f"{self.k}:{self.label}:{_model_context(self.model)}")

    def to_code(self) -> str:
        model = self.model
        if isinstance(model, ChainModel):
            return (
                "model = specverify.models.ChainModel(\n"
                f"    target_table={tensor_code(model.target_table)},\n"
                f"    draft_table={tensor_code(model.draft_table)},\n"
                f"    context={model.context!r},\n)\nk = {self.k}"
            )
        if isinstance(model, TableModel):
            targets = ",\n        ".join(tensor_code(t) for t in model.target_tables)
            drafts = ",\n        ".join(tensor_code(t) for t in model.draft_tables)
            return (
                "model = specverify.models.TableModel(\n"
                f"    target_tables=(\n        {targets},\n    ),\n"
                f"    draft_tables=(\n        {drafts},\n    ),\n)\nk = {self.k}"
            )
        return f"model = ...  # a {type(model).__name__}, not printable\nk = {self.k}"

    def describe(self) -> CaseRecord:
        model = self.model
        out: CaseRecord = {
            "kind": "model",
            "label": self.label,
            "precision": self.precision,
            "K": self.k,
            "V": self.vocab_size,
            "model": type(model).__name__,
        }
        if isinstance(model, ChainModel):
            out["target_table"] = model.target_table.tolist()
            out["draft_table"] = model.draft_table.tolist()
            out["context"] = list(model.context)
        elif isinstance(model, TableModel):
            out["target_tables"] = [t.tolist() for t in model.target_tables]
            out["draft_tables"] = [t.tolist() for t in model.draft_tables]
        return out


def _model_tensors(model: Model) -> tuple[torch.Tensor, ...]:
    if isinstance(model, ChainModel):
        return (model.target_table, model.draft_table)
    if isinstance(model, TableModel):
        return (*model.target_tables, *model.draft_tables)
    return ()


def _model_context(model: Model) -> str:
    return repr(getattr(model, "context", type(model).__name__))
