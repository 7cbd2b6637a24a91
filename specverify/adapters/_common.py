"""What every adapter does: import its library lazily, find a GPU, seed, convert layouts.

Adapters translate the sampler contract (:mod:`specverify._contract`) into a library's calling
convention and back.  The translations they share live here so each adapter module reads as its
library's argument mapping and nothing else.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import torch

from .._contract import Capabilities
from ..errors import AdapterUnavailable

__all__ = [
    "AdapterUnavailable",
    "contract_output",
    "cuda_device",
    "float32_kernel_capabilities",
    "import_library",
    "logits_from_probs",
    "parameter_names",
    "seed_from",
    "seeded_global_rng",
]

#: The largest seed drawn from a contract generator (torch seeds are 64-bit; stay signed).
_SEED_BOUND = 2**62


def import_library(module: str, *, adapter: str, install: str) -> ModuleType:
    """Import ``module`` on first use, or say in one line that it is missing and how to get it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise AdapterUnavailable(
            f"the {adapter} adapter needs {module!r}, which cannot be imported here ({_first_line(exc)}); "
            f"install it with `{install}`"
        ) from exc


def cuda_device(*, adapter: str) -> torch.device:
    """The current CUDA device, or :class:`AdapterUnavailable` when there is none."""
    if not torch.cuda.is_available():
        raise AdapterUnavailable(
            f"the {adapter} adapter needs an NVIDIA GPU: torch.cuda.is_available() is False "
            f"(torch {torch.__version__}, CUDA build {torch.version.cuda or 'none'})"
        )
    return torch.device("cuda", torch.cuda.current_device())


def float32_kernel_capabilities(device: torch.device | str, **limits: Any) -> Capabilities:
    """What a library's float32 GPU kernel can do: its device, float32 inputs, its own randomness.

    Engine kernels do not renormalise their inputs (the engine passes softmax outputs), so none
    declares ``unnormalised``: each is given rows normalised as well as float32 allows, as its
    engine gives them.  ``limits`` are further :class:`Capabilities` fields (``max_k``, ...).
    """
    device = torch.device(device)
    name = device.type if device.index is None else str(device)
    return Capabilities(device=name, dtypes=(torch.float32,), uniforms=False, **limits)


def parameter_names(fn: Callable[..., Any]) -> list[str]:
    """The names of a library function's parameters, in order (its version's calling convention)."""
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):  # a builtin without a signature
        return []


def logits_from_probs(probs: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Log-probabilities in ``dtype``, ``-inf`` where a probability is 0.

    ``softmax`` of the result is the row divided by its sum, so a library that takes logits sees
    exactly the law the contract's (possibly unnormalised) probability row stands for.
    """
    return probs.to(dtype).log()


def seed_from(generator: torch.Generator | None) -> int:
    """One seed drawn from the contract's generator: same generator state, same seed."""
    device = generator.device if generator is not None else torch.device("cpu")
    return int(torch.randint(_SEED_BOUND, (), generator=generator, device=device))


@contextlib.contextmanager
def seeded_global_rng(device: torch.device, seed: int) -> Iterator[None]:
    """Seed the global generator of ``device`` for a library that draws from it, then restore it.

    Libraries such as transformers call ``torch.rand_like`` and ``torch.multinomial`` without a
    generator.  Seeding only the generator of the device they run on, and putting its state back
    afterwards, makes them deterministic in the contract's generator without touching the random
    state of the caller or of any other device.
    """
    global_generator = _default_generator(device)
    saved = global_generator.get_state()
    global_generator.manual_seed(seed)
    try:
        yield
    finally:
        global_generator.set_state(saved)


def contract_output(
    tokens: torch.Tensor, num_accepted: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """A library's ``[B, K+1]`` token ids (``-1`` padded, any integer dtype) as the contract's pair.

    ``num_accepted`` is the library's own count when it reports one (then the harness's audit
    checks it against the tokens); otherwise it is read off the tokens: emitted tokens minus one.
    """
    tokens = tokens.to(torch.int64)
    if num_accepted is None:
        num_accepted = (tokens != -1).sum(dim=-1) - 1
    return tokens, num_accepted.to(device=tokens.device, dtype=torch.int64)


def _default_generator(device: torch.device) -> torch.Generator:
    if device.type == "cpu":
        return torch.default_generator
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        torch.cuda.init()  # default_generators is empty until CUDA is initialised
        return torch.cuda.default_generators[index]
    raise ValueError(f"no global generator known for device {device}")


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
