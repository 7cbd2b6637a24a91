"""Stand-ins for the GPU libraries, so each adapter's argument mapping is tested on any machine.

Each fake is a module placed in ``sys.modules`` under the library's real import path, with the
function signature of the library's source (the version named in its docstring), recording every
call.  Its body follows the library's documented algorithm in plain torch on the CPU, in the
library's own vocabulary (FlashInfer's draft ``p`` and target ``q``, vLLM's ragged layout, SGLang's
tree walk), so the adapter's outputs are the ones the real kernel would give up to its random
numbers, and a mapping error (laws swapped, rows misaligned, a wrong uniform) changes them.
"""

from __future__ import annotations

import sys
import types

import pytest
import torch


class Recorder:
    """The calls a fake library received, as dictionaries of argument name to value."""

    def __init__(self) -> None:
        self.calls: list[dict[str, object]] = []

    @property
    def last(self) -> dict[str, object]:
        return self.calls[-1]


def _install(monkeypatch: pytest.MonkeyPatch, name: str, **attributes: object) -> types.ModuleType:
    """Put a module and its parent packages into ``sys.modules`` for the test's duration."""
    parts = name.split(".")
    for depth in range(1, len(parts)):
        parent = ".".join(parts[:depth])
        if parent not in sys.modules or not getattr(sys.modules[parent], "_specverify_fake", False):
            package = types.ModuleType(parent)
            package.__path__ = []  # type: ignore[attr-defined]
            package._specverify_fake = True  # type: ignore[attr-defined]
            monkeypatch.setitem(sys.modules, parent, package)
    module = types.ModuleType(name)
    module._specverify_fake = True  # type: ignore[attr-defined]
    for key, value in attributes.items():
        setattr(module, key, value)
    monkeypatch.setitem(sys.modules, name, module)
    if len(parts) > 1:
        monkeypatch.setattr(sys.modules[".".join(parts[:-1])], parts[-1], module, raising=False)
    return module


