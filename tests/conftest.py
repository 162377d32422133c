"""Shared test parts: deterministic fakes written by hand (no mock patching) and real local parts."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from memory.errors import TransientLLMError
from memory.llm import Completion

ROOT = Path(__file__).resolve().parent.parent

SHARED_DATA = ROOT.parent / "shared" / "data"

# The browser and running-app fixtures live in ui_fixtures; registering it here shares them with every test.
pytest_plugins = ["tests.ui_fixtures"]


class ScriptedLLM:
    """Answers from a script: a list of strings, exceptions, or callables(messages) -> str, in turn.

    When the script runs out it repeats its last entry. Records every prompt.
    """

    def __init__(self, *script):
        self.script = list(script) or ["ok"]
        self.prompts: list[list[dict]] = []

    def _next(self, messages):
        self.prompts.append(messages)
        item = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(item, BaseException):
            raise item
        if callable(item):
            item = item(messages)
        return item if isinstance(item, str) else json.dumps(item)

    def chat(self, messages, *, temperature, max_tokens, json_schema=None, purpose=""):
        return Completion(self._next(messages), 10, 5)

    def stream(self, messages, *, temperature, max_tokens, seed=None, purpose=""):
        text = self._next(messages)
        for i in range(0, len(text), 4):
            yield text[i : i + 4]


class HashEmbedder:
    """Bag-of-words hashed into 256 dims: texts sharing words are similar. Fast and deterministic."""

    name = "hash-256"

    def embed(self, texts):
        out = np.zeros((len(texts), 256), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"[a-z]{3,}", t.lower()):
                out[i, hash_word(w) % 256] += 1.0
        out += 1e-3
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def hash_word(w: str) -> int:
    h = 2166136261
    for ch in w.encode():
        h = ((h ^ ch) * 16777619) & 0xFFFFFFFF
    return h


@pytest.fixture
def fake_embedder():
    return HashEmbedder()


@pytest.fixture
def chroma_store(tmp_path):
    from memory.store import VectorStore

    return VectorStore(path=tmp_path / "chroma")


@pytest.fixture(scope="session")
def minilm():
    from memory.embeddings import make_embedder

    return make_embedder("minilm")


@pytest.fixture
def transient():
    return TransientLLMError("503 from the scripted server")
