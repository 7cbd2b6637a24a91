"""The target-only tree verifier's Triton kernel, run through Triton's interpreter: uniform for
uniform the target-only reference, valid on the family's shapes with its own coins, the trees
family's exact checks in a fresh ``specverify check`` process, and the GPU build compiling.

Every random input comes from a seed derived with :func:`specverify._seeds.derive_seed`.
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

from test_tree_reference import repeated, small_trees  # noqa: E402

from specverify._seeds import derive_seed  # noqa: E402
from specverify._trees.contract import TreeBatch, audit_tree_output  # noqa: E402
from specverify.checks._tree_cases import AUDIT_ONLY, TREE_SHAPES  # noqa: E402
from specverify.samplers import tree_target_only  # noqa: E402
from specverify.samplers._tree_triton import TreeTritonSampler, tree_triton  # noqa: E402

SHAPES = {**TREE_SHAPES, **AUDIT_ONLY}  # chain, star, binary, 36 siblings, 64 siblings, 64 nodes on two levels
ROWS = 64  # per shape


def generator(*parts: object) -> torch.Generator:
    return torch.Generator().manual_seed(derive_seed("tests/trees/test_tree_triton", *parts))


def random_trees(name: str, rows: int = ROWS) -> TreeBatch:
    """``rows`` trees of a family shape: tokens often repeated among siblings, laws with zeros."""
    shape = SHAPES[name]
    g = generator("tree", name)
    parents = torch.tensor(shape.parents, dtype=torch.int64).expand(rows, -1).contiguous()
    tokens = torch.randint(0, min(shape.vocab, 6), parents.shape, generator=g)  # few distinct tokens: duplicates
    weights = torch.randint(0, 4, (rows, parents.shape[1], shape.vocab), generator=g).to(torch.float64)
    weights[..., 0] += 1.0  # every row has mass
    return TreeBatch(parents, tokens, weights / weights.sum(-1, keepdim=True))


def same(a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor]) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_uniform_for_uniform_the_target_only_reference(name: str) -> None:
    """Random coins, coins of exactly 0 and coins of 1 - 1e-9: the same path and token per row
    (random float64 coins fall within 1e-12 of a boundary with probability about 1e-11; a coin
    within 1e-16 of 1 is a float tie at the last child of positive mass, see docs/trees.md)."""
    tree = random_trees(name)
    u = torch.rand(tree.parents.shape, generator=generator("coins", name), dtype=torch.float64)
    for coins in (u, torch.zeros_like(u), torch.full_like(u, 1 - 1e-9)):
        got = tree_triton(tree, uniforms=coins)
        assert got[0].dtype == got[1].dtype == torch.int64
        assert same(got, tree_target_only(tree, uniforms=coins))


def test_duplicates_zero_mass_children_and_a_mixed_batch_agree() -> None:
    """The reference's hand-made trees (a duplicate sibling, zero-mass children, star, chain) in one batch."""
    tree = repeated(small_trees(), 40)
    u = torch.rand(tree.parents.shape, generator=generator("small"), dtype=torch.float64)
    assert same(tree_triton(tree, uniforms=u), tree_target_only(tree, uniforms=u))
    # a vocabulary tile smaller than V: the reductions and the search cross tiles
    assert same(TreeTritonSampler(block_v=2)(tree, uniforms=u), tree_target_only(tree, uniforms=u))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_low_precision_laws_agree_with_the_reference_on_the_same_inputs(dtype: torch.dtype) -> None:
    tree = random_trees("binary")
    tree = TreeBatch(tree.parents, tree.tokens, tree.target_probs.to(dtype))
    u = torch.rand(tree.parents.shape, generator=generator("dtype", str(dtype)), dtype=torch.float64)
    assert same(tree_triton(tree, uniforms=u), tree_target_only(tree, uniforms=u))


def test_its_own_coins_give_valid_outputs_and_follow_the_generator() -> None:
    for name in ("chain", "star", "binary", "wide"):
        tree = random_trees(name)
        output = tree_triton(tree, generator(name, "own"))
        assert audit_tree_output(tree, output) == [], name
        assert same(output, tree_triton(tree, generator(name, "own")))  # alike-seeded generators agree
    g = generator("advance")
    assert not same(tree_triton(tree, g), tree_triton(tree, g))  # 64 rows of 37 candidates: the generator advances


def test_the_trees_family_exact_checks_pass_in_a_fresh_process(tmp_path: Path) -> None:
    """The documented command: every output and support check passes; a subset is inconclusive (exit 3)."""
    command = [
        sys.executable,
        "-m",
        "specverify",
        "check",
        "specverify.samplers:tree_triton",
        "--budget",
        "quick",
        "--only",
        "trees.output*",
        "--only",
        "trees.support*",
        "--json",
        str(tmp_path / "t.json"),
        "--no-progress",
        "-q",
    ]
    out = subprocess.run(command, capture_output=True, text=True, env=_env(TRITON_INTERPRET="1"), timeout=600)
    result = json.loads((tmp_path / "t.json").read_text())
    bad = [f"{c['id']}: {c['status']} {c['message']}" for c in result["checks"] if c["status"] != "pass"]
    assert result["verdict"] == "inconclusive" and out.returncode == 3, "\n".join(bad) or out.stderr[-2000:]
    assert not bad and len(result["checks"]) >= 3


def test_the_gpu_kernel_compiles_for_hopper():
    """Triton's own CUDA compiler builds the GPU configuration (one row per program) without a GPU:
    loop-carried types and the float64 scan are checked by the real compiler, not the interpreter."""
    code = textwrap.dedent(
        """
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        from specverify.samplers._tree_triton_kernels import launch_config, tree_walk_kernel
        sig = {"target_ptr": "*bf16", "tokens_ptr": "*i64", "children_ptr": "*i64", "uniforms_ptr": "*fp64",
               "path_ptr": "*i64", "token_ptr": "*i64", "B": "i32", "N": "i32", "V": "i32", "R": "i32", "D": "i32"}
        config = launch_config(256, 131072, interpreted=False)
        constants = {"R_POW2": 8, "BLOCK_B": config["BLOCK_B"], "BLOCK_V": config["BLOCK_V"]}
        source = ASTSource(tree_walk_kernel, {**sig, **{name: "constexpr" for name in constants}}, constexprs=constants)
        kernel = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8})
        assert kernel.asm["cubin"]
        print("ok")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_env(TRITON_INTERPRET="0"), timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["ok"]


def _env(**changes: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")])
    )
    return {**env, **changes}
