"""The Triton sampler, run through Triton's interpreter: canonical uniform for uniform, valid at
large vocabularies, exact in law with in-kernel Philox, and conformant on the battery.

Every random input comes from a seed derived with :func:`specverify._seeds.derive_seed`; nothing
here depends on timing or on the order tests run in.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

if importlib.util.find_spec("triton") is None:  # not importorskip: triton must be imported by the sampler
    pytest.skip("the Triton sampler needs the 'triton' package (pip install triton)", allow_module_level=True)

import specverify  # noqa: E402
from specverify._contract import audit_output  # noqa: E402
from specverify._laws.oracle import canonical_emit  # noqa: E402
from specverify._seeds import derive_seed  # noqa: E402
from specverify.replay import StepCase  # noqa: E402
from specverify.samplers._triton import TritonSampler, triton_sampler  # noqa: E402
from specverify.stats import samples_needed  # noqa: E402

#: Relative nudge of the uniforms that tells a float tie from a disagreement: the kernel computes
#: every decision to about 1e-14 relative, so a row whose canonical output changes under a nudge
#: of 1e-10 is a tie (documented in docs/triton.md) and may differ; every other row must agree.
NUDGE = 1e-10

KINDS = ("dense", "zeros", "equal", "near-equal", "disjoint", "one-hot", "softmax-bf16")


def generator(*parts: object) -> torch.Generator:
    return torch.Generator().manual_seed(derive_seed("tests/test_triton", *parts))


def step_batch(kind: str, batch: int, k: int, vocab: int, g: torch.Generator):
    """``(target [B, K+1, V], draft [B, K, V], drafts [B, K])`` in float64, not normalised.

    Drafts come from the draft law, except one row in eight, whose drafts are arbitrary tokens
    (so ``q(y) = 0`` and ``p(y) = 0`` occur too).
    """
    target = torch.rand(batch, k + 1, vocab, generator=g, dtype=torch.float64) ** 3
    draft = torch.rand(batch, k, vocab, generator=g, dtype=torch.float64) ** 3
    if kind == "zeros":
        target = target * (torch.rand(target.shape, generator=g) < 0.3)
        draft = draft * (torch.rand(draft.shape, generator=g) < 0.3)
    elif kind == "equal":
        draft = target[:, :k].clone()
    elif kind == "near-equal":
        draft = target[:, :k] * (1 + 1e-6 * torch.randint(-1, 2, draft.shape, generator=g))
    elif kind == "disjoint":
        mine = torch.rand(target.shape, generator=g) < 0.5
        target = target * mine
        draft = draft * ~mine[:, :k]
    elif kind == "one-hot":
        target = torch.nn.functional.one_hot(torch.randint(0, vocab, (batch, k + 1), generator=g), vocab).double()
    elif kind == "softmax-bf16":  # what engines pass: softmax outputs rounded, sums off 1
        target = torch.softmax(3 * torch.randn(batch, k + 1, vocab, generator=g), -1).to(torch.bfloat16).double()
        draft = torch.softmax(3 * torch.randn(batch, k, vocab, generator=g), -1).to(torch.bfloat16).double()
    elif kind != "dense":
        raise ValueError(kind)
    # every row needs some mass: put a little on one random token where a row has none
    for probs in (target, draft):
        empty = probs.sum(-1) == 0
        probs[empty, torch.randint(0, vocab, (int(empty.sum()),), generator=g)] = 1.0
    live = draft.reshape(-1, vocab)
    drafts = torch.multinomial(live, 1, generator=g).reshape(batch, k)
    arbitrary = torch.rand(batch, generator=g) < 0.125
    drafts[arbitrary] = torch.randint(0, vocab, (int(arbitrary.sum()), k), generator=g)
    return target, draft, drafts


#: Rows ``r`` with ``r % 7 == 0`` get uniforms 0, rows with ``r % 7 == 3`` the largest float64 below 1.
EXTREME = {0: 0.0, 3: 1.0 - 2.0**-53}


def uniforms_for(batch: int, k: int, g: torch.Generator) -> torch.Tensor:
    """Random uniforms, and the ends of [0, 1) on rows given by :data:`EXTREME`: ``u = 0`` accepts
    every draft with ``p(y) > 0``; ``1 - 2**-53`` sits on the boundary wherever ``p(y) = q(y)``."""
    u = torch.rand(batch, k + 1, generator=g, dtype=torch.float64)
    for start, value in EXTREME.items():
        u[start::7] = value
    return u


def canonical_ties(target, draft, drafts, uniforms) -> torch.Tensor:
    """Rows whose canonical output hangs on a float tie: an accept test with ``u_i q_i(y) = p_i(y)``
    to within ``NUDGE``, or a last uniform whose nudge moves the emitted token."""
    p = target / target.sum(-1, keepdim=True)
    q = draft / draft.sum(-1, keepdim=True)
    p_y = p[:, :-1].gather(-1, drafts[..., None])[..., 0]
    q_y = q.gather(-1, drafts[..., None])[..., 0]
    accept_tie = ((uniforms[:, :-1] * q_y - p_y).abs() <= NUDGE * torch.maximum(p_y, q_y)) & (p_y > 0) & (q_y > 0)
    want = canonical_emit(target, draft, drafts, uniforms)
    nudged = [
        canonical_emit(target, draft, drafts, (uniforms * f).clamp(max=1 - 2.0**-53)) for f in (1 - NUDGE, 1 + NUDGE)
    ]
    moved = [(n[0] != want[0]).any(-1) | (n[1] != want[1]) for n in nudged]
    return accept_tie.any(-1) | moved[0] | moved[1]


def assert_canonical(sampler, target, draft, drafts, uniforms, dtype) -> None:
    """Token for token the canonical output, but on rows at a float tie (few, and counted)."""
    target, draft = target.to(dtype), draft.to(dtype)
    got = sampler(target, draft, drafts, None, uniforms=uniforms)
    assert audit_output(got, target, drafts) == []
    # what the kernel reads: float64 inputs are rounded to float32, the others are exact in float64
    passed_t, passed_d = target.to(torch.float32).double(), draft.to(torch.float32).double()
    want = canonical_emit(passed_t, passed_d, drafts, uniforms)
    ties = canonical_ties(passed_t, passed_d, drafts, uniforms)
    wrong = ((got[0] != want[0]).any(-1) | (got[1] != want[1])) & ~ties
    if wrong.any():
        r = int(wrong.nonzero()[0, 0])
        pytest.fail(
            f"{int(wrong.sum())} of {drafts.shape[0]} rows differ from the canonical output; first: row {r}, "
            f"uniforms {uniforms[r].tolist()}, drafts {drafts[r].tolist()}: got {got[0][r].tolist()} "
            f"({int(got[1][r])} accepted), canonical {want[0][r].tolist()} ({int(want[1][r])} accepted)"
        )
    random_rows = ~torch.isin(torch.arange(drafts.shape[0]) % 7, torch.tensor(list(EXTREME)))
    assert int((ties & random_rows).sum()) <= max(2, drafts.shape[0] // 500), "suspiciously many random rows at a tie"


SHAPES = [(1, 2), (3, 5), (4, 8), (8, 17), (16, 6), (2, 1000), (5, 3000)]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("k", "vocab"), SHAPES, ids=[f"K{k}-V{v}" for k, v in SHAPES])
def test_injected_uniforms_give_the_canonical_output(kind, k, vocab):
    g = generator("canonical", kind, k, vocab)
    batch = 1024 if vocab <= 64 else 96
    target, draft, drafts = step_batch(kind, batch, k, vocab, g)
    dtype = torch.bfloat16 if kind == "softmax-bf16" else torch.float32
    assert_canonical(triton_sampler, target, draft, drafts, uniforms_for(batch, k, g), dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_every_dtype_is_read_exactly_as_given(dtype):
    g = generator("dtypes", str(dtype))
    target, draft, drafts = step_batch("dense", 1024, 4, 9, g)
    assert_canonical(triton_sampler, target, draft, drafts, uniforms_for(1024, 4, g), dtype)


def test_a_batch_mixing_every_kind_is_canonical_row_by_row():
    g = generator("mixed")
    parts = [step_batch(kind, 256, 3, 7, g) for kind in KINDS]
    target, draft, drafts = (torch.cat(x)[torch.randperm(256 * len(KINDS), generator=g)] for x in zip(*parts))
    assert_canonical(triton_sampler, target, draft, drafts, uniforms_for(target.shape[0], 3, g), torch.float32)


@pytest.mark.parametrize("block_v", [4, 16])
def test_vocabulary_blocks_carry_their_masses_across(block_v):
    """Small blocks force many blocks per row: the carries, the early exit, the block edges."""
    g = generator("blocks", block_v)
    for kind in ("dense", "zeros", "disjoint"):
        target, draft, drafts = step_batch(kind, 512, 3, 61, g)
        assert_canonical(TritonSampler(block_v=block_v), target, draft, drafts, uniforms_for(512, 3, g), torch.float32)


def test_no_drafts_is_one_draw_from_the_bonus_row():
    g = generator("no-drafts")
    target = torch.rand(512, 1, 9, generator=g) * (torch.rand(512, 1, 9, generator=g) < 0.7)
    target[:, 0, 4] += 0.01
    drafts = torch.zeros(512, 0, dtype=torch.int64)
    u = uniforms_for(512, 0, g)
    tokens, accepted = triton_sampler(target, torch.zeros(512, 0, 9), drafts, None, uniforms=u)
    cdf = (target[:, 0].double() / target[:, 0].double().sum(-1, keepdim=True)).cumsum(-1)
    last_positive = torch.where(target[:, 0] > 0, torch.arange(9), -1).amax(-1)
    expected = torch.minimum(torch.searchsorted(cdf, u, right=True)[:, 0], last_positive)
    assert torch.equal(accepted, torch.zeros(512, dtype=torch.int64)) and torch.equal(tokens[:, 0], expected)


def test_draft_ids_outside_the_vocabulary_are_rejected_not_read():
    g = generator("bad-ids")
    target, draft, _ = step_batch("dense", 4, 2, 5, g)
    drafts = torch.tensor([[0, 7], [-3, 1], [5, 0], [2, 2]])
    u = torch.zeros(4, 3, dtype=torch.float64)
    tokens, accepted = triton_sampler(target.float(), draft.float(), drafts, None, uniforms=u)
    assert accepted[:3].tolist() == [1, 0, 0]
    assert ((tokens >= 0) & (tokens < 5)).sum(-1).tolist()[:3] == [2, 1, 1]


def test_large_vocabulary_agrees_and_is_valid():
    g = generator("large")
    vocab, k, batch = 131_072, 2, 3
    target = torch.rand(batch, k + 1, vocab, generator=g, dtype=torch.float64) ** 8
    target[:, :, vocab // 2 :] *= torch.rand(batch, k + 1, vocab - vocab // 2, generator=g) < 0.01  # long zero tail
    draft = 0.5 * target[:, :k] + torch.rand(batch, k, vocab, generator=g, dtype=torch.float64) ** 8
    drafts = torch.multinomial(draft.reshape(-1, vocab), 1, generator=g).reshape(batch, k)
    assert_canonical(triton_sampler, target, draft, drafts, uniforms_for(batch, k, g), torch.bfloat16)
    out = triton_sampler(target.float(), draft.float(), drafts, generator("large", "sampler"))
    assert audit_output(out, target.float(), drafts) == []


def test_philox_draws_follow_the_generator():
    g = generator("philox")
    target, draft, drafts = (x.float() if x.is_floating_point() else x for x in step_batch("dense", 512, 3, 6, g))

    def run(gen):
        return triton_sampler(target, draft, drafts, gen)

    first, again = run(torch.Generator().manual_seed(7)), run(torch.Generator().manual_seed(7))
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    shared = torch.Generator().manual_seed(7)
    before = shared.get_state()
    one, two = run(shared), run(shared)
    assert not torch.equal(shared.get_state(), before), "the sampler must consume its generator"
    assert torch.equal(one[0], first[0])
    assert not torch.equal(one[0], two[0]), "consecutive calls with one generator repeated their draws"
    assert audit_output(two, target, drafts) == []


def test_lazy_jumps_draw_exactly_what_eager_jumps_draw():
    """The GPU draws a reservoir jump's uniform when it happens, the interpreter a block at a time."""
    g = generator("lazy")
    target, draft, drafts = (x.float() if x.is_floating_point() else x for x in step_batch("zeros", 256, 3, 45, g))
    eager = TritonSampler(block_v=16, eager_jumps=True)(target, draft, drafts, torch.Generator().manual_seed(3))
    lazy = TritonSampler(block_v=16, eager_jumps=False)(target, draft, drafts, torch.Generator().manual_seed(3))
    assert torch.equal(eager[0], lazy[0]) and torch.equal(eager[1], lazy[1])


