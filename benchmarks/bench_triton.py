"""Time the Triton sampler against the reference sampler (and FlashInfer, vLLM where installed).

One command::

    python benchmarks/bench_triton.py            # GPU if there is one, else Triton's interpreter
    python benchmarks/bench_triton.py --quick    # a few sizes, to check that it runs

Every sampler runs on the same device, in the same process, on the same inputs; ratios are taken
between times measured in this run.  On a GPU the sizes are an LLM's (B 1..512, K 1..8, V 32k..256k,
bfloat16) and each time is turned into an achieved memory bandwidth against the device's peak: the
bytes are those the kernel must read at least (every probability once, ``B (2K+1) V`` elements)
and, separately, what it reads for the acceptances this input produced (``_bytes_read``).  On CPU
the kernel runs through Triton's interpreter at small sizes: those times say nothing about a GPU.

Results go to ``benchmarks/results/bench_triton-<machine>.{json,md}`` with a description of the
machine.
"""

from __future__ import annotations

import argparse
import datetime
import inspect
import json
import math
import os
import platform
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import triton  # noqa: E402,I001

# Import the sampler first: without a CUDA device it must set TRITON_INTERPRET before triton loads.
from specverify.samplers._reference import reference
from specverify.samplers._triton import triton_sampler

RESULTS = Path(__file__).resolve().parent / "results"

#: Peak DRAM bandwidth (bytes/s) by device name, for when the driver does not report clocks.
PEAK_BANDWIDTH = {
    "H200": 4.8e12,
    "H100 SXM": 3.35e12,
    "H100 NVL": 3.9e12,
    "H100 PCIe": 2.0e12,
    "H100": 3.35e12,
    "A100-SXM4-80GB": 2.039e12,
    "A100 80GB PCIe": 1.935e12,
    "A100": 1.555e12,
    "L40S": 0.864e12,
    "L4": 0.3e12,
    "A10": 0.6e12,
    "RTX 4090": 1.008e12,
}

