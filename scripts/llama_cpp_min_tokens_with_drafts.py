"""llama-cpp-python's speculative path lifts ``MinTokensLogitsProcessor``'s mask early: a repro.

Run: ``python scripts/llama_cpp_min_tokens_with_drafts.py [--rows N]`` (needs the llama-cpp extra).

``Llama.generate`` with a ``draft_model`` evaluates the drafts before it samples the positions they
cover, and its Python logits processors are handed ``Llama._input_ids``: every token evaluated so
far, unverified drafts included.  ``MinTokensLogitsProcessor`` counts the generated tokens as the
length of that array, so with drafts in flight it counts them too and stops masking the end token
before ``min_tokens`` tokens were generated.  Without a draft model the end token never comes
early (its logit is -inf); with prompt lookup it does.  The model is the tiny GGUF of
:mod:`specverify.adapters._gguf_models` (random weights, 6 tokens).
"""

from __future__ import annotations

import argparse

from llama_cpp import Llama, LogitsProcessorList
from llama_cpp.llama import MinTokensLogitsProcessor
from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

from specverify.adapters._gguf_models import tiny_llama_gguf

PROMPT, MIN_TOKENS = [3, 4, 3, 4], 3


def early_ends(llm: Llama, rows: int) -> int:
    """Generations whose end token comes before ``MIN_TOKENS`` tokens, with a fresh processor each."""
    eos, early = llm.token_eos(), 0
    for row in range(rows):
        llm.set_seed(row)
        processors = LogitsProcessorList([MinTokensLogitsProcessor(MIN_TOKENS, eos)])
        tokens = llm.generate(PROMPT, temp=1.0, top_k=0, top_p=1.0, min_p=0.0, logits_processor=processors)
        first = [next(tokens) for _ in range(MIN_TOKENS)]
        tokens.close()
        early += eos in first
    return early


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000, help="generations each way")
    args = parser.parse_args()
    path = str(tiny_llama_gguf())
    for name, draft in (("no draft model", None), ("prompt lookup", LlamaPromptLookupDecoding(num_pred_tokens=3))):
        llm = Llama(path, draft_model=draft, n_ctx=64, n_threads=1, seed=0, verbose=False)
        early = early_ends(llm, args.rows)
        print(f"{name:>15}: end token (id {llm.token_eos()}) before {MIN_TOKENS} tokens in {early} of {args.rows}")


if __name__ == "__main__":
    main()