def test_philox_draws_are_exact_in_law_across_vocabulary_blocks():
    """The one-pass reservoir draw over 10 blocks of 4 tokens, against the exact law given the drafts.

    G-test at alpha = 1e-6 (false failure at most one in a million runs); the sample size gives
    power 0.99 against a total-variation deviation of 0.03 (noncentral chi-square, specverify.stats).
    """
    g = generator("law")
    k, vocab = 2, 37
    target = torch.rand(k + 1, vocab, generator=g, dtype=torch.float64) ** 2 * (
        torch.rand(k + 1, vocab, generator=g) < 0.6
    )
    draft = torch.rand(k, vocab, generator=g, dtype=torch.float64) ** 2
    target[:, 5] += 0.05
    case = StepCase(target, draft, torch.tensor([5, 11]))
    df = int((case.law() > 0).sum()) - 1
    rows = samples_needed(0.03, df, 1e-6, 0.99)
    seed = derive_seed("tests/test_triton", "law")
    result = specverify.replay.step_law_test(TritonSampler(block_v=4), [case], rows_per_case=rows, seed=seed)
    assert result.pvalue > 1e-6, str(result)


#: Every family but the seven costliest kinds of conditional fit (about half the rows of the quick
#: battery, which the interpreter runs at about 1% of the reference's speed); the whole battery's
#: verdict is reports/specverify.triton.json (scripts/regenerate_reports.py).
BATTERY = [
    "contract",
    "support",
    "exact",
    "fit.conditional[random]",
    "fit.first-token*",
    "fit.step*",
    "fit.position*",
    "fit.every-shape*",
    "efficiency",
    "robustness",
    "shapes",
]


