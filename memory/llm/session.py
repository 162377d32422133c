"""`LLMSession`: an LLM bound to one job (a reply or a session close) and its trace.

Every step calls the LLM through it: transient errors are retried under one policy (below), JSON
answers are parsed, repaired and validated, a step that cannot get a good answer falls back on a
safe default, and every call is recorded in the trace.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from ..errors import LLMError, TransientLLMError
from ..text import clean_obj, clean_text
from ..tokens import count_tokens
from ..trace import LLMCall, Trace
from . import window as win
from .answers import parse_json
from .base import LLM, Completion
from .reasoning import ReasoningPiece, ThinkFilter, split_reasoning

T = TypeVar("T")

# A server may ask us to wait (Retry-After). Up to this many seconds we do; beyond it the user gets a
# clear error at once rather than a turn that hangs for minutes.
MAX_RETRY_AFTER = 30.0


@dataclass
class Repaired:
    """Returned by a validator whose answer was usable only after mending: the call is marked "repaired"."""

    value: Any


class LLMSession:
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

    # --- the one retry policy -------------------------------------------------------------------
    def _wait(self, state: RetryCallState) -> float:
        """The server's Retry-After when it gave one, else full-jitter exponential backoff."""
        exc = state.outcome.exception() if state.outcome else None
        after = getattr(exc, "retry_after", None)
        if after is not None:
            return float(after)
        return random.uniform(0, self.backoff * 2 ** (state.attempt_number - 1))

    def _retried(self, call: LLMCall, fn: Callable[[], T]) -> T:
        """fn() with transient errors retried; a wait longer than MAX_RETRY_AFTER is an error at once."""

        def before_sleep(state: RetryCallState) -> None:
            call.status, call.detail = "retried", str(state.outcome.exception() if state.outcome else "")

        def attempt() -> T:
            try:
                return fn()
            except TransientLLMError as e:
                call.detail = str(e)
                if e.retry_after is not None and e.retry_after > MAX_RETRY_AFTER:
                    raise LLMError(f"the LLM server asks to wait {e.retry_after:.0f} s; try again later") from e
                raise

        retrying = Retrying(
            retry=retry_if_exception(lambda e: isinstance(e, TransientLLMError)),
            stop=stop_after_attempt(self.max_retries + 1),
            wait=self._wait,
            sleep=self.sleep,
            before_sleep=before_sleep,
            reraise=True,
        )
        return retrying(attempt)

    # --- the context window ---------------------------------------------------------------------
    @property
    def window(self) -> int:
        """Tokens the model reads and writes per call (LLMConfig.n_ctx, given by the backend)."""
        return int(getattr(self.llm, "context_window", 0) or win.DEFAULT_WINDOW)

    @property
    def summary_part_tokens(self) -> int:
        """Dialogue tokens per summary call the backend asks for (LLMConfig.summary_part_tokens); 0: no preference."""
        return int(getattr(self.llm, "summary_part_tokens", 0) or 0)

    def count(self, text: str) -> int:
        """Tokens of `text` for this model: exact when the backend has its tokenizer, else estimated."""
        exact = getattr(self.llm, "count_tokens", None)
        return int(exact(text)) if exact is not None else win.estimated(text)

    def prompt_tokens(self, messages: list[dict]) -> int:
        return win.messages_tokens(messages, self.count)

    def room(self, max_tokens: int) -> int:
        """Prompt tokens left once an answer of `max_tokens` is provided for."""
        return self.window - max_tokens - win.RESERVE

    def fits(self, messages: list[dict], max_tokens: int) -> bool:
        return self.prompt_tokens(messages) <= self.room(max_tokens)

    def _over_window(self, messages: list[dict], max_tokens: int) -> str:
        n = self.prompt_tokens(messages)
        if n <= self.room(max_tokens):
            return ""
        return f"the prompt ({n} tokens) and answer ({max_tokens}) do not fit the {self.window}-token context window"

    # --- calls ------------------------------------------------------------------------------------
    def _start(self, purpose: str) -> LLMCall:
        call = LLMCall(purpose)
        self.trace.llm_calls.append(call)
        return call

    def text(self, purpose: str, messages: list[dict], max_tokens: int = 512) -> str:
        call = self._start(purpose)
        if over := self._over_window(messages, max_tokens):
            call.status, call.detail = "error", over
            raise LLMError(over)
        t0 = time.perf_counter()
        try:
            c = self._retried(
                call,
                lambda: self.llm.chat(messages, temperature=self.temperature, max_tokens=max_tokens, purpose=purpose),
            )
        except LLMError as e:
            call.status, call.detail = "error", str(e)
            raise
        finally:
            call.seconds = time.perf_counter() - t0
        call.prompt_tokens, call.completion_tokens = c.prompt_tokens, c.completion_tokens
        return clean_text(self._answer(call, c))

    def json(
        self,
        purpose: str,
        messages: list[dict],
        schema: dict,
        validate: Callable[[Any], Any],
        fallback: Callable[[], Any],
        max_tokens: int = 512,
        attempts: int | None = None,
        parse: Callable[[str], tuple[Any, bool]] = parse_json,
        fallback_note: str = "",
        temperature: float | None = None,
    ) -> Any:
        """Ask for JSON, parse (`parse(text) -> (value, repaired)`), validate; after `attempts` bad answers
        return `fallback()` (default attempts: the backend's `json_attempts`, else 2).

        `validate` returns the cleaned value (or `Repaired(value)`) or raises ValueError. Never raises:
        an LLM that is down also leads to the fallback, recorded in the trace with `fallback_note`.
        """
        call = self._start(purpose)
        attempts = attempts or int(getattr(self.llm, "json_attempts", 2))
        temp = self.temperature if temperature is None else temperature
        t0 = time.perf_counter()

        def ask() -> Completion:
            return self.llm.chat(messages, temperature=temp, max_tokens=max_tokens, json_schema=schema, purpose=purpose)

        def fall_back(why: str) -> Any:
            call.status = "fallback"
            call.detail = "; ".join(x for x in (why, fallback_note) if x)
            return fallback()

        try:
            if over := self._over_window(messages, max_tokens):  # never sent: the server would refuse it
                return fall_back(over)
            for attempt in range(attempts):
                try:
                    c = self._retried(call, ask)
                except LLMError as e:
                    return fall_back(f"LLM unavailable: {e}")
                call.prompt_tokens += c.prompt_tokens
                call.completion_tokens += c.completion_tokens
                try:
                    raw, repaired = parse(clean_text(self._answer(call, c)))
                    value = validate(clean_obj(raw))
                except (ValueError, TypeError, KeyError) as e:
                    call.detail = f"attempt {attempt + 1}: invalid answer: {e}"
                    continue
                if isinstance(value, Repaired):
                    value, repaired = value.value, True
                if repaired and call.status == "ok":
                    call.status = "repaired"
                return value
            return fall_back(call.detail)
        finally:
            call.seconds = time.perf_counter() - t0

    @staticmethod
    def _answer(call: LLMCall, c: Completion) -> str:
        """The answer without a reasoning model's thinking, which goes to the trace."""
        answer, thoughts = split_reasoning(c.text)
        call.reasoning = "\n".join(t for t in (call.reasoning, c.reasoning, thoughts) if t)
        return answer

    def stream(
        self, purpose: str, messages: list[dict], max_tokens: int = 256, empty_retries: int = 1
    ) -> Iterator[str]:
        """Stream reply text. Transient errors are retried only before the first chunk; a stream cut
        later raises LLMError. An answer with no visible text is asked again `empty_retries` times
        with another seed (small models sometimes end their turn at once); still empty, it returns
        nothing and the caller decides. Leading whitespace is held back until text arrives."""
        call = self._start(purpose)
        t0 = time.perf_counter()
        out: list[str] = []
        max_tokens = min(max_tokens, self.window // 2)  # a small window still leaves room for the prompt
        messages, cut = win.fit_messages(messages, self.room(max_tokens), self.count)
        if cut:
            self.trace.notice(f"To fit the model's {self.window}-token context window, left out: {'; '.join(cut)}.")
        try:
            for empty_try in range(empty_retries + 1):
                seed = None if empty_try == 0 else 7919 * empty_try  # another seed, the same on every run
                held: list[str] = []
                for piece in self._stream_once(call, purpose, messages, max_tokens, seed):
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
        self, call: LLMCall, purpose: str, messages: list[dict], max_tokens: int, seed: int | None
    ) -> Iterator[str]:
        """One streamed answer. Opening the stream and its first piece go through the retry policy;
        an error after that cuts the reply (it cannot be taken back from the page)."""
        kw: dict[str, Any] = {"temperature": self.temperature, "max_tokens": max_tokens, "purpose": purpose}
        if seed is not None:
            kw["seed"] = seed

        def open_stream() -> tuple[str | None, Iterator[str]]:
            pieces = iter(self.llm.stream(messages, **kw))
            return next(pieces, None), pieces

        try:
            first, rest = self._retried(call, open_stream)
        except LLMError as e:
            call.status, call.detail = "error", str(e)
            raise
        if first is None:
            return
        think = ThinkFilter()

        def visible(piece: str) -> str:
            if isinstance(piece, ReasoningPiece):
                think.reasoning.append(piece)
                return ""
            return think.feed(clean_text(piece))

        try:
            if text := visible(first):
                yield text
            for piece in rest:
                if text := visible(piece):
                    yield text
            if text := think.finish():
                yield text
        except LLMError as e:
            call.status, call.detail = "error", str(e)
            raise LLMError(f"the reply was cut off: {e}") from e
        finally:
            if think.thoughts:
                call.reasoning = "\n".join(t for t in (call.reasoning, think.thoughts) if t)
