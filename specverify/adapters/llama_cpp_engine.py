"""llama.cpp through ``llama-cpp-python``: its own token-level ``Llama.generate``, speculation on and off.

Spec: ``specverify.adapters.llama_cpp_engine:engine`` (the engine contract of :mod:`specverify._kinds.engine`).

The model is a tiny llama-architecture GGUF written at run time (:mod:`._gguf_models`: random
weights from a fixed seed, a vocabulary of 6 tokens, nothing downloaded), loaded once a process
into two ``Llama`` instances: one with ``draft_model=LlamaPromptLookupDecoding(...)`` (speculation
on) and one without (off).  What llama-cpp-python 0.3.x's ``generate`` does with drafts: after each
step it asks the draft model for tokens continuing the sequence (prompt lookup: the tokens that
followed the latest earlier occurrence of the last n-gram), evaluates the sampled token and the
drafts in one batch, then samples the target's token at every drafted position with its sampler
chain, in order, and keeps going while the sampled token equals the draft; at the first mismatch
it keeps the sampled token, drops the rest of the drafts from its KV cache and drafts again.  Every
emitted token is a sample of the sampler chain at the position's true prefix, so a correct engine's
law is the same either way; the sampler chain (penalties, top-k, top-p, min-p, temperature, the
seeded ``dist``) is llama.cpp's own, and Python logits processors run before it.

Each row is one ``generate`` (llama-cpp-python generates one sequence at a time), seeded by
``Llama.set_seed`` from the call's seed and its row.  Parameters: ``temperature`` (0 is llama.cpp's
greedy sampler), ``top_k`` (0 off), ``top_p``, ``min_p``, the penalties (``repeat_penalty``,
``presence_penalty``, ``frequency_penalty`` over the last 64 sampled tokens; llama.cpp's sampler
counts generated tokens only), ``logit_bias`` (a logits processor, as ``create_completion``'s),
``min_tokens`` (llama-cpp-python's own ``MinTokensLogitsProcessor``, one for each stop token) and
``stop_tokens`` (the row ends at the first one: ``generate`` has no stop list of its own, so this
adapter stops reading), and ``grammar``: the row's token automaton written as a GBNF grammar over
token ids (:func:`gbnf`), applied by llama.cpp's grammar sampler.  No bad words (llama.cpp has no
such parameter).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from .._seeds import derive_seed
from .._warps.rules import SamplingParams
from ._common import import_library
from ._gguf_models import TinyLlama, tiny_llama_gguf

__all__ = ["LlamaCppEngine", "engine", "engine_draft_model", "gbnf"]

_INSTALL = "pip install 'speculative-verify[llama-cpp]'"
#: llama.cpp's "random seed" value: a derived seed stays below it.
_SEED_BOUND = 2**31
_DRAFTERS = ("prompt-lookup", "model")


class LlamaCppEngine:
    """``Llama.generate`` on a tiny GGUF behind the engine contract.

    ``num_pred_tokens`` and ``max_ngram_size`` are the prompt-lookup drafter's; ``seed`` the model
    weights' seed; ``threads`` llama.cpp's threads (one: the harness runs its own processes)."""

    contract = "engine"
    parameters = (
        "temperature",
        "top_k",
        "top_p",
        "min_p",
        "repetition_penalty",
        "presence_penalty",
        "frequency_penalty",
        "min_tokens",
        "stop_tokens",
        "logit_bias",
        "grammar",
    )
    max_batch = 64  # rows a call, each a generate() of its own

    def __init__(
        self,
        llama_cpp: Any,
        *,
        vocab_size: int = 6,
        num_pred_tokens: int = 3,
        max_ngram_size: int = 2,
        seed: int = 0,
        threads: int = 1,
        drafter: str = "prompt-lookup",
        directory: str | os.PathLike[str] | None = None,
    ) -> None:
        if drafter not in _DRAFTERS:
            raise ValueError(f"drafter must be one of {_DRAFTERS}, got {drafter!r}")
        self.vocab_size = vocab_size
        self.path = tiny_llama_gguf(TinyLlama(vocab_size=vocab_size, seed=seed), directory)
        options = dict(n_ctx=64, n_batch=64, n_threads=threads, n_threads_batch=threads, seed=0, verbose=False)
        with _quiet():
            if drafter == "prompt-lookup":
                draft = llama_cpp.llama_speculative.LlamaPromptLookupDecoding(
                    max_ngram_size=max_ngram_size, num_pred_tokens=num_pred_tokens
                )
            else:
                small = tiny_llama_gguf(TinyLlama(vocab_size=vocab_size, layers=1, hidden=16, seed=seed + 1), directory)
                draft = _greedy_drafter(llama_cpp, llama_cpp.Llama(model_path=str(small), **options), num_pred_tokens)
            self.on = llama_cpp.Llama(model_path=str(self.path), draft_model=draft, **options)
            self.off = llama_cpp.Llama(model_path=str(self.path), **options)
        self._min_tokens = llama_cpp.llama.MinTokensLogitsProcessor
        self._processors = llama_cpp.LogitsProcessorList
        self._grammar = llama_cpp.LlamaGrammar
        self._grammars: dict[str, Any] = {}  # GBNF text -> its parsed grammar, parsed once
        self.name = f"llama-cpp-python {llama_cpp.__version__} generate({drafter}, {num_pred_tokens} drafts)"

    def __call__(
        self, prompts: torch.Tensor, num_tokens: int, params: SamplingParams, seed: int, speculative: bool
    ) -> torch.Tensor:
        llm = self.on if speculative else self.off
        out = torch.full((prompts.shape[0], num_tokens), -1, dtype=torch.int64)
        for row in range(prompts.shape[0]):  # llama-cpp-python generates one sequence at a time
            llm.set_seed(derive_seed("llama.cpp engine", seed, row) % _SEED_BOUND)
            stops = _stop_tokens(params, row)
            tokens = llm.generate(
                prompts[row].tolist(),
                logits_processor=self._logits_processors(params, row, stops),
                grammar=self._row_grammar(params, row),
                **_sampling(params, row),
            )
            try:
                for position, token in zip(range(num_tokens), tokens, strict=False):
                    out[row, position] = token
                    if token in stops:
                        break
            finally:
                tokens.close()
        return out

    def _row_grammar(self, params: SamplingParams, row: int) -> Any:
        """The row's grammar as llama.cpp parses it, or None where the row has none (one state that
        allows every token)."""
        if params.grammar is None or not bool(params.grammar[row].ne(0).any()):
            return None
        text = gbnf(params.grammar[row].tolist())
        if text not in self._grammars:
            self._grammars[text] = self._grammar.from_string(text, verbose=False)
        return self._grammars[text]

    def _logits_processors(self, params: SamplingParams, row: int, stops: set[int]) -> Any:
        """The row's Python logits processors: its logit bias, and llama-cpp-python's own
        ``MinTokensLogitsProcessor`` for each stop token while the row is under its minimum."""
        processors: list[Callable[[np.ndarray, np.ndarray], np.ndarray]] = []
        if params.logit_bias is not None and bool(params.logit_bias[row].ne(0).any()):
            processors.append(_biased(params.logit_bias[row].numpy().astype(np.float32)))
        least = 0 if params.min_tokens is None else int(params.min_tokens[row])
        processors += [self._min_tokens(least, stop) for stop in sorted(stops)] if least > 0 else []
        return self._processors(processors) if processors else None


def _sampling(params: SamplingParams, row: int) -> dict[str, float]:
    """The row's arguments of ``Llama.generate``: every cut off unless given (llama-cpp-python's
    defaults are top-k 40, top-p 0.95, min-p 0.05 and temperature 0.8)."""

    def value(name: str, off: float) -> float:
        tensor = getattr(params, name)
        return off if tensor is None else float(tensor[row])

    return {
        "temp": value("temperature", 1.0),
        "top_k": int(value("top_k", 0)),
        "top_p": value("top_p", 1.0),
        "min_p": value("min_p", 0.0),
        "typical_p": 1.0,
        "repeat_penalty": value("repetition_penalty", 1.0),
        "presence_penalty": value("presence_penalty", 0.0),
        "frequency_penalty": value("frequency_penalty", 0.0),
    }


def _greedy_drafter(llama_cpp: Any, small: Any, count: int) -> Any:
    """A ``LlamaDraftModel`` whose drafts are a smaller model's greedy continuation of the sequence
    (llama-cpp-python ships prompt lookup only; its draft interface takes any such callable)."""

    class GreedyDraft(llama_cpp.llama_speculative.LlamaDraftModel):
        def __call__(self, input_ids: np.ndarray, /, **kwargs: Any) -> np.ndarray:
            tokens = small.generate(input_ids.tolist(), temp=0.0, top_k=0, top_p=1.0, min_p=0.0)
            drafts = [next(tokens) for _ in range(count)]
            tokens.close()
            return np.array(drafts, dtype=np.intc)

    return GreedyDraft()


def gbnf(table: list[list[int]]) -> str:
    """A token automaton (``table[s][t]``: the state after token ``t`` in state ``s``, ``-1`` where
    ``t`` is forbidden; start state 0) as a GBNF grammar over token ids (llama.cpp's ``<[id]>``), one
    rule a state: every token the state allows, then the state it leads to."""
    rules = ["root ::= s0"]
    for state, row in enumerate(table):
        allowed = [f"<[{token}]> s{after}" for token, after in enumerate(row) if after >= 0]
        rules.append(f"s{state} ::= " + " | ".join(allowed))
    return "\n".join(rules) + "\n"


def _stop_tokens(params: SamplingParams, row: int) -> set[int]:
    mask = 0 if params.stop_tokens is None else int(params.stop_tokens[row])
    return {token for token in range(mask.bit_length()) if (mask >> token) & 1}


def _biased(bias: np.ndarray) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """A logits processor adding ``bias`` to the logits (``create_completion``'s ``logit_bias``)."""

    def processor(input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        return scores + bias

    return processor


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """llama.cpp's load messages written to the C stderr, silenced (``verbose=False`` leaves some)."""
    try:
        saved = os.dup(2)
    except OSError:  # no stderr to silence
        yield
        return
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def engine(**options: Any) -> LlamaCppEngine:
    """The engine adapter (options as :class:`LlamaCppEngine`'s); raises
    :class:`~specverify.errors.AdapterUnavailable` without llama-cpp-python or gguf."""
    llama_cpp = import_library("llama_cpp", adapter="llama.cpp", install=_INSTALL)
    import_library("llama_cpp.llama_speculative", adapter="llama.cpp", install=_INSTALL)
    return LlamaCppEngine(llama_cpp, **options)


def engine_draft_model() -> LlamaCppEngine:
    """The engine with a draft model in place of prompt lookup: a 1-layer tiny llama's greedy
    tokens (spec ``specverify.adapters.llama_cpp_engine:engine_draft_model``)."""
    return engine(drafter="model")