def test_the_quick_battery_passes_every_check_it_runs(tmp_path):
    """The documented command, in a fresh process: Hypothesis seeds its generation with constants
    found in the local modules a process has imported, so the battery's cases depend on what else
    is loaded; a fresh ``specverify check`` process makes them depend on the code alone."""
    command = [
        sys.executable,
        "-m",
        "specverify",
        "check",
        "specverify.samplers:triton",
        "--budget",
        "quick",
        *[arg for family in BATTERY for arg in ("--only", family)],
        "--json",
        str(tmp_path / "triton.json"),
        "--no-progress",
        "-q",
    ]
    out = subprocess.run(command, capture_output=True, text=True, env=_env(TRITON_INTERPRET="1"), timeout=1200)
    result = json.loads((tmp_path / "triton.json").read_text())
    # skips only for what it declares (max_vocab through the interpreter) or the budget bounds
    bounded = ("max_vocab", "shape_max_vocab", "unnormalised=True", "shape_full_domain")
    bad = [
        f"{c['id']}: {c['status']} {c['message']}"
        for c in result["checks"]
        if c["status"] != "pass" and not (c["status"] == "skip" and any(b in c["message"] for b in bounded))
    ]
    # a subset is never a pass: inconclusive (exit 3), with every check it ran passed
    assert result["verdict"] == "inconclusive" and out.returncode == 3, "\n".join(bad) or out.stderr[-2000:]
    assert not bad and sum(c["status"] == "pass" for c in result["checks"]) >= 30


