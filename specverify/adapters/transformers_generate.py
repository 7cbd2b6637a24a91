"""Hugging Face transformers' whole assisted generation loop, ``generate(..., assistant_model=...)``.

Spec: ``specverify.adapters.transformers_generate:loop`` (the generation-loop contract of
:mod:`specverify._loop`).

The harness's language models (callables ``prefix -> logits``) are wrapped as tiny local
``PreTrainedModel`` s, so ``generate()`` runs its real code path: candidate generation by the
assistant, the logits processors built from the generation config, ``_speculative_sampling``, the
bonus token and the cache bookkeeping.  Nothing is downloaded.  The wrapped model keeps the token
history in its ``DynamicCache`` (tokens stored as one-dimensional keys), so whatever slice of the
input ``generate()`` passes, the model sees the whole prefix, and a prefix-dependent law stays exact.

Assisted generation is batch-1: the adapter loops over rows and seeds torch's global generator from
the harness's generator for each call (restoring it afterwards).  Sampling parameters map to the
generation config: ``temperature`` 0 is greedy (``do_sample=False``); ``top_k`` 0, ``top_p`` 1 and
``min_p`` 0 are passed explicitly as "off", since transformers' own default is ``top_k=50``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import torch

from .._history import grammar_mask
from .._warps.rules import SamplingParams
from ..errors import AdapterUnavailable
from ._common import import_library, seed_from, seeded_global_rng

__all__ = ["TransformersGenerateLoop", "generation_config", "history_config", "loop", "quiet"]

_INSTALL = "pip install 'speculative-verify[transformers]'"

LanguageModel = Callable[[torch.Tensor], torch.Tensor]


def _model_classes(transformers: Any) -> tuple[type, type]:
    """A config and a causal LM whose logits come from a harness language model."""
    from transformers.modeling_outputs import CausalLMOutputWithPast

    # transformers 5 names the output's cache ``cache`` (``past_key_values`` deprecated); 4.x only the latter
    cache_field = (
        "cache" if "cache" in {f.name for f in dataclasses.fields(CausalLMOutputWithPast)} else "past_key_values"
    )

    class HarnessConfig(transformers.PretrainedConfig):
        model_type = "specverify-harness-lm"

        def __init__(self, vocab_size: int = 2, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.vocab_size = vocab_size
            self.num_hidden_layers = 1

    class HarnessLM(transformers.PreTrainedModel, transformers.GenerationMixin):
        config_class = HarnessConfig

        def __init__(self, config: Any, language_model: LanguageModel) -> None:
            super().__init__(config)
            self.language_model = language_model
            self.anchor = torch.nn.Parameter(torch.zeros(1))  # a model needs a parameter for its device

        def forward(
            self, input_ids: torch.Tensor, past_key_values: Any = None, cache: Any = None, **kwargs: Any
        ) -> Any:
            # transformers 5 names the cache ``cache``; earlier versions ``past_key_values``
            cache = next((c for c in (cache, past_key_values) if c is not None), None) or transformers.DynamicCache()
            as_keys = input_ids[:, None, :, None].to(torch.float64)
            history = cache.update(as_keys, as_keys, 0)[0][:, 0, :, 0].to(torch.int64)
            new = input_ids.shape[1]
            start = history.shape[1] - new
            logits = torch.stack(
                [self.language_model(history[:, : start + i + 1]) for i in range(new)], dim=1
            )  # over the new positions, vectorised over the batch
            return CausalLMOutputWithPast(logits=logits.to(torch.float32), **{cache_field: cache})

    return HarnessConfig, HarnessLM


class TransformersGenerateLoop:
    """``model.generate(prompt, assistant_model=assistant, ...)`` behind the loop contract."""

    contract = "loop"  # what @specverify.loop declares: ``specverify loop`` takes it for a loop
    #: transformers has no frequency or presence penalty and no penalty window; a grammar is given as a
    #: user's logits processor (:func:`history_processors`), as constrained decoding is
    parameters = (
        "temperature",
        "top_k",
        "top_p",
        "min_p",
        "repetition_penalty",
        "min_tokens",
        "stop_tokens",
        "logit_bias",
        "bad_words",
        "grammar",
    )

    def __init__(self, transformers: Any, *, num_assistant_tokens: int = 3) -> None:
        self._transformers = transformers
        self._config, self._model = _model_classes(transformers)
        self.num_assistant_tokens = num_assistant_tokens
        self.name = f"transformers {transformers.__version__} generate(assistant_model=...)"

    def __call__(
        self,
        target: LanguageModel,
        draft: LanguageModel,
        prompt: torch.Tensor,
        num_tokens: int,
        params: SamplingParams,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        vocab = int(target(prompt[:1]).shape[-1])
        models = [self._model(self._config(vocab_size=vocab), lm).eval() for lm in (target, draft)]
        rows = []
        with quiet(self._transformers), seeded_global_rng(prompt.device, seed_from(generator)):
            for row in range(prompt.shape[0]):  # assisted generation takes one sequence per call
                config = generation_config(
                    self._transformers,
                    params.select(slice(row, row + 1)),
                    num_tokens,
                    num_assistant_tokens=self.num_assistant_tokens,
                )
                out = models[0].generate(
                    prompt[row : row + 1],
                    assistant_model=models[1],
                    generation_config=config,
                    logits_processor=history_processors(
                        self._transformers, params.select(slice(row, row + 1)), prompt.shape[1]
                    ),
                )
                made = out[0, prompt.shape[1] :].to(torch.int64)
                # a row that ended at a stop token (an eos) is shorter: -1 after it, as the contract has it
                rows.append(torch.cat([made, made.new_full((num_tokens - made.shape[0],), -1)]))
        return torch.stack(rows)


@contextlib.contextmanager
def quiet(transformers: Any) -> Iterator[None]:
    """transformers' logging at errors only within the block: its deprecation notes are not the run's output."""
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        yield
    finally:
        transformers.logging.set_verbosity(verbosity)


def generation_config(transformers: Any, params: SamplingParams, num_tokens: int, **extra: Any) -> Any:
    """The ``GenerationConfig`` of one row's sampling parameters (``params`` of one row), exactly
    ``num_tokens`` new tokens: ``temperature`` 0 is greedy; ``top_k`` 0, ``top_p`` 1 and ``min_p`` 0 are
    passed as "off", since transformers' own default is ``top_k=50``; ``extra`` as given.  The history
    parameters, where given (:func:`history_config`), override the fixed length."""

    def value(name: str, off: float) -> float:
        tensor = getattr(params, name)
        return off if tensor is None else tensor.item()

    temperature = value("temperature", 1.0)
    greedy = temperature == 0
    return transformers.GenerationConfig(
        do_sample=not greedy,
        temperature=None if greedy else temperature,
        top_k=None if greedy else int(value("top_k", 0)),
        top_p=None if greedy else value("top_p", 1.0),
        min_p=None if greedy or value("min_p", 0.0) == 0 else value("min_p", 0.0),
        **{
            "max_new_tokens": num_tokens,
            "min_new_tokens": num_tokens,
            "pad_token_id": 0,
            "eos_token_id": None,
            **history_config(params, num_tokens),
            **extra,
        },
    )


def history_config(params: SamplingParams, num_tokens: int) -> dict[str, Any]:
    """The generation config's fields of one row's history parameters: stop tokens are the
    ``eos_token_id`` list (generation ends at one, fewer than ``num_tokens`` tokens), ``min_tokens``
    is ``min_new_tokens`` (transformers masks the eos list until then), ``logit_bias`` one-token
    ``sequence_bias``, ``bad_words`` ``bad_words_ids`` (transformers matches them against the prompt
    too).  None given: ``{}``."""
    fields: dict[str, Any] = {}
    if params.repetition_penalty is not None:
        fields["repetition_penalty"] = params.repetition_penalty.item()
    stops = 0 if params.stop_tokens is None else int(params.stop_tokens.item())
    if stops:
        fields["eos_token_id"] = [t for t in range(stops.bit_length()) if (stops >> t) & 1]
        fields["min_new_tokens"] = None if params.min_tokens is None else int(params.min_tokens.item()) or None
    if params.logit_bias is not None:  # transformers refuses an empty bias: a row of zeros is none
        fields["sequence_bias"] = {
            (t,): float(b) for t, b in enumerate(params.logit_bias[0].tolist()) if b != 0
        } or None
    if params.bad_words is not None:
        words = [[t for t in word if t >= 0] for word in params.bad_words[0].tolist()]
        fields["bad_words_ids"] = [word for word in words if word] or None
    return fields


def history_processors(transformers: Any, params: SamplingParams, prompt_length: int) -> Any:
    """The logits processors of one row's history parameters that transformers has no option for:
    a grammar (a token automaton), as a user gives constrained decoding to ``generate()``, masking
    what the automaton's state after the generated tokens forbids.  transformers runs a user's
    processors after its own (penalties, bad words, bias) and before its warps, on every row it
    verifies with the row's own prefix."""
    processors = transformers.LogitsProcessorList()
    if params.grammar is not None:
        processors.append(_GrammarProcessor(params.grammar[0], prompt_length))
    return processors


class _GrammarProcessor:
    """``scores`` of tokens the grammar forbids after ``input_ids``' generated tokens set to ``-inf``."""

    def __init__(self, grammar: torch.Tensor, prompt_length: int) -> None:
        self.grammar, self.prompt_length = grammar.unsqueeze(0), prompt_length

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        grammar = self.grammar.expand(input_ids.shape[0], -1, -1)
        return scores.masked_fill(grammar_mask(input_ids, self.prompt_length, grammar), -torch.inf)


def loop() -> TransformersGenerateLoop:
    """The loop adapter; raises :class:`AdapterUnavailable` without transformers."""
    transformers = import_library("transformers", adapter="transformers", install=_INSTALL)
    for name in ("PreTrainedModel", "GenerationMixin", "GenerationConfig", "DynamicCache", "PretrainedConfig"):
        if not hasattr(transformers, name):
            raise AdapterUnavailable(f"transformers {transformers.__version__} has no {name}")
    return TransformersGenerateLoop(transformers)
