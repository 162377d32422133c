"""`LLMSession`: an LLM bound to one job (a reply or a session close) and its trace.

Every step calls the LLM through it: transient errors are retried under one policy (below), JSON
answers are parsed, repaired and validated, a step that cannot get a good answer falls back on a
safe default, and every call is recorded in the trace.
"""

from __future__ import annotations

import contextlib
import random
import time
import weakref
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

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


@dataclass
class Reading:
    """What the model reads before its first token: the prompt's tokens, how many of them it has already
    read (llama.cpp keeps the previous call's tokens: a shared prefix is not read again) and the
    seconds the rest should take (None until the backend's reading speed is known)."""

    tokens: int
    cached: int = 0
    seconds: float | None = None

    @property
    def new(self) -> int:
        return max(0, self.tokens - self.cached)

    def describe(self, what: str = "memory and dialogue") -> str:
        """E.g. "Reading 1,000 tokens of memory and dialogue, about 8 s…" (for the page while it waits)."""
        count = f"{self.new:,} new tokens" if self.cached else f"{self.new:,} tokens"
        text = f"Reading {count} of {what}"
        if self.cached:
            text += f" ({self.cached:,} already read)"
        if self.seconds is not None:
            text += ", under a second" if self.seconds < 1 else f", about {round(self.seconds):,} s"
        return text + "…"


class OpeningGuard(Protocol):
    """Judges a streamed answer's opening (memory.reply_prompts.RefusalGuard)."""

    def rejects(self, text: str) -> bool: ...

    def undecided(self, text: str) -> bool: ...


# An answer a guard rejected is asked again at least this warm: at temperature 0 it would come back the same.
GUARD_RETRY_TEMPERATURE = 0.7

# A backend's reading (prefill) speed, tokens per second, measured on its replies: a running average of
# prompt tokens over seconds to the first token. The embedded backend keeps its own (`prefill_tokens_per_s`,
# measured without the wait for its lock); an endpoint's includes the network and the server's queue.
READ_RATE_WEIGHT = 0.3  # the newest measurement's weight in the running average
MIN_TOKENS_TO_RATE = 64  # a shorter read is mostly fixed overhead: it does not update the speed
_read_rates: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()


def reading_rate(llm: Any) -> float | None:
    """Tokens per second `llm` reads a prompt at, as far as measured (None: not yet)."""
    own = getattr(llm, "prefill_tokens_per_s", None)
    if isinstance(own, (int, float)) and own > 0:
        return float(own)
    try:
        return _read_rates.get(llm)
    except TypeError:  # not weak-referenceable
        return None


def _observe_rate(llm: Any, tokens: int, seconds: float) -> None:
    if tokens < MIN_TOKENS_TO_RATE or seconds <= 0 or getattr(llm, "prefill_tokens_per_s", None) is not None:
        return
    try:
        old = _read_rates.get(llm)
        rate = tokens / seconds
        _read_rates[llm] = rate if old is None else (1 - READ_RATE_WEIGHT) * old + READ_RATE_WEIGHT * rate
    except TypeError:
        pass