def test_the_spec_loads_lazily():
    code = (
        "import sys, specverify; import specverify.samplers as s; assert 'triton' not in sys.modules; "
        "t = specverify.load_sampler('specverify.samplers:triton'); print(t.name, t.capabilities.device)"
    )
    out = _python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["specverify.triton", "cpu" if not torch.cuda.is_available() else "cuda"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter is only forced where there is no CUDA device")
def test_a_kernel_built_for_a_gpu_on_a_machine_without_one_is_a_clear_error():
    code = "import specverify; specverify.load_sampler('specverify.samplers:triton')"
    out = _python(code, TRITON_INTERPRET="0")
    assert out.returncode != 0
    assert "set TRITON_INTERPRET=1" in out.stderr.strip().splitlines()[-1]


def test_the_gpu_kernel_compiles_for_ampere_and_hopper():
    """Triton's own CUDA compiler (bundled ptxas) builds the GPU configuration without a GPU:
    constexpr globals, loop-carried types and float64 scans are checked by the real compiler."""
    code = textwrap.dedent(
        """
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        from specverify.samplers._triton_kernels import launch_config, verify_kernel
        sig = {"target_ptr": "*bf16", "draft_ptr": "*bf16", "drafts_ptr": "*i64", "uniforms_ptr": "*fp64",
               "seed_ptr": "*i64", "tokens_ptr": "*i64", "accepted_ptr": "*i64", "B": "i32", "K": "i32", "V": "i32"}
        for arch, use_uniforms, vocab in ((90, False, 131072), (90, True, 131072), (80, False, 32000), (90, False, 64)):
            config = launch_config(256, vocab, interpreted=False)
            constants = {"USE_UNIFORMS": use_uniforms, "EAGER_JUMPS": config["EAGER_JUMPS"], "K_POW2": 16,
                         "BLOCK_B": config["BLOCK_B"], "BLOCK_V": config["BLOCK_V"]}
            source = ASTSource(verify_kernel, {**sig, **{name: "constexpr" for name in constants}}, \
constexprs=constants)
            kernel = triton.compile(source, target=GPUTarget("cuda", arch, 32),
                                    options={"num_warps": config["num_warps"], "enable_fp_fusion": False})
            assert kernel.asm["cubin"], arch
            print(arch, use_uniforms, vocab, "ok")
        """
    )
    out = _python(code, TRITON_INTERPRET="0")
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count("ok") == 4


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter (triton not yet imported), with ``env`` changes."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(**env), timeout=600)


def _env(**changes: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    )
    return {**env, **changes}
