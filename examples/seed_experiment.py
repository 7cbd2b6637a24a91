"""The seed document's experiment, through the reference sampler, vectorised over parallel streams.

Vocabulary 4, first-order target and draft chains, k = 4 drafts per call, 100,000 tokens from plain
target sampling and 100,000 from speculative sampling (each of the parallel streams stops once it
has its share, overshooting by at most k tokens, all of which are counted).  Prints the seed's figures (transition
frequency errors, accepted drafts per call, target calls per token), the exact expectations, and
the time of the seed's own per-token loop next to the vectorised run, measured in the same run.

    python examples/seed_experiment.py [--tokens 100000] [--streams 1000] [--skip-loop]
"""

from __future__ import annotations

import argparse
import platform
import time

import torch

import specverify

TARGET = torch.tensor(
    [[0.55, 0.25, 0.15, 0.05], [0.10, 0.60, 0.20, 0.10], [0.15, 0.15, 0.55, 0.15], [0.25, 0.20, 0.15, 0.40]],
    dtype=torch.float64,
)
DRAFT = torch.tensor(
    [[0.50, 0.28, 0.17, 0.05], [0.12, 0.55, 0.23, 0.10], [0.18, 0.14, 0.50, 0.18], [0.28, 0.18, 0.17, 0.37]],
    dtype=torch.float64,
)
VOCAB = 4