def _inverse_cdf(weights: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Smallest index whose cumulative weight exceeds ``u * total`` (FlashInfer and SGLang's rule)."""
    cdf = weights.cumsum(-1)
    index = torch.searchsorted(cdf, (u * cdf[..., -1]).unsqueeze(-1), right=True).squeeze(-1)
    return index.clamp_max(weights.shape[-1] - 1)


# --- FlashInfer (flashinfer/sampling.py) -----------------------------------------------------


def _flashinfer_chain(draft_probs, draft_token_ids, target_probs, uniforms):
    """FlashInfer's kernel: p is the draft, q the target; accept iff u * p < q; residual relu(q - p)."""
    batch, n = draft_token_ids.shape
    ids = draft_token_ids.long()
    p = draft_probs.gather(-1, ids.unsqueeze(-1)).squeeze(-1)
    q = target_probs[:, :n].gather(-1, ids.unsqueeze(-1)).squeeze(-1)
    accept = uniforms[:, :n] * p < q
    pos = accept.int().cumprod(-1).sum(-1)
    rows = torch.arange(batch)
    padded_p = torch.cat([draft_probs, torch.zeros_like(draft_probs[:, :1])], dim=1)
    residual = (target_probs[rows, pos] - padded_p[rows, pos]).clamp_min(0)
    final = _inverse_cdf(residual, uniforms[rows, (pos + 1).clamp_max(n)])
    out = torch.where(torch.arange(n + 1) < pos.unsqueeze(-1), torch.cat([ids, ids[:, :1]], 1), -1)
    out[rows, pos] = final
    return out.to(torch.int32), accept.sum(-1).to(torch.int32), pos.to(torch.int32)


@pytest.fixture
def fake_flashinfer(monkeypatch):
    """``flashinfer.sampling`` as of 2026 (generator=, seed=, offset=; returns three tensors)."""
    recorder = Recorder()

    def chain_speculative_sampling(
        draft_probs,
        draft_token_ids,
        target_probs,
        maybe_output_accepted_token_num=None,
        maybe_output_emitted_draft_token_num=None,
        deterministic=True,
        generator=None,
        seed=None,
        offset=None,
    ):
        recorder.calls.append(
            dict(
                draft_probs=draft_probs,
                draft_token_ids=draft_token_ids,
                target_probs=target_probs,
                deterministic=deterministic,
                generator=generator,
                seed=seed,
                offset=offset,
            )
        )
        b, n = draft_token_ids.shape
        uniforms = torch.rand((b, n + 1), generator=generator, dtype=torch.float32)
        return _flashinfer_chain(draft_probs.float(), draft_token_ids.int(), target_probs.float(), uniforms)

    _install(monkeypatch, "flashinfer", __version__="0.6.fake")
    _install(monkeypatch, "flashinfer.sampling", chain_speculative_sampling=chain_speculative_sampling)
    return recorder


@pytest.fixture
def fake_flashinfer_uniforms(monkeypatch):
    """``flashinfer.sampling`` before early 2025 (explicit ``uniform_samples [B, n+1]``)."""
    recorder = Recorder()

    def chain_speculative_sampling(
        draft_probs,
        draft_token_ids,
        uniform_samples,
        target_probs,
        maybe_output_accepted_token_num=None,
        maybe_output_emitted_token_num=None,
        deterministic=True,
    ):
        recorder.calls.append(
            dict(
                draft_probs=draft_probs,
                draft_token_ids=draft_token_ids,
                uniform_samples=uniform_samples,
                target_probs=target_probs,
            )
        )
        return _flashinfer_chain(draft_probs, draft_token_ids, target_probs, uniform_samples)

    _install(monkeypatch, "flashinfer", __version__="0.2.fake")
    _install(monkeypatch, "flashinfer.sampling", chain_speculative_sampling=chain_speculative_sampling)
    return recorder


# --- vLLM (vllm/v1/sample/rejection_sampler.py) ---------------------------------------------


def _vllm_rejection_sample(
    recorder,
    draft_token_ids,
    num_draft_tokens,
    max_spec_len,
    cu_num_draft_tokens,
    draft_probs,
    target,
    bonus_token_ids,
    sampling_metadata,
    *,
    logits,
    synthetic_mode=False,
    synthetic_conditional_rates=None,
):
    recorder.calls.append(
        dict(
            draft_token_ids=draft_token_ids,
            num_draft_tokens=num_draft_tokens,
            max_spec_len=max_spec_len,
            cu_num_draft_tokens=cu_num_draft_tokens,
            draft_probs=draft_probs,
            target=target,
            bonus_token_ids=bonus_token_ids,
            sampling_metadata=sampling_metadata,
            synthetic_mode=synthetic_mode,
            synthetic_conditional_rates=synthetic_conditional_rates,
        )
    )
    assert draft_token_ids.ndim == 1 and draft_token_ids.is_contiguous()
    assert target.ndim == 2 and target.shape[0] == draft_token_ids.shape[0]
    target_probs = target.softmax(-1, dtype=torch.float32) if logits else target
    batch = len(num_draft_tokens)
    # greedy requests (temperature 0) go through vLLM's greedy kernel: accept iff the draft is the argmax
    greedy = [False] * batch if sampling_metadata.all_random else (sampling_metadata.temperature == 0).tolist()
    vocab = target_probs.shape[-1]
    # Global-generator draws, as vLLM makes them for requests without their own generator.
    uniform = torch.rand((draft_token_ids.shape[0],), dtype=torch.float64)
    exponential = torch.empty((batch, vocab), dtype=torch.float32).exponential_()
    out = torch.full((batch, max_spec_len + 1), -1, dtype=torch.int32)
    starts = [0, *cu_num_draft_tokens.tolist()[:-1]]
    for req, (start, n) in enumerate(zip(starts, num_draft_tokens, strict=True)):  # the kernel's loop, per request
        rejected = False
        for pos in range(n):
            t = start + pos
            token = int(draft_token_ids[t])
            p, q = target_probs[t, token], draft_probs[t, token]
            if greedy[req]:
                best = int(target[t].argmax())
                if token != best:
                    token, rejected = best, True
                out[req, pos] = token
                if rejected:
                    break
                continue
            if synthetic_mode:
                accept = bool(uniform[t] < synthetic_conditional_rates[pos])
            else:
                accept = bool(q > 0 and p / q >= uniform[t])
            if not accept:
                residual = (target_probs[t] - draft_probs[t]).clamp_min(0)
                token = int((residual / exponential[req]).argmax())
                rejected = True
            out[req, pos] = token
            if rejected:
                break
        if not rejected:
            out[req, n] = bonus_token_ids[req, 0]
    return out


def _vllm_apply_sampling_constraints(logits, cu_num_draft_tokens, sampling_metadata):
    """vLLM's ``apply_sampling_constraints``: each request's temperature (greedy 0 read as 1),
    then ``apply_top_k_top_p``: ascending sort, logits below the k-th largest to -inf, then the
    ascending cumulative mass up to 1 - top_p to -inf (the largest always kept)."""
    if sampling_metadata.all_greedy:
        return logits
    counts = torch.diff(cu_num_draft_tokens, prepend=cu_num_draft_tokens.new_zeros(1)).long()

    def expand(x):
        return x.repeat_interleave(counts)

    temperature = expand(torch.where(sampling_metadata.temperature == 0, 1.0, sampling_metadata.temperature))
    logits.div_(temperature.unsqueeze(-1))
    if sampling_metadata.top_k is None and sampling_metadata.top_p is None:
        return logits
    ascending, order = logits.sort(dim=-1)
    if sampling_metadata.top_k is not None:
        k = expand(sampling_metadata.top_k).long()
        kth = ascending.gather(1, (ascending.shape[1] - k).unsqueeze(1))
        ascending.masked_fill_(ascending < kth, -float("inf"))
    if sampling_metadata.top_p is not None:
        mass = ascending.softmax(dim=-1).cumsum(dim=-1)
        drop = mass <= 1 - expand(sampling_metadata.top_p).unsqueeze(1)
        drop[:, -1] = False
        ascending.masked_fill_(drop, -float("inf"))
    return logits.scatter_(-1, order, ascending)


def _install_vllm(monkeypatch, function, **more):
    _install(monkeypatch, "vllm", __version__="0.fake")
    return _install(
        monkeypatch, "vllm.v1.sample.rejection_sampler", rejection_sample=function, MAX_SPEC_LEN=128, **more
    )


@pytest.fixture
def fake_vllm(monkeypatch):
    """vLLM after #32852 (``target_logits``, synthetic mode)."""
    recorder = Recorder()

    def rejection_sample(
        draft_token_ids,
        num_draft_tokens,
        max_spec_len,
        cu_num_draft_tokens,
        draft_probs,
        target_logits,
        bonus_token_ids,
        sampling_metadata,
        synthetic_mode=False,
        synthetic_conditional_rates=None,
    ):
        return _vllm_rejection_sample(
            recorder,
            draft_token_ids,
            num_draft_tokens,
            max_spec_len,
            cu_num_draft_tokens,
            draft_probs,
            target_logits,
            bonus_token_ids,
            sampling_metadata,
            logits=True,
            synthetic_mode=synthetic_mode,
            synthetic_conditional_rates=synthetic_conditional_rates,
        )

    _install_vllm(monkeypatch, rejection_sample, apply_sampling_constraints=_vllm_apply_sampling_constraints)
    return recorder


@pytest.fixture
def fake_vllm_probs(monkeypatch):
    """vLLM before #32852 (``target_probs``, no synthetic mode)."""
    recorder = Recorder()

    def rejection_sample(
        draft_token_ids,
        num_draft_tokens,
        max_spec_len,
        cu_num_draft_tokens,
        draft_probs,
        target_probs,
        bonus_token_ids,
        sampling_metadata,
    ):
        return _vllm_rejection_sample(
            recorder,
            draft_token_ids,
            num_draft_tokens,
            max_spec_len,
            cu_num_draft_tokens,
            draft_probs,
            target_probs,
            bonus_token_ids,
            sampling_metadata,
            logits=False,
        )

    _install_vllm(monkeypatch, rejection_sample)
    return recorder


# --- SGLang (sgl-kernel/python/sgl_kernel/speculative.py) ----------------------------------


@pytest.fixture
def fake_sglang(monkeypatch):
    """``sgl_kernel.tree_speculative_sampling_target_only`` with its ``draft_probs`` scratch."""
    recorder = Recorder()

    def tree_speculative_sampling_target_only(
        predicts,
        accept_index,
        accept_token_num,
        candidates,
        retrive_index,
        retrive_next_token,
        retrive_next_sibling,
        uniform_samples,
        uniform_samples_for_final_sampling,
        target_probs,
        draft_probs,
        threshold_single=1.0,
        threshold_acc=1.0,
        deterministic=True,
    ):
        recorder.calls.append(
            dict(
                candidates=candidates.clone(),
                retrive_index=retrive_index,
                retrive_next_token=retrive_next_token,
                retrive_next_sibling=retrive_next_sibling,
                uniform_samples=uniform_samples,
                uniform_samples_for_final_sampling=uniform_samples_for_final_sampling,
                target_probs=target_probs,
                draft_probs=draft_probs.clone(),
                threshold_single=threshold_single,
                threshold_acc=threshold_acc,
                predicts=predicts,
                accept_index=accept_index,
                accept_token_num=accept_token_num,
            )
        )
        expected = {
            "predicts": (predicts, torch.int32),
            "accept_index": (accept_index, torch.int32),
            "accept_token_num": (accept_token_num, torch.int32),
            "candidates": (candidates, torch.int64),
            "retrive_index": (retrive_index, torch.int64),
            "uniform_samples": (uniform_samples, torch.float32),
            "target_probs": (target_probs, torch.float32),
            "draft_probs": (draft_probs, torch.float32),
        }
        for name, (tensor, dtype) in expected.items():
            if tensor.dtype != dtype:  # the real op's own checks
                raise RuntimeError(f"Expected '{name}' to be of type {dtype}")
        batch, nodes = candidates.shape
        steps = accept_index.shape[1]
        for b in range(batch):  # the kernel's tree walk, one block per row
            prob_acc, offset = 0.0, (b, 0)
            coin = float(uniform_samples[b, 0])
            last = int(retrive_index[b, 0])
            accept_index[b, 0] = last
            accepted, cur = 0, 0
            for _ in range(1, steps):
                cur = int(retrive_next_token[b, cur])
                while cur != -1:
                    token = int(candidates[b, cur])
                    single = float(target_probs[offset][token])
                    prob_acc += single
                    if coin <= prob_acc / max(threshold_acc, 1e-9) or single >= threshold_single:
                        prob_acc, offset = 0.0, (b, cur)
                        coin = float(uniform_samples[b, cur])
                        predicts[last] = token
                        accepted += 1
                        accept_index[b, accepted] = int(retrive_index[b, cur])
                        last = int(retrive_index[b, cur])
                        break
                    draft_probs[offset][token] = target_probs[offset][token]
                    cur = int(retrive_next_sibling[b, cur])
                if cur == -1:
                    break
            accept_token_num[b] = accepted
            bonus = accepted == steps - 1
            residual = target_probs[offset] - (0 if bonus else draft_probs[offset])
            predicts[last] = int(_inverse_cdf(residual.clamp_min(0), uniform_samples_for_final_sampling[b]))

    _install(
        monkeypatch,
        "sgl_kernel",
        __version__="0.fake",
        tree_speculative_sampling_target_only=tree_speculative_sampling_target_only,
    )
    return recorder


@pytest.fixture
def no_library(monkeypatch):
    """Make an import path unimportable, whatever is installed (``sys.modules[name] = None``)."""

    def hide(*names: str) -> None:
        for name in names:
            monkeypatch.setitem(sys.modules, name, None)

    return hide