GPU_GRID = [(b, k, v) for v in (32_000, 128_256, 256_000) for k in (1, 4, 8) for b in (1, 8, 64, 256, 512)]
GPU_QUICK = [(1, 4, 128_256), (64, 4, 128_256), (512, 4, 128_256)]
CPU_GRID = [(1, 4, 32_000), (16, 4, 4_096), (256, 1, 256), (256, 4, 256), (4_096, 2, 16), (16_384, 4, 8)]
CPU_QUICK = [(16, 4, 4_096), (4_096, 2, 16)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a few sizes only")
    parser.add_argument("--dtype", default=None, help="probability dtype (default: bfloat16 on GPU, float32 on CPU)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="directory for the JSON and markdown results")
    args = parser.parse_args(argv)

    on_gpu = torch.cuda.is_available() and triton_sampler.capabilities.device == "cuda"
    device = torch.device("cuda" if on_gpu else "cpu")
    if not on_gpu:
        torch.set_num_threads(1)  # the interpreter runs on one core; so does the reference, for a fair ratio
    dtype = getattr(torch, args.dtype or ("bfloat16" if on_gpu else "float32"))
    sizes = (GPU_QUICK if args.quick else GPU_GRID) if on_gpu else (CPU_QUICK if args.quick else CPU_GRID)
    machine = describe_machine(device)
    peers = engine_samplers() if on_gpu else {}
    timer = gpu_time if on_gpu else cpu_time
    rows = []
    for batch, k, vocab in sizes:
        row = bench_one(batch, k, vocab, dtype, device, timer, peers, machine)
        rows.append(row)
        print(format_row(row), flush=True)
    result = {
        "command": "python benchmarks/bench_triton.py" + (" --quick" if args.quick else ""),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine,
        "dtype": str(dtype).removeprefix("torch."),
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"bench_triton-{machine['slug']}"
    stem.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    stem.with_suffix(".md").write_text(to_markdown(result))
    print(f"wrote {stem}.json and {stem}.md")
    return 0


def bench_one(batch, k, vocab, dtype, device, timer, peers, machine) -> dict[str, Any]:
    target, draft, drafts = llm_like_inputs(batch, k, vocab, dtype, device, seed=batch * 1_000_003 + k * 101 + vocab)
    generator = torch.Generator(device=device).manual_seed(0)
    tokens, accepted = triton_sampler(target, draft, drafts, generator)
    itemsize = target.element_size()
    row: dict[str, Any] = {
        "B": batch,
        "K": k,
        "V": vocab,
        "mean_accepted": float(accepted.double().mean()),
        "bytes_min": batch * (2 * k + 1) * vocab * itemsize,
        "bytes_read": _bytes_read(accepted, k, vocab, itemsize),
        "ms": {},
        "skipped": {},
    }
    candidates: dict[str, Callable[[], Any]] = {
        "triton": lambda: triton_sampler(target, draft, drafts, generator),
        "reference": lambda: reference(target, draft, drafts, generator),
    }
    for name, make in peers.items():
        try:
            candidates[name] = make(target, draft, drafts)
        except Exception as exc:  # an optional engine that cannot take these inputs is reported, not fatal
            row["skipped"][name] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    for name, fn in candidates.items():
        try:
            row["ms"][name] = timer(fn)
        except Exception as exc:
            row["skipped"][name] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        if device.type == "cuda":
            torch.cuda.empty_cache()
    triton_ms = row["ms"].get("triton")
    if triton_ms:
        row["ratio_to_triton"] = {name: ms / triton_ms for name, ms in row["ms"].items() if name != "triton"}
        seconds = triton_ms / 1e3
        row["GBps_min"] = row["bytes_min"] / seconds / 1e9
        row["GBps_read"] = row["bytes_read"] / seconds / 1e9
        for key in ("peak_bandwidth", "measured_read_bandwidth"):
            if machine.get(key):
                row[f"fraction_of_{key}"] = row["bytes_read"] / seconds / machine[key]
    return row


def llm_like_inputs(batch, k, vocab, dtype, device, seed):
    """Softmax rows of peaked logits, rounded to ``dtype`` and not renormalised, as engines pass
    them; the draft's logits are the target's plus noise of scale 0.5, which accepts about 80% of
    drafts (a good drafter's rate)."""
    g = torch.Generator(device=device).manual_seed(seed)
    logits = 2.5 * torch.randn(batch, k + 1, vocab, generator=g, device=device)
    target = torch.softmax(logits, -1).to(dtype)
    draft_logits = logits[:, :k] + 0.5 * torch.randn(batch, k, vocab, generator=g, device=device)
    draft_f32 = torch.softmax(draft_logits, -1)
    drafts = torch.multinomial(draft_f32.reshape(-1, vocab), 1, generator=g).reshape(batch, k)
    return target, draft_f32.to(dtype), drafts


def _bytes_read(accepted: torch.Tensor, k: int, vocab: int, itemsize: int) -> int:
    """Bytes the kernel reads in Philox mode: p and q of every position up to the first rejection
    (their masses), then p and q of that position again (the residual), or p of the bonus row."""
    n = accepted.double()
    rows = torch.where(n < k, 2 * (n + 2), torch.full_like(n, 2 * k + 1))
    return int(rows.sum().item() * vocab * itemsize)


def cpu_time(fn: Callable[[], Any], repeats: int = 5) -> float:
    """Fastest of ``repeats`` runs after one warm-up: on a shared machine the others measure the neighbours."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * min(times)


def gpu_time(fn: Callable[[], Any]) -> float:
    """Median milliseconds over about 100 ms of runs, L2 flushed between runs (triton.testing)."""
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))


def engine_samplers() -> dict[str, Callable[..., Callable[[], Any]]]:
    """Factories ``make(target, draft, drafts) -> fn`` for the engines that are installed."""
    found: dict[str, Callable[..., Callable[[], Any]]] = {}
    try:
        from flashinfer.sampling import chain_speculative_sampling
    except Exception:  # not installed, or built for another CUDA: not part of this run
        chain_speculative_sampling = None
    if chain_speculative_sampling is not None:

        def flashinfer(target, draft, drafts):
            # FlashInfer takes float32 probabilities and int32 ids; converted once, outside the timing.
            t, d, y = target.float(), draft.float(), drafts.int()
            params = inspect.signature(chain_speculative_sampling).parameters
            if "uniform_samples" in params:  # releases before early 2025 took the uniforms
                u = torch.rand(y.shape[0], y.shape[1] + 1, device=t.device)
                return lambda: chain_speculative_sampling(d, y, u, t)
            return lambda: chain_speculative_sampling(d, y, t)

        found["flashinfer"] = flashinfer
    try:
        from vllm.v1.sample.rejection_sampler import rejection_sample
    except Exception:
        rejection_sample = None
    if rejection_sample is not None:

        def vllm(target, draft, drafts):
            # vLLM's flattened layout; its bonus token is sampled outside its rejection sampler (and
            # outside this timing), and the target probabilities it needs are the K draft positions'.
            from types import SimpleNamespace

            batch, k = drafts.shape
            vocab = target.shape[-1]
            t = target[:, :k].float().reshape(batch * k, vocab).contiguous()
            d = draft.float().reshape(batch * k, vocab).contiguous()
            y = drafts.int().reshape(-1).contiguous()
            cu = torch.arange(1, batch + 1, device=t.device, dtype=torch.int32) * k
            bonus = torch.multinomial(target[:, k].float(), 1).int().contiguous()
            meta = SimpleNamespace(
                all_greedy=False,
                all_random=True,
                temperature=torch.ones(batch, device=t.device),
                generators={},
                top_k=None,
                top_p=None,
            )
            return lambda: rejection_sample(y, [k] * batch, k, cu, d, t, bonus, meta)

        found["vllm"] = vllm
    return found


def describe_machine(device: torch.device) -> dict[str, Any]:
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "device": str(device),
        "triton_interpreter": triton_sampler.capabilities.device == "cpu",
        "torch_threads": torch.get_num_threads(),
        "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }
    if device.type != "cuda":
        info["slug"] = "cpu-interpreter"
        return info
    props = torch.cuda.get_device_properties(device)
    info.update(
        gpu=props.name,
        multiprocessors=props.multi_processor_count,
        memory_gib=round(props.total_memory / 2**30, 1),
        capability=f"{props.major}.{props.minor}",
        cuda=torch.version.cuda,
    )
    clock_khz, bus_bits = getattr(props, "memory_clock_rate", None), getattr(props, "memory_bus_width", None)
    if clock_khz and bus_bits:  # double data rate
        info["peak_bandwidth"] = 2 * clock_khz * 1e3 * bus_bits / 8
        info["peak_bandwidth_source"] = "driver clocks"
    else:
        name = next((n for n in PEAK_BANDWIDTH if n in props.name), None)
        info["peak_bandwidth"] = PEAK_BANDWIDTH.get(name)
        info["peak_bandwidth_source"] = f"table entry {name!r}" if name else "unknown"
    info["measured_read_bandwidth"] = _measured_read_bandwidth(device)
    info["slug"] = re.sub(r"[^a-z0-9]+", "-", props.name.lower()).strip("-")
    return info


def _measured_read_bandwidth(device: torch.device) -> float:
    """What a plain reduction reads per second here: the practical roofline."""
    ones = torch.ones(2**30 // 2, dtype=torch.bfloat16, device=device)  # 1 GiB
    ms = gpu_time(lambda: ones.sum(dtype=torch.float32))
    ones = None  # give the GiB back before the next measurement
    torch.cuda.empty_cache()
    return 2**30 / (ms / 1e3)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def format_row(row: dict[str, Any]) -> str:
    times = ", ".join(f"{name} {ms:.3g} ms" for name, ms in row["ms"].items())
    extra = f"  {row['GBps_read']:.0f} GB/s" if row.get("fraction_of_peak_bandwidth") is not None else ""
    skipped = f"  (skipped: {', '.join(row['skipped'])})" if row["skipped"] else ""
    return f"B={row['B']:>5} K={row['K']} V={row['V']:>6}: {times}{extra}{skipped}"


def to_markdown(result: dict[str, Any]) -> str:
    m = result["machine"]
    lines = [
        f"# Triton sampler benchmark: {m.get('gpu') or 'CPU, Triton interpreter'}",
        "",
        f"Command: `{result['command']}` ({result['date']}); probabilities {result['dtype']}.",
        "",
        "Machine: " + ", ".join(f"{key} {value}" for key, value in m.items() if key != "slug"),
        "",
    ]
    if m.get("triton_interpreter"):
        lines += ["Through Triton's interpreter on CPU: these times measure the interpreter, not a GPU kernel.", ""]
    names = sorted({name for row in result["rows"] for name in row["ms"]}, key=lambda n: (n != "triton", n))
    header = (
        ["B", "K", "V", "accepted"] + [f"{n} ms" for n in names] + [f"{n} / triton" for n in names if n != "triton"]
    )
    gpu = not m.get("triton_interpreter")
    if gpu:
        header += ["GB/s (read)", "of peak", "of measured read"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in result["rows"]:
        cells = [str(row["B"]), str(row["K"]), str(row["V"]), f"{row['mean_accepted']:.2f}"]
        cells += [f"{row['ms'][n]:.3g}" if n in row["ms"] else "-" for n in names]
        ratios = row.get("ratio_to_triton", {})
        cells += [f"{ratios[n]:.3g}" if n in ratios else "-" for n in names if n != "triton"]
        if gpu:
            cells += [
                f"{row['GBps_read']:.0f}" if "GBps_read" in row else "-",
                _percent(row.get("fraction_of_peak_bandwidth")),
                _percent(row.get("fraction_of_measured_read_bandwidth")),
            ]
        lines.append("| " + " | ".join(cells) + " |")
    skipped = {name: reason for row in result["rows"] for name, reason in row["skipped"].items()}
    if skipped:
        lines += ["", "Skipped: " + "; ".join(f"{n}: {r}" for n, r in skipped.items())]
    return "\n".join(lines) + "\n"


def _percent(x: float | None) -> str:
    return "-" if x is None or math.isnan(x) else f"{100 * x:.0f}%"


if __name__ == "__main__":
    raise SystemExit(main())
