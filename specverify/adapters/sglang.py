"""SGLang's target-only tree verifier (``sgl_kernel``), used on a single chain, on a GPU.

Specs:

* ``specverify.adapters.sglang:sampler``: ``tree_speculative_sampling_target_only`` with
  ``threshold_single = threshold_acc = 1`` (SGLang's defaults), claimed lossless;
* ``specverify.adapters.sglang:relaxed``: ``threshold_single=0.8, threshold_acc=0.5``, a relaxed
  acceptance that SGLang exposes as server options, lossy by design.

SGLang verifies a tree of candidates; a chain of K drafts is the tree with one child per node.
Argument mapping, with ``N = K + 1`` nodes per row (node 0 is the last verified token, node ``i``
the ``i``-th draft):

* ``candidates [B, N]`` int64: ``[0, y_1, ..., y_K]`` (node 0's own id is never read);
* ``retrive_index [B, N]`` int64: ``b * N + i``; ``retrive_next_token``: ``i + 1``, and ``-1`` at
  the last node; ``retrive_next_sibling``: all ``-1``;
* ``target_probs [B, N, V]`` float32: the contract's ``target_probs`` as is (row ``i`` is the law
  after node ``i``); ``draft_probs``, in versions that take it, is a zeroed scratch buffer of the
  same shape, as SGLang allocates it: the kernel never reads the draft's law;
* ``uniform_samples [B, N]`` and ``uniform_samples_for_final_sampling [B]`` float32, drawn from the
  contract's generator (SGLang's caller supplies them the same way, from ``torch.rand``);
* outputs ``predicts [B*N]``, ``accept_index [B, N]``, ``accept_token_num [B]`` (int32, written
  in place) -> tokens ``predicts[accept_index[b, j]]`` for ``j <= accept_token_num[b]``, then
  ``-1``; ``num_accepted = accept_token_num``.

"Target only" means the kernel treats each draft as deterministic: it accepts ``y`` with
probability ``p(y)`` and otherwise draws from ``p`` without ``y``.  That keeps the target's law for
any draft law but accepts less than ``min(1, p/q)``: the harness should find it lossless but
suboptimal (not canonical), which is the honest description of this mode on stochastic drafts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..errors import AdapterUnavailable
from ._common import contract_output, cuda_device, float32_kernel_capabilities, import_library, parameter_names

__all__ = ["SGLangChainSampler", "relaxed", "sampler"]

_INSTALL = "pip install sgl-kernel"
_REQUIRED = {
    "predicts",
    "accept_index",
    "accept_token_num",
    "candidates",
    "retrive_index",
    "retrive_next_token",
    "retrive_next_sibling",
    "uniform_samples",
    "uniform_samples_for_final_sampling",
    "target_probs",
    "threshold_single",
    "threshold_acc",
}


class SGLangChainSampler:
    """``tree_speculative_sampling_target_only`` on one chain, behind the sampler contract.

    Args:
        tree_speculative_sampling_target_only: the library function.
        device: where it runs (a CUDA device; tests pass ``cpu`` with a stand-in function).
        threshold_single: accept a draft outright when its target probability reaches this.
        threshold_acc: accept a draft when ``coin <= p / threshold_acc``.
        version: shown in the sampler's name.
    """

    def __init__(
        self,
        tree_speculative_sampling_target_only: Callable[..., Any],
        *,
        device: torch.device | str,
        threshold_single: float = 1.0,
        threshold_acc: float = 1.0,
        version: str = "?",
    ) -> None:
        names = parameter_names(tree_speculative_sampling_target_only)
        missing = sorted(_REQUIRED - set(names))
        if missing:
            raise AdapterUnavailable(
                f"sgl_kernel {version}: tree_speculative_sampling_target_only lacks {missing} (takes {names})"
            )
        for label, value in (("threshold_single", threshold_single), ("threshold_acc", threshold_acc)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{label} must lie in [0, 1], got {value!r}")
        self._verify = tree_speculative_sampling_target_only
        self._takes_draft_probs = "draft_probs" in names
        self._takes_deterministic = "deterministic" in names
        self._thresholds = {"threshold_single": threshold_single, "threshold_acc": threshold_acc}
        exact = threshold_single == threshold_acc == 1.0
        mode = "" if exact else f" (threshold_single={threshold_single:g}, threshold_acc={threshold_acc:g})"
        self.name = f"sgl_kernel {version} tree_speculative_sampling_target_only, one chain{mode}"
        self.capabilities = float32_kernel_capabilities(device)

    @classmethod
    def load(
        cls, *, threshold_single: float = 1.0, threshold_acc: float = 1.0, device: torch.device | str | None = None
    ) -> SGLangChainSampler:
        """Import ``sgl_kernel``; ``device`` defaults to the current GPU (required)."""
        module = import_library("sgl_kernel", adapter="SGLang", install=_INSTALL)
        device = device if device is not None else cuda_device(adapter="SGLang")
        function = getattr(module, "tree_speculative_sampling_target_only", None)
        version = getattr(module, "__version__", "?")
        if function is None:
            raise AdapterUnavailable(f"sgl_kernel {version} has no tree_speculative_sampling_target_only")
        return cls(
            function, device=device, threshold_single=threshold_single, threshold_acc=threshold_acc, version=version
        )

    def __call__(
        self,
        target_probs: torch.Tensor,
        draft_probs: torch.Tensor,
        draft_tokens: torch.Tensor,
        generator: torch.Generator | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        batch, k = draft_tokens.shape
        nodes = k + 1
        device = target_probs.device
        node = torch.arange(nodes, device=device)
        candidates = torch.cat([torch.zeros_like(draft_tokens[:, :1]), draft_tokens], dim=1).to(torch.int64)
        retrive_index = (torch.arange(batch, device=device).unsqueeze(-1) * nodes + node).to(torch.int64)
        next_token = torch.where(node < k, node + 1, -1).to(torch.int64).expand(batch, nodes).contiguous()
        next_sibling = torch.full((batch, nodes), -1, dtype=torch.int64, device=device)
        uniforms = torch.rand((batch, nodes), generator=generator, dtype=torch.float32, device=device)
        final_uniforms = torch.rand((batch,), generator=generator, dtype=torch.float32, device=device)
        target = target_probs.to(torch.float32).contiguous()
        predicts = torch.full((batch * nodes,), -1, dtype=torch.int32, device=device)
        accept_index = torch.full((batch, nodes), -1, dtype=torch.int32, device=device)
        accept_token_num = torch.zeros((batch,), dtype=torch.int32, device=device)
        optional: dict[str, Any] = {"deterministic": True} if self._takes_deterministic else {}
        if self._takes_draft_probs:
            optional["draft_probs"] = torch.zeros_like(target)
        self._verify(
            predicts=predicts,
            accept_index=accept_index,
            accept_token_num=accept_token_num,
            candidates=candidates,
            retrive_index=retrive_index,
            retrive_next_token=next_token,
            retrive_next_sibling=next_sibling,
            uniform_samples=uniforms,
            uniform_samples_for_final_sampling=final_uniforms,
            target_probs=target,
            **optional,
            **self._thresholds,
        )
        emitted = node <= accept_token_num.unsqueeze(-1).to(torch.int64)
        tokens = torch.where(emitted, predicts[accept_index.clamp_min(0).to(torch.int64)], -1)
        return contract_output(tokens, accept_token_num)


def sampler() -> SGLangChainSampler:
    """SGLang's exact setting (both thresholds 1) on the current GPU."""
    return SGLangChainSampler.load()


def relaxed() -> SGLangChainSampler:
    """A relaxed setting (threshold_single=0.8, threshold_acc=0.5): lossy by design, so measured."""
    return SGLangChainSampler.load(threshold_single=0.8, threshold_acc=0.5)