class LLMSession:
    # Which memory steps a session close runs with this LLM (memory.steps_policy.StepPlan); None: every
    # step the caller gives it to.
    plan: Any = None

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

    def stream_room(self, max_tokens: int) -> int:
        """Prompt tokens left for a streamed reply of `max_tokens` (capped, as `stream` caps it)."""
        return self.room(min(max_tokens, self.window // 2))

    def reading(self, messages: list[dict], max_tokens: int = 256) -> Reading:
        """What `stream(messages, max_tokens)` will have the model read before its first token, and the
        time it should take: exact where the backend knows its tokens and cache (`reading`), else the
        prompt's estimated tokens; the time from the backend's measured reading speed."""
        messages, _ = win.fit_messages(messages, self.stream_room(max_tokens), self.count)
        tokens, cached = self.prompt_tokens(messages), 0
        exact = getattr(self.llm, "reading", None)
        if callable(exact):
            with contextlib.suppress(Exception):  # only an estimate: the reply goes on without it
                tokens, cached = exact(messages)
        rate = reading_rate(self.llm)
        return Reading(tokens, cached, (tokens - cached) / rate if rate else None)

    def prefill(self, messages: list[dict], max_tokens: int = 256) -> int:
        """Read the prompt of a reply to `messages` ahead of it, where the backend keeps what it read
        (llama.cpp: `LlamaCppChat.prefill`); the tokens read, 0 where the backend cannot."""
        messages, _ = win.fit_messages(messages, self.room(min(max_tokens, self.window // 2)), self.count)
        ahead = getattr(self.llm, "prefill", None)
        return int(ahead(messages)) if callable(ahead) else 0

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

    # --- label scoring ----------------------------------------------------------------------------
    @property
    def can_score(self) -> bool:
        """Whether the backend scores a fixed set of answers by log-probability (the embedded llama.cpp)."""
        return callable(getattr(self.llm, "label_probabilities", None))

    def label_probabilities(self, purpose: str, messages: list[dict], labels: list[str]) -> list[float]:
        """The probability of each of `labels` as the answer to `messages`, normalised over them (one
        evaluation of the prompt, no generation). Recorded in the trace, the probabilities in the
        call's detail; raises LLMError when the backend cannot score or the call fails."""
        call = self._start(purpose)
        score = getattr(self.llm, "label_probabilities", None)
        t0 = time.perf_counter()
        try:
            if score is None:
                raise LLMError("this backend cannot score labels")
            if over := self._over_window(messages, 8):
                raise LLMError(over)
            probs, evaluated = score(messages, labels)
        except LLMError as e:
            call.status, call.detail = "error", str(e)
            raise
        finally:
            call.seconds = time.perf_counter() - t0
        call.prompt_tokens = int(evaluated)
        call.detail = "probabilities: " + ", ".join(f"{lb} {p:.3f}" for lb, p in zip(labels, probs, strict=True))
        return [float(p) for p in probs]

    @staticmethod
    def _answer(call: LLMCall, c: Completion) -> str:
        """The answer without a reasoning model's thinking, which goes to the trace."""
        answer, thoughts = split_reasoning(c.text)
        call.reasoning = "\n".join(t for t in (call.reasoning, c.reasoning, thoughts) if t)
        return answer

    def stream(
        self,
        purpose: str,
        messages: list[dict],
        max_tokens: int = 256,
        empty_retries: int = 1,
        guard: OpeningGuard | None = None,
        guard_retries: int = 2,
    ) -> Iterator[str]:
        """Stream reply text. Transient errors are retried only before the first chunk; a stream cut
        later raises LLMError. An answer with no visible text is asked again `empty_retries` times
        with another seed (small models sometimes end their turn at once); still empty, it returns
        nothing and the caller decides. Leading whitespace is held back until text arrives.

        With a `guard` (reply_prompts.RefusalGuard), an answer whose opening it rejects (a small
        model's stock refusal of ordinary chat) is stopped and asked again, up to `guard_retries`
        times, with another seed and at least GUARD_RETRY_TEMPERATURE; the last try is shown as it
        comes. Only an opening that could still be rejected is held back: others stream at once."""
        call = self._start(purpose)
        t0 = time.perf_counter()
        out: list[str] = []
        max_tokens = min(max_tokens, self.window // 2)  # a small window still leaves room for the prompt
        messages, cut = win.fit_messages(messages, self.room(max_tokens), self.count)
        if cut:
            self.trace.notice(f"To fit the model's {self.window}-token context window, left out: {'; '.join(cut)}.")
        first, tries, empty, refused = True, 0, 0, 0
        try:
            while True:
                seed = None if tries == 0 else 7919 * tries  # another seed, the same on every run
                temperature = self.temperature if not refused else max(self.temperature, GUARD_RETRY_TEMPERATURE)
                check = guard if refused < guard_retries else None
                tries += 1
                held: list[str] = []
                rejected = ""
                pieces = self._stream_once(call, purpose, messages, max_tokens, seed, temperature)
                try:
                    for piece in pieces:
                        if first:  # the model has read the prompt
                            first = False
                            _observe_rate(self.llm, self.prompt_tokens(messages), time.perf_counter() - t0)
                        if out:
                            out.append(piece)
                            yield piece
                            continue
                        held.append(piece)
                        opening = "".join(held)
                        if not opening.strip():
                            continue
                        if check is not None:
                            if check.rejects(opening):
                                rejected = opening
                                break
                            if check.undecided(opening):
                                continue
                        out.append(opening)
                        yield opening
                finally:
                    pieces.close()  # a stopped answer lets go of the model at once
                opening = "".join(held)
                if not out and not rejected and opening.strip():  # the whole answer was held back
                    if check is not None and check.rejects(opening):
                        rejected = opening
                    else:
                        out.append(opening)
                        yield opening
                if out:
                    break
                if rejected:
                    refused += 1
                    self.trace.count(f"{purpose}_refusals_retried", 1)
                    call.status, call.detail = "retried", f"refused: {rejected.strip()[:80]}"
                else:
                    empty += 1
                    call.status, call.detail = "retried", "empty answer"
                    if empty > empty_retries:
                        break
        finally:
            call.seconds = time.perf_counter() - t0
            call.prompt_tokens = sum(count_tokens(m["content"]) for m in messages)
            call.completion_tokens = count_tokens("".join(out))

    def _stream_once(
        self,
        call: LLMCall,
        purpose: str,
        messages: list[dict],
        max_tokens: int,
        seed: int | None,
        temperature: float | None = None,
    ) -> Generator[str, None, None]:
        """One streamed answer. Opening the stream and its first piece go through the retry policy;
        an error after that cuts the reply (it cannot be taken back from the page)."""
        temp = self.temperature if temperature is None else temperature
        kw: dict[str, Any] = {"temperature": temp, "max_tokens": max_tokens, "purpose": purpose}
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
            if close := getattr(rest, "close", None):  # an answer stopped early lets go of the model now
                close()
            if think.thoughts:
                call.reasoning = "\n".join(t for t in (call.reasoning, think.thoughts) if t)
