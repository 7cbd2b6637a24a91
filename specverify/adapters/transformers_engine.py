"""Hugging Face transformers' own ``generate()`` on real Llama models, speculation on and off.

Spec: ``specverify.adapters.transformers_engine:engine`` (the engine contract of :mod:`specverify._kinds.engine`).

The target is a real ``LlamaForCausalLM`` and the drafter a smaller real one, both built from a config
with random weights drawn from a fixed seed (nothing is downloaded), over a tiny vocabulary so that
the laws are dense.  With speculation on, ``generate(assistant_model=...)`` runs transformers' assisted
decoding: its candidate generator, ``_speculative_sampling``, the bonus token and the KV-cache crop
after a rejection; with ``drafter="prompt-lookup"`` candidates come from n-grams of the prompt
instead.  With speculation off, plain sampling, all rows in one batched call seeded from the call's
seed.  Assisted generation takes one sequence per call, so with speculation on rows run one after
another, each seeded from the call's seed and its row.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from .._seeds import derive_seed
from .._warps.rules import PARAMETERS, SamplingParams
from ._common import import_library
from .transformers_generate import TransformersGenerateLoop, generation_config, history_processors, quiet

__all__ = [
    "TransformersEngine",
    "engine",
    "engine_cache_not_rolled_back",
    "engine_positions_advanced_by_drafts",
    "engine_seed_ignored_when_speculating",
    "engine_tokens_after_stop",
]

_INSTALL = "pip install 'speculative-verify[transformers]'"
_DRAFTERS = ("assistant", "prompt-lookup")


class TransformersEngine:
    """``LlamaForCausalLM.generate`` behind the engine contract; ``fault`` plants an engine bug, in
    force with speculation on only:

    * ``"cache-not-rolled-back"``: a rejected draft's keys and values stay in the KV cache;
    * ``"seed-ignored-when-speculating"``: every call draws from one stream, the request's seed
      unused (calls repeat each other);
    * ``"positions-advanced-by-drafts"``: the target's position ids count every token it was fed,
      rejected drafts included, so after a rejection its rotary positions run ahead of the cache;
    * ``"tokens-after-stop"``: the stop tokens are looked for in a step's last token only (transformers'
      crop of an accepted block at its first stop token is skipped), so the tokens after a stop
      inside a block are emitted and the generation runs on.
    """

    contract = "engine"
    #: what transformers' generate() takes, as its loop adapter declares it (no frequency or presence penalty)
    parameters = TransformersGenerateLoop.parameters
    faults = (
        "cache-not-rolled-back",
        "seed-ignored-when-speculating",
        "positions-advanced-by-drafts",
        "tokens-after-stop",
    )
    max_batch = 64  # rows a call: with speculation on each takes a generate() of its own

    def __init__(
        self,
        transformers: Any,
        *,
        vocab_size: int = 6,
        drafter: str = "assistant",
        num_assistant_tokens: int = 3,
        seed: int = 0,
        fault: str | None = None,
    ) -> None:
        if drafter not in _DRAFTERS:
            raise ValueError(f"drafter must be one of {_DRAFTERS}, got {drafter!r}")
        if fault is not None and fault not in self.faults:
            raise ValueError(f"fault must be one of {self.faults}, got {fault!r}")
        self._transformers = transformers
        self.vocab_size = vocab_size
        self.drafter = drafter
        self.num_assistant_tokens = num_assistant_tokens
        self.fault = fault
        self.target = self._llama(layers=2, hidden=32, seed=seed)
        self.assistant = self._llama(layers=1, hidden=16, seed=seed + 1) if drafter == "assistant" else None
        self.name = f"transformers {transformers.__version__} generate({drafter}{', ' + fault if fault else ''})"

    def _llama(self, *, layers: int, hidden: int, seed: int) -> Any:
        config = self._transformers.LlamaConfig(
            vocab_size=self.vocab_size,
            hidden_size=hidden,
            intermediate_size=2 * hidden,
            num_hidden_layers=layers,
            num_attention_heads=2,
            num_key_value_heads=2,
            max_position_embeddings=128,
            initializer_range=0.25,  # wide enough that the next token depends on the prefix
            bos_token_id=None,
            eos_token_id=None,
            pad_token_id=0,
            tie_word_embeddings=False,
        )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return self._transformers.LlamaForCausalLM(config).eval()

    def __call__(
        self, prompts: torch.Tensor, num_tokens: int, params: SamplingParams, seed: int, speculative: bool
    ) -> torch.Tensor:
        out = torch.empty(prompts.shape[0], num_tokens, dtype=torch.int64)
        lookup = speculative and self.drafter == "prompt-lookup"
        extra = {"assistant_model": self.assistant} if speculative and self.assistant is not None else {}
        # assisted generation takes one sequence per call; plain generation a batch of rows sharing parameters
        calls = [[row] for row in range(prompts.shape[0])] if speculative else _alike(params, prompts.shape[0])
        with quiet(self._transformers), torch.random.fork_rng(devices=[]), torch.no_grad(), self._planted(speculative):
            for rows in calls:
                ignored = speculative and self.fault == "seed-ignored-when-speculating"
                torch.manual_seed(derive_seed("engine", 0 if ignored else seed, rows[0]))  # the fault: one stream
                config = generation_config(
                    self._transformers,
                    params.select(torch.tensor(rows[:1])),
                    num_tokens,
                    num_assistant_tokens=self.num_assistant_tokens,
                    prompt_lookup_num_tokens=self.num_assistant_tokens if lookup else None,
                )
                processors = history_processors(
                    self._transformers, params.select(torch.tensor(rows[:1])), prompts.shape[1]
                )
                made = self.target.generate(
                    prompts[rows], generation_config=config, logits_processor=processors, **extra
                )
                made = made[:, prompts.shape[1] :]
                out[rows] = torch.nn.functional.pad(made.to(torch.int64), (0, num_tokens - made.shape[1]), value=-1)
        if speculative and self.fault == "tokens-after-stop":
            return out  # the fault: what generate() emitted, tokens after a stop token included
        return _ended(out, params)

    @contextlib.contextmanager
    def _planted(self, speculative: bool) -> Iterator[None]:
        """The planted fault, in force for the call where it acts (speculation on)."""
        if self.fault is None or self.fault == "seed-ignored-when-speculating" or not speculative:
            yield
        elif self.fault == "cache-not-rolled-back":
            with _patched(self._transformers.DynamicCache, "crop", lambda self, tokens_to_remove: None):
                yield  # rejected drafts' keys and values stay
        elif self.fault == "tokens-after-stop":
            with _patched(type(self.target), "_assisted_decoding", _stop_crop_skipped(type(self.target))):
                yield
        else:
            hook = self.target.model.register_forward_pre_hook(_DraftCountingPositions(), with_kwargs=True)
            try:
                yield
            finally:
                hook.remove()


@contextlib.contextmanager
def _patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    """``owner.name`` is ``value`` for the block's duration, restored after (an inherited one
    inherited again)."""
    own, kept = name in vars(owner), getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        if own:
            setattr(owner, name, kept)
        else:
            delattr(owner, name)


def _stop_crop_skipped(model_class: Any) -> Any:
    """``_assisted_decoding`` with its generation config's stop tokens hidden from it: its stopping
    criteria, built before it is called, still end a generation whose step ends with a stop token,
    but its crop of an accepted block at the block's first stop token no longer happens."""
    assisted = model_class._assisted_decoding

    def decoding(self: Any, *args: Any, generation_config: Any, **kwargs: Any) -> Any:
        generation_config._eos_token_tensor = None  # the fault: the in-step crop reads it
        return assisted(self, *args, generation_config=generation_config, **kwargs)

    return decoding


