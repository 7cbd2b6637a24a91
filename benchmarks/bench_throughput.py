"""Reference sampler throughput: verification steps per second, as ratios to two baselines.

Baselines, measured in the same run on the same inputs:

* the seed document's per-token loop (its ``speculative_step``: Python over rows and positions),
  the way the algorithm is usually first written;
* the floor: one ``torch.multinomial`` draw per row of the same ``[B, V]`` shape, the least any
  sampler that reads its inputs must do.

    python benchmarks/bench_throughput.py [--repeats 5] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path

import torch
from _timing import timed

import specverify

# (B, K, V): the seed's shape, a batch of small-vocabulary rows, an LLM-sized vocabulary.
SHAPES = [(1, 4, 4), (64, 4, 4), (4096, 4, 4), (1, 4, 32_000), (64, 4, 32_000)]


def inputs(batch: int, k: int, vocab: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    target = torch.softmax(torch.randn(batch, k + 1, vocab, generator=g, dtype=torch.float64), -1)
    draft = torch.softmax(torch.randn(batch, k, vocab, generator=g, dtype=torch.float64), -1)
    draft = 0.5 * draft + 0.5 * target[:, :k]  # a draft that is often accepted, as in practice
    tokens = torch.multinomial(draft.reshape(-1, vocab), 1, generator=g).reshape(batch, k)
    return target, draft, tokens


def seed_loop(target: torch.Tensor, draft: torch.Tensor, tokens: torch.Tensor, g: torch.Generator) -> None:
    """The seed document's verification loop, one row and one position at a time."""
    for b in range(tokens.shape[0]):
        for i, token in enumerate(tokens[b].tolist()):
            p, q = target[b, i], draft[b, i]
            if torch.rand((), generator=g).item() <= min(1.0, (p[token] / q[token]).item()):
                continue
            correction = torch.clamp(p - q, min=0)
            torch.multinomial(correction / correction.sum(), 1, generator=g)
            break
        else:
            torch.multinomial(target[b, -1], 1, generator=g)


def run(repeats: int) -> list[dict[str, float]]:
    rows = []
    g = torch.Generator().manual_seed(1)
    for batch, k, vocab in SHAPES:
        target, draft, tokens = inputs(batch, k, vocab)
        flat = target[:, 0].contiguous()
        loop_rows = min(batch, 64)
        seconds = timed(
            {
                "reference": lambda: specverify.reference(target, draft, tokens, g),
                "floor": lambda: torch.multinomial(flat, 1, generator=g),
                "loop": lambda: seed_loop(target[:loop_rows], draft[:loop_rows], tokens[:loop_rows], g),
            },
            repeats,
        )
        reference, floor = seconds["reference"], seconds["floor"]
        loop = seconds["loop"] * batch / loop_rows
        rows.append(
            {
                "B": batch,
                "K": k,
                "V": vocab,
                "reference_steps_per_s": batch / reference,
                "seed_loop_steps_per_s": batch / loop,
                "multinomial_rows_per_s": batch / floor,
                "speedup_vs_seed_loop": loop / reference,
                "cost_vs_multinomial_floor": reference / floor,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args()
    rows = run(args.repeats)
    machine = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }
    lines = [
        "| B | K | V | reference steps/s | seed loop steps/s | speedup vs seed loop | multinomial floor rows/s | "
        "reference cost / floor |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['B']} | {r['K']} | {r['V']} | {r['reference_steps_per_s']:,.0f} | {r['seed_loop_steps_per_s']:,.0f} "
            f"| {r['speedup_vs_seed_loop']:,.1f}x | {r['multinomial_rows_per_s']:,.0f} | "
            f"{r['cost_vs_multinomial_floor']:.1f}x |"
        )
    table = "\n".join(lines)
    print(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "throughput.json").write_text(json.dumps({"machine": machine, "rows": rows}, indent=2))
    (out / "throughput.md").write_text(
        f"# Reference sampler throughput\n\n`python benchmarks/bench_throughput.py` on {machine}\n\n{table}\n"
    )


if __name__ == "__main__":
    main()
