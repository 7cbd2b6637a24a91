"""Adapters: real third-party speculative samplers behind the sampler contract.

Each adapter module imports its library only when one of its specs is loaded, and a spec that
cannot run here (library missing, no GPU, a version without the mode asked for) fails to load with
a one-line :class:`AdapterUnavailable` reason, so ``specverify check`` exits with status 2 and says
why.  ``specverify adapters`` lists them all and whether each can run on this machine.

* :mod:`specverify.adapters.transformers`: Hugging Face transformers (CPU or GPU);
* :mod:`specverify.adapters.vllm`: vLLM V1's rejection sampler (GPU);
* :mod:`specverify.adapters.flashinfer`: FlashInfer's chain speculative sampling (GPU);
* :mod:`specverify.adapters.sglang`: SGLang's target-only tree verifier on one chain (GPU).

Adapters never import the checks: they only translate calling conventions.
"""

from __future__ import annotations

from ..errors import AdapterUnavailable
from ._registry import ADAPTERS, Adapter, Readiness, print_adapters, readiness

__all__ = ["ADAPTERS", "Adapter", "AdapterUnavailable", "Readiness", "print_adapters", "readiness"]
