"""A ten-line adapter for a whole generation loop: put your engine's generate() through specverify.

    python -c "import specverify, examples.my_loop_adapter as m; \
        print(specverify.check_loop(m.loop, budget='quick').verdict)"

``speculative_generate`` below stands for your engine: lists of prompt ids in, lists of generated
ids out, models that map a list of ids to logits, one temperature and one seed per request.  The
adapter (``loop``, at the bottom) translates the harness's batched models and parameters to it.
``speculative_generate`` is an ordinary, correct speculative loop, written the slow, plain way.
"""

from __future__ import annotations

import numpy as np
import torch

import specverify

# --- the engine (imagine `from myengine import speculative_generate`) ---------------------------


def speculative_generate(target_fn, draft_fn, prompts, max_tokens, temperatures, seeds, k=2):
    """Per request: draft ``k`` tokens from the draft, verify them against the target, repeat."""
    outputs = []
    for prompt, temperature, seed in zip(prompts, temperatures, seeds):
        rng, ids = np.random.default_rng(seed), list(prompt)
        while len(ids) < len(prompt) + max_tokens:
            drafts, qs = [], []
            for _ in range(k):
                q = _law(draft_fn(ids + drafts), temperature)
                drafts.append(int(rng.choice(len(q), p=q)))
                qs.append(q)
            for i in range(k + 1):
                p = _law(target_fn(ids + drafts[:i]), temperature)
                if i == k:  # every draft accepted: the bonus token
                    ids += drafts + [int(rng.choice(len(p), p=p))]
                elif rng.random() < min(1.0, p[drafts[i]] / qs[i][drafts[i]]):
                    continue
                else:  # first rejection: the residual
                    residual = np.maximum(p - qs[i], 0.0)
                    ids += drafts[:i] + [int(rng.choice(len(p), p=residual / residual.sum()))]
                    break
        outputs.append(ids[len(prompt) : len(prompt) + max_tokens])
    return outputs


def _law(logits, temperature):
    if temperature == 0:  # greedy: all mass on the first largest logit
        return np.eye(len(logits))[int(np.argmax(logits))]
    e = np.exp((logits - logits.max()) / temperature)
    return e / e.sum()


# --- the adapter ---------------------------------------------------------------------------------


@specverify.loop(name="myengine.speculative_generate", parameters=("temperature", "seeds"))
def loop(target, draft, prompt, num_tokens, params, generator):
    as_fn = lambda lm: lambda ids: lm(torch.tensor([ids])).double().numpy()[0]  # noqa: E731  one prefix at a time
    seeds = params.seeds if params.seeds is not None else torch.randint(2**62, (prompt.shape[0],), generator=generator)
    out = speculative_generate(
        as_fn(target), as_fn(draft), prompt.tolist(), num_tokens, params.temperature.tolist(), seeds.tolist()
    )
    return torch.tensor(out, dtype=torch.int64)
