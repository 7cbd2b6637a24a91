"""Tiny llama-architecture GGUF files, written at run time with the ``gguf`` package.

llama.cpp loads models from GGUF files only, so the llama.cpp engine (:mod:`.llama_cpp_engine`)
needs one; nothing is downloaded: a file holds random float32 weights drawn from a fixed seed and a
minimal SentencePiece ("llama") vocabulary of a few tokens, so that laws are dense.  Token ids
are all the engine sees; the vocabulary exists because llama.cpp will not load a model without one.
Its first three tokens are llama.cpp's unknown, begin and end tokens, the rest single letters; the
model may generate any of them (nothing here ends a generation: the engine's stop tokens do).
"""

from __future__ import annotations

import hashlib
import os
import string
import tempfile
from pathlib import Path

import numpy as np

from ._common import import_library

__all__ = ["TinyLlama", "tiny_llama_gguf"]

_INSTALL = "pip install 'speculative-verify[llama-cpp]'"
#: The tokenizer's special tokens, in llama.cpp's default order (unknown 0, begin 1, end 2).
_SPECIAL = ("<unk>", "<s>", "</s>")


class TinyLlama:
    """The shape of a tiny llama model: its vocabulary, layers, widths and the seed of its weights.

    ``init_std`` is the weights' standard deviation: wide enough that the next token's law depends
    on the prefix (logits of standard deviation about 1.5 at ``hidden=32``)."""

    def __init__(
        self,
        *,
        vocab_size: int = 6,
        layers: int = 2,
        hidden: int = 32,
        heads: int = 2,
        context: int = 128,
        seed: int = 0,
        init_std: float = 0.25,
    ) -> None:
        if not len(_SPECIAL) < vocab_size <= len(_SPECIAL) + len(string.ascii_lowercase):
            raise ValueError(f"vocab_size must be in ({len(_SPECIAL)}, {len(_SPECIAL) + 26}], got {vocab_size}")
        if hidden % heads:
            raise ValueError(f"hidden ({hidden}) must be a multiple of heads ({heads})")
        self.vocab_size, self.layers, self.hidden, self.heads = vocab_size, layers, hidden, heads
        self.context, self.seed, self.init_std = context, seed, init_std

    @property
    def tokens(self) -> list[str]:
        """The vocabulary: the special tokens, then one lowercase letter a token."""
        return [*_SPECIAL, *string.ascii_lowercase[: self.vocab_size - len(_SPECIAL)]]

    @property
    def key(self) -> str:
        """What names the file: every field, hashed (the same shape and seed, the same file)."""
        fields = (self.vocab_size, self.layers, self.hidden, self.heads, self.context, self.seed, self.init_std)
        return hashlib.sha256(repr(fields).encode()).hexdigest()[:16]

    def weights(self) -> dict[str, np.ndarray]:
        """The tensors by their GGUF names, float32, shaped as PyTorch's ``[out, in]`` (the writer
        reverses them into ggml's order); norms are ones."""
        rng = np.random.default_rng(self.seed)
        hidden, ffn = self.hidden, 2 * self.hidden

        def dense(rows: int, columns: int) -> np.ndarray:
            return (self.init_std * rng.standard_normal((rows, columns))).astype(np.float32)

        tensors = {"token_embd.weight": dense(self.vocab_size, hidden)}
        for layer in range(self.layers):
            block = f"blk.{layer}."
            tensors |= {
                block + "attn_norm.weight": np.ones(hidden, dtype=np.float32),
                block + "attn_q.weight": dense(hidden, hidden),
                block + "attn_k.weight": dense(hidden, hidden),
                block + "attn_v.weight": dense(hidden, hidden),
                block + "attn_output.weight": dense(hidden, hidden),
                block + "ffn_norm.weight": np.ones(hidden, dtype=np.float32),
                block + "ffn_gate.weight": dense(ffn, hidden),
                block + "ffn_up.weight": dense(ffn, hidden),
                block + "ffn_down.weight": dense(hidden, ffn),
            }
        tensors |= {
            "output_norm.weight": np.ones(hidden, dtype=np.float32),
            "output.weight": dense(self.vocab_size, hidden),
        }
        return tensors

    def write(self, path: Path) -> None:
        """Write the model to ``path`` (its metadata, its vocabulary, its weights)."""
        gguf = import_library("gguf", adapter="llama.cpp", install=_INSTALL)
        writer = gguf.GGUFWriter(str(path), "llama")
        writer.add_name(f"specverify tiny llama {self.key}")
        writer.add_context_length(self.context)
        writer.add_embedding_length(self.hidden)
        writer.add_block_count(self.layers)
        writer.add_feed_forward_length(2 * self.hidden)
        writer.add_head_count(self.heads)
        writer.add_head_count_kv(self.heads)
        writer.add_rope_dimension_count(self.hidden // self.heads)
        writer.add_layer_norm_rms_eps(1e-5)
        writer.add_vocab_size(self.vocab_size)
        writer.add_file_type(gguf.LlamaFileType.ALL_F32)
        writer.add_tokenizer_model("llama")
        writer.add_token_list(self.tokens)
        writer.add_token_scores([0.0] * self.vocab_size)
        special = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
        writer.add_token_types(special + [gguf.TokenType.NORMAL] * (self.vocab_size - len(special)))
        writer.add_unk_token_id(0)
        writer.add_bos_token_id(1)
        writer.add_eos_token_id(2)
        writer.add_add_bos_token(False)
        for name, tensor in self.weights().items():
            writer.add_tensor(name, tensor)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()


def tiny_llama_gguf(model: TinyLlama | None = None, directory: str | os.PathLike[str] | None = None) -> Path:
    """The GGUF file of ``model`` (default :class:`TinyLlama`), written once into ``directory``
    (default a ``specverify-gguf`` folder of the system's temporary directory) and reused after:
    written to a temporary name and renamed, so processes that race for it each see a whole file."""
    model = model or TinyLlama()
    folder = Path(directory) if directory is not None else Path(tempfile.gettempdir()) / "specverify-gguf"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"tiny-llama-{model.key}.gguf"
    if not path.exists():
        handle, partial = tempfile.mkstemp(dir=folder, suffix=".gguf.partial")
        os.close(handle)
        try:
            model.write(Path(partial))
            os.replace(partial, path)
        finally:
            if os.path.exists(partial):
                os.unlink(partial)
    return path