class _DraftCountingPositions:
    """A forward pre-hook of the target's ``LlamaModel``: position ids counted from every token the
    model was fed since its prefill, rejected drafts included, instead of from its cache's length."""

    def __init__(self) -> None:
        self.fed = 0

    def __call__(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        tokens = kwargs["input_ids"] if kwargs.get("input_ids") is not None else kwargs["inputs_embeds"]
        cache = kwargs.get("cache")
        if cache is None or cache.get_seq_length() == 0:
            self.fed = 0  # a prefill: a new generation
        length = tokens.shape[1]
        kwargs["position_ids"] = (torch.arange(length) + self.fed).unsqueeze(0)
        self.fed += length
        return args, kwargs


def _ended(out: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """``-1`` after each row's first stop token, as the contract has it (a batched generate() pads
    a finished row with its pad token instead; a batch-1 one returns it shorter, padded above)."""
    if params.stop_tokens is None:
        return out
    stops = ((params.stop_tokens.unsqueeze(-1) >> out.clamp(min=0)) & 1).bool() & (out >= 0)
    after = (stops.cumsum(-1) - stops.int()) > 0  # positions past the first stop token
    return out.masked_fill(after, -1)


def _alike(params: SamplingParams, rows: int) -> list[list[int]]:
    """The rows, grouped by their sampling parameters' values (one generate() call each)."""
    columns = [value.tolist() for name in PARAMETERS if (value := getattr(params, name)) is not None]
    groups: dict[tuple[Any, ...], list[int]] = {}
    for row in range(rows):  # over rows of one call: a few dozen
        groups.setdefault(tuple(str(column[row]) for column in columns), []).append(row)
    return list(groups.values())


def engine(**options: Any) -> TransformersEngine:
    """The engine adapter (options as :class:`TransformersEngine`'s); raises
    :class:`~specverify.errors.AdapterUnavailable` without transformers."""
    transformers = import_library("transformers", adapter="transformers", install=_INSTALL)
    return TransformersEngine(transformers, **options)


def engine_cache_not_rolled_back() -> TransformersEngine:
    """The engine with its planted fault: a rejected draft's keys and values stay in the KV cache
    (spec ``specverify.adapters.transformers_engine:engine_cache_not_rolled_back``)."""
    return engine(fault="cache-not-rolled-back")


def engine_seed_ignored_when_speculating() -> TransformersEngine:
    """The engine with its planted fault: with speculation on the request's seed is not used
    (spec ``specverify.adapters.transformers_engine:engine_seed_ignored_when_speculating``)."""
    return engine(fault="seed-ignored-when-speculating")


def engine_positions_advanced_by_drafts() -> TransformersEngine:
    """The engine with its planted fault: rejected drafts still advance the target's position ids
    (spec ``specverify.adapters.transformers_engine:engine_positions_advanced_by_drafts``)."""
    return engine(fault="positions-advanced-by-drafts")


def engine_tokens_after_stop() -> TransformersEngine:
    """The engine with its planted fault: a stop token inside an accepted block of drafts does not
    end the generation (spec ``specverify.adapters.transformers_engine:engine_tokens_after_stop``)."""
    return engine(fault="tokens-after-stop")
