"""LLM backends behind one small protocol (`base`), and the call helper every step uses (`session`).

Backends: any OpenAI-compatible server (`openai_chat`) and an embedded llama.cpp model
(`llamacpp_chat`). `make_llm` is the one place a backend is built from settings; the agent and the
benchmarks take a factory, so tests pass their own.
"""

from __future__ import annotations

import threading

from ..settings import LLMConfig
from .answers import parse_json
from .base import LLM, Completion
from .bundled import bundled_gguf_path
from .llamacpp_chat import LlamaCppChat
from .openai_chat import PURPOSE_HEADER, OpenAIChat
from .session import MAX_RETRY_AFTER, LLMSession, Repaired

__all__ = [
    "LLM",
    "MAX_RETRY_AFTER",
    "PURPOSE_HEADER",
    "Completion",
    "LLMSession",
    "LlamaCppChat",
    "OpenAIChat",
    "Repaired",
    "bundled_gguf_path",
    "make_llm",
    "parse_json",
]

_cache: dict[LLMConfig, LLM] = {}
_cache_lock = threading.Lock()


def make_llm(cfg: LLMConfig) -> LLM:
    """One client per configuration, shared by all users (the embedded model loads once)."""
    with _cache_lock:
        if cfg not in _cache:
            _cache[cfg] = LlamaCppChat(cfg) if cfg.backend == "embedded" else OpenAIChat(cfg)
        return _cache[cfg]