def transitions(previous: torch.Tensor, tokens: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """``[V, V]`` counts of (previous token, token) pairs where ``valid``."""
    codes = (previous * VOCAB + tokens)[valid]
    return torch.bincount(codes, minlength=VOCAB * VOCAB).reshape(VOCAB, VOCAB).to(torch.float64)


def target_streams(length: int, streams: int, seed: int) -> torch.Tensor:
    """Transition counts of plain target sampling: ``streams`` chains of ``length`` tokens each."""
    generator = torch.Generator().manual_seed(seed)
    current = torch.zeros(streams, dtype=torch.int64)
    counts = torch.zeros(VOCAB, VOCAB, dtype=torch.float64)
    for _ in range(length):  # over time steps; all streams at once
        token = torch.multinomial(TARGET[current], 1, generator=generator).squeeze(-1)
        counts += transitions(current, token, torch.ones_like(token, dtype=torch.bool))
        current = token
    return counts


def speculative_streams(length: int, streams: int, k: int, seed: int) -> tuple[torch.Tensor, int, int]:
    """Transition counts, target calls and accepted drafts of speculative sampling."""
    generator = torch.Generator().manual_seed(seed)
    current = torch.zeros(streams, dtype=torch.int64)
    emitted = torch.zeros(streams, dtype=torch.int64)
    counts = torch.zeros(VOCAB, VOCAB, dtype=torch.float64)
    calls = accepted_drafts = 0
    positions = torch.arange(k + 1)
    while True:
        active = emitted < length
        if not active.any():
            return counts, calls, accepted_drafts
        state = current[active]
        drafts, draft_rows, target_rows = [], [], []
        for _ in range(k):  # over draft positions; all streams at once
            q = DRAFT[state]
            token = torch.multinomial(q, 1, generator=generator).squeeze(-1)
            draft_rows.append(q)
            target_rows.append(TARGET[state])
            drafts.append(token)
            state = token
        target_rows.append(TARGET[state])
        draft_tokens = torch.stack(drafts, dim=1)
        tokens, accepted = specverify.reference(
            torch.stack(target_rows, dim=1), torch.stack(draft_rows, dim=1), draft_tokens, generator
        )
        calls += int(active.sum())
        accepted_drafts += int(accepted.sum())
        # every emitted token counts (a stream stops once it has `length`, overshooting by <= k)
        valid = positions <= accepted.unsqueeze(-1)
        previous = torch.cat([current[active].unsqueeze(-1), tokens[:, :-1]], dim=1)
        counts += transitions(previous, tokens.clamp_min(0), valid)
        current[active] = tokens.gather(1, accepted.unsqueeze(-1)).squeeze(-1)
        emitted[active] += accepted + 1


def seed_loop(length: int, k: int, seed: int) -> tuple[int, int]:
    """The seed document's own per-token Python loop (its speculative stream), for timing."""
    g = torch.Generator().manual_seed(seed)

    def sample(probs: torch.Tensor) -> int:
        return int(torch.multinomial(probs, 1, generator=g).item())

    current, produced, calls, accepted_total = 0, 0, 0, 0
    while produced < length:
        candidates, q_rows, state = [], [], current
        for _ in range(k):
            q = DRAFT[state]
            token = sample(q)
            candidates.append(token)
            q_rows.append(q)
            state = token
        p_rows, state = [], current
        for token in candidates:
            p_rows.append(TARGET[state])
            state = token
        out: list[int] = []
        for token, p, q in zip(candidates, p_rows, q_rows):
            if torch.rand((), generator=g).item() <= min(1.0, (p[token] / q[token]).item()):
                out.append(token)
                continue
            correction = torch.clamp(p - q, min=0)
            out.append(sample(correction / correction.sum()))
            break
        else:
            out.append(sample(TARGET[state]))
        calls += 1
        accepted_total += len(out) - 1
        out = out[: length - produced]
        produced += len(out)
        current = out[-1]
    return calls, accepted_total


def exact_accepted_per_call(k: int) -> float:
    """Exact expected accepted drafts per call, averaged over the chain's stationary law."""
    evals, evecs = torch.linalg.eig(TARGET.T)
    stationary = evecs[:, torch.argmin((evals - 1).abs())].real
    stationary = stationary / stationary.sum()
    expected = torch.zeros(())
    for start in range(VOCAB):
        model = specverify.models.ChainModel(TARGET, DRAFT, (start,))
        law = specverify.laws.emitted_law(model, k)
        offsets = [0]
        for n in range(1, k + 2):
            offsets.append(offsets[-1] + VOCAB**n)
        mean = sum(j * float(law[offsets[j] : offsets[j + 1]].sum()) for j in range(k + 1))
        expected = expected + stationary[start] * mean
    return float(expected)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=100_000)
    parser.add_argument("--streams", type=int, default=1_000)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--skip-loop", action="store_true", help="do not time the seed's own loop")
    args = parser.parse_args()
    per_stream = args.tokens // args.streams

    torch.set_num_threads(1)  # tiny tensors: thread hand-offs cost more than they save
    baseline = target_streams(per_stream, args.streams, 202)
    start = time.perf_counter()
    speculative, calls, accepted = speculative_streams(per_stream, args.streams, args.k, 303)
    vectorised = time.perf_counter() - start

    f1 = baseline / baseline.sum(-1, keepdim=True)
    f2 = speculative / speculative.sum(-1, keepdim=True)
    tokens = int(speculative.sum())
    print(f"python={platform.python_version()} torch={torch.__version__} device=cpu dtype=torch.float64")
    print(f"tokens={tokens} vocab={VOCAB} proposal_len={args.k} streams={args.streams}")
    print(f"baseline_vs_target_max_error={(f1 - TARGET).abs().max().item():.5f}")
    print(f"speculative_vs_target_max_error={(f2 - TARGET).abs().max().item():.5f}")
    print(f"baseline_vs_speculative_max_error={(f1 - f2).abs().max().item():.5f}")
    print(
        f"mean_accepted_draft_tokens_per_call={accepted / calls:.3f} (exact, stationary chain: "
        f"{exact_accepted_per_call(args.k):.3f})"
    )
    print(f"target_calls_per_emitted_token={calls / tokens:.3f}")
    print(f"vectorised_seconds={vectorised:.3f} (speculative stream, {tokens} tokens)")
    if not args.skip_loop:
        start = time.perf_counter()
        loop_calls, loop_accepted = seed_loop(args.tokens, args.k, 303)
        loop = time.perf_counter() - start
        print(
            f"seed_loop_seconds={loop:.3f} (speculative stream only, {args.tokens} tokens; "
            f"accepted per call {loop_accepted / loop_calls:.3f})"
        )
        print(f"speedup_vs_seed_loop={loop / vectorised * tokens / args.tokens:.1f}x (per token)")


if __name__ == "__main__":
    main()
