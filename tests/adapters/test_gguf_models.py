"""The tiny GGUF models the llama.cpp engine loads: written with the gguf package, read back with it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from specverify.adapters._gguf_models import TinyLlama, tiny_llama_gguf

gguf = pytest.importorskip("gguf", reason="the GGUF writer needs the gguf package (the llama-cpp extra)")


def test_the_file_holds_a_llama_model_its_vocabulary_and_its_weights(tmp_path: Path) -> None:
    model = TinyLlama(vocab_size=6, layers=2, hidden=32, heads=2, seed=3)
    reader = gguf.GGUFReader(tiny_llama_gguf(model, tmp_path))
    assert reader.fields["general.architecture"].contents() == "llama"
    assert reader.fields["tokenizer.ggml.model"].contents() == "llama"
    assert reader.fields["tokenizer.ggml.tokens"].contents() == ["<unk>", "<s>", "</s>", "a", "b", "c"]
    assert reader.fields["llama.block_count"].contents() == 2
    tensors = {tensor.name: tensor for tensor in reader.tensors}
    assert len(tensors) == 3 + 9 * 2  # embeddings, final norm, output head; nine tensors a layer
    written = model.weights()
    for name in ("token_embd.weight", "blk.1.ffn_down.weight", "output.weight"):
        assert np.array_equal(np.asarray(tensors[name].data), written[name])  # read back as written
    assert list(tensors["token_embd.weight"].shape) == [32, 6]  # ggml's order: the row's length first


def test_the_same_model_is_the_same_file_written_once(tmp_path: Path) -> None:
    first = tiny_llama_gguf(TinyLlama(seed=1), tmp_path)
    written = first.stat().st_mtime_ns
    assert tiny_llama_gguf(TinyLlama(seed=1), tmp_path) == first and first.stat().st_mtime_ns == written
    other = tiny_llama_gguf(TinyLlama(seed=2), tmp_path)
    assert other != first and other.read_bytes() != first.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([first.name, other.name])  # no partial file left


def test_a_model_it_cannot_write_is_refused() -> None:
    with pytest.raises(ValueError, match="vocab_size"):
        TinyLlama(vocab_size=3)
    with pytest.raises(ValueError, match="multiple of heads"):
        TinyLlama(hidden=30, heads=4)
