"""Reference samplers against the floor: each built-in reference's seconds per call over one row-draw's.

The floor is the least a sampler that reads its inputs must do: one draw per row of a ``[B, V]``
probability tensor of the same shape, measured in the same run on the same machine, two ways:

* ``torch.multinomial(probs, 1)``, the draw an engine or a user writes;
* an inverse-CDF draw (``cumsum`` then ``searchsorted`` on one uniform per row), the draw the
  references themselves end with.

The references timed: the chain reference (``specverify.samplers:reference``), the logits reference
(``specverify.samplers:logits_reference``: transformers' warp at temperature 0.7, top-k 50 where
``V`` allows it, then the canonical step; ``logits_reference_top_p``: at temperature 0.7, top-p
0.9) and the tree reference (``tree_reference``, SpecInfer, on
the chain given as a path tree).  All in float64 on CPU, as the harness calls them.

    python benchmarks/bench_reference_speed.py [--repeats 5] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
from typing import Any

import torch
from _results import machine, table, write
from _timing import timed

from specverify import SamplingParams
from specverify.samplers import logits_reference, reference, tree_reference
from specverify.trees import TreeBatch

#: (B, K, V): many rows of a tiny vocabulary (the harness's deep decisions), an LLM-sized vocabulary.
SHAPES = [(65_536, 4, 4), (4_096, 4, 256), (512, 4, 32_000)]


def inputs(batch: int, k: int, vocab: int, seed: int = 0) -> dict[str, Any]:
    """Target logits and laws ``[B, K+1, V]``, a draft law ``[B, K, V]`` often accepted, its tokens."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, k + 1, vocab, generator=g, dtype=torch.float64)
    target = torch.softmax(logits, -1)
    draft = 0.5 * torch.softmax(torch.randn(batch, k, vocab, generator=g, dtype=torch.float64), -1)
    draft += 0.5 * target[:, :k]
    tokens = torch.multinomial(draft.reshape(-1, vocab), 1, generator=g).reshape(batch, k)
    params = SamplingParams(
        temperature=torch.full((batch,), 0.7, dtype=torch.float64),
        top_k=torch.full((batch,), min(50, vocab), dtype=torch.int64),
    )
    nucleus = SamplingParams(
        temperature=torch.full((batch,), 0.7, dtype=torch.float64), top_p=torch.full((batch,), 0.9, dtype=torch.float64)
    )
    return {"logits": logits, "target": target, "draft": draft, "tokens": tokens, "params": params, "top_p": nucleus}


def inverse_cdf_draw(probs: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """One inverse-CDF draw per row: the cheapest exact row-draw torch offers on CPU."""
    cdf = probs.cumsum(-1)
    u = torch.rand(probs.shape[0], 1, generator=g, dtype=probs.dtype) * cdf[:, -1:]
    return torch.searchsorted(cdf, u, right=True).clamp_max_(probs.shape[-1] - 1)


def measure(batch: int, k: int, vocab: int, repeats: int) -> dict[str, float]:
    """Seconds per call of each reference and each floor at one shape."""
    x = inputs(batch, k, vocab)
    g = torch.Generator().manual_seed(1)
    flat = x["target"][:, 0].contiguous()
    tree = TreeBatch.from_chain(x["target"], x["draft"], x["tokens"])
    return timed(
        {
            "multinomial": lambda: torch.multinomial(flat, 1, generator=g),
            "inverse_cdf": lambda: inverse_cdf_draw(flat, g),
            "reference": lambda: reference(x["target"], x["draft"], x["tokens"], g),
            "logits_reference": lambda: logits_reference(x["logits"], x["draft"], x["tokens"], g, x["params"]),
            "logits_reference_top_p": lambda: logits_reference(x["logits"], x["draft"], x["tokens"], g, x["top_p"]),
            "tree_reference": lambda: tree_reference(tree, g),
        },
        repeats,
    )


SAMPLERS = ("reference", "logits_reference", "logits_reference_top_p", "tree_reference")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--stem", default="reference-speed")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows, data = [], []
    for batch, k, vocab in SHAPES:
        seconds = measure(batch, k, vocab, args.repeats)
        data.append({"batch": batch, "k": k, "vocab": vocab, "seconds": seconds})
        for name in SAMPLERS:
            rows.append(
                [
                    f"{batch} x {k} x {vocab}",
                    name,
                    f"{seconds[name] * 1e3:.2f}",
                    f"{seconds['multinomial'] * 1e3:.2f}",
                    f"{seconds[name] / seconds['multinomial']:.2f}",
                    f"{seconds['inverse_cdf'] * 1e3:.2f}",
                    f"{seconds[name] / seconds['inverse_cdf']:.2f}",
                ]
            )
            print(*rows[-1], sep="  ", flush=True)
    host = machine()
    lines = [
        "# Reference samplers against one row-draw",
        "",
        "Seconds per call (median of repeats, the functions taking turns in each round) of each reference, "
        "and its ratio to one draw per row of the "
        "same `[B, V]` shape, measured in the same run: `torch.multinomial` and an inverse-CDF draw. "
        "Float64, CPU, one thread. Regenerate: `python benchmarks/bench_reference_speed.py`.",
        "",
        f"Machine: {host['platform']}, {host['cpus']} CPUs, load average {host['load_average'][0]:.2f} at the end.",
        "",
        *table(
            ["B x K x V", "sampler", "ms / call", "multinomial ms", "x multinomial", "inverse-CDF ms", "x inverse-CDF"],
            rows,
        ),
    ]
    page = write(args.out, args.stem, {"machine": host, "shapes": data}, lines)
    print(f"wrote {page}")


if __name__ == "__main__":
    main()
