"""Any OpenAI-compatible server (OpenAI, Ollama, vLLM, llama.cpp's server, Hugging Face router)."""

from __future__ import annotations

import re
import time
from email.utils import parsedate_to_datetime
from typing import Any

from ..errors import LLMError, TransientLLMError
from ..settings import LLMConfig
from ..text import redact, register_secret
from .base import Completion
from .reasoning import ReasoningPiece

PURPOSE_HEADER = "X-Memory-Purpose"
# Statuses with which a server says it does not know a request field; the answer's text must also name
# the field (below), so that an outage's 500 is never taken for a refusal and stays a retried error.
_REFUSAL_STATUSES = {400, 404, 415, 422, 500}
_NAMES_THE_FORMAT = re.compile(r"json_schema|json_object|response_format", re.I)


def retry_after_seconds(headers: Any) -> float | None:
    """The Retry-After header (seconds or an HTTP date) as seconds from now, if present and readable."""
    value = headers.get("retry-after") if headers is not None else None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _reasoning(message: Any) -> str:
    """The `reasoning_content` a reasoning model's server sends beside the answer (not in the schema)."""
    value = getattr(message, "reasoning_content", None) or (getattr(message, "model_extra", None) or {}).get(
        "reasoning_content"
    )
    return value if isinstance(value, str) else ""


def _schema_name(purpose: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", purpose or "answer")[:64]


class OpenAIChat:
    """JSON steps ask for structured output (`json_schema`, named after the step); a server that refuses
    it is asked once more with `json_object` and kept to that from then on."""

    def __init__(self, cfg: LLMConfig):
        import openai

        self._openai = openai
        register_secret(cfg.api_key)  # some servers echo the key in their errors: redacted everywhere
        self.model = cfg.model
        self.context_window = cfg.n_ctx  # LLM_CONTEXT_WINDOW: the server's, which it does not tell
        self.summary_part_tokens = cfg.summary_part_tokens  # 0: the summary step's default
        self.structured_outputs = True
        http_client = None
        if cfg.guard_url:  # a URL a user typed: no request to loopback, private or metadata addresses
            from ..url_guard import guarded_http_client

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
        if err is not e:
            err.args = (redact(str(err)),)
        return err

    def _classify(self, e: Exception) -> Exception:
        o = self._openai
        from ..url_guard import UnsafeURL

        refused = e if isinstance(e, UnsafeURL) else e.__cause__
        if isinstance(refused, UnsafeURL):  # refused by the guard: nothing was sent, retrying cannot help
            return LLMError(f"the base URL was refused: {refused}")
        wait = retry_after_seconds(getattr(getattr(e, "response", None), "headers", None))
        if isinstance(e, (o.RateLimitError, o.APITimeoutError, o.APIConnectionError, o.InternalServerError)):
            message = getattr(e, "message", "") or "temporary failure"
            return TransientLLMError(f"{type(e).__name__}: {message}", retry_after=wait)
        if isinstance(e, o.APIStatusError) and e.status_code >= 500:
            return TransientLLMError(f"server error {e.status_code}", retry_after=wait)
        if isinstance(e, o.APIError):
            return LLMError(f"{type(e).__name__}: {getattr(e, 'message', '')}")
        return e

    def _refuses_structured_outputs(self, e: Exception) -> bool:
        status = getattr(e, "status_code", None)
        # The client's message holds only the body's "message" field; a validator's 422 ({"detail": [...]})
        # names the field in the body alone.
        text = f"{e} {getattr(e, 'body', '')}"
        return status in _REFUSAL_STATUSES and bool(_NAMES_THE_FORMAT.search(text))

    def _create(self, purpose: str, **kw: Any) -> Any:
        headers = {PURPOSE_HEADER: purpose} if purpose else None
        return self.client.chat.completions.create(model=self.model, extra_headers=headers, **kw)

    def _create_json(self, purpose: str, schema: dict, kw: dict[str, Any]) -> Any:
        if self.structured_outputs:
            fmt = {"type": "json_schema", "json_schema": {"name": _schema_name(purpose), "schema": schema}}
            try:
                return self._create(purpose, response_format=fmt, **kw)
            except self._openai.APIStatusError as e:
                if not self._refuses_structured_outputs(e):
                    raise
                self.structured_outputs = False
        return self._create(purpose, response_format={"type": "json_object"}, **kw)

    def chat(self, messages, *, temperature, max_tokens, json_schema=None, purpose=""):
        kw: dict[str, Any] = {"messages": messages, "temperature": temperature, "max_tokens": max_tokens}
        try:
            r = self._create(purpose, **kw) if json_schema is None else self._create_json(purpose, json_schema, kw)
        except Exception as e:
            raise self._wrap(e) from e
        if not r.choices:
            raise TransientLLMError("empty answer (no choices)")
        message = r.choices[0].message
        text = message.content or ""
        u = r.usage
        return Completion(
            text, getattr(u, "prompt_tokens", 0) or 0, getattr(u, "completion_tokens", 0) or 0, _reasoning(message)
        )

    def stream(self, messages, *, temperature, max_tokens, seed=None, purpose=""):
        kw: dict[str, Any] = {} if seed is None else {"seed": seed}
        try:
            s = self._create(
                purpose, messages=messages, temperature=temperature, max_tokens=max_tokens, stream=True, **kw
            )
            finished = False
            for chunk in s:
                if not chunk.choices:
                    continue
                c = chunk.choices[0]
                finished = finished or c.finish_reason is not None
                if c.delta and (thinking := _reasoning(c.delta)):
                    yield ReasoningPiece(thinking)
                if c.delta and c.delta.content:
                    yield c.delta.content
        except Exception as e:
            raise self._wrap(e) from e
        if not finished:  # OpenAI-compatible servers end a complete stream with a finish_reason
            raise TransientLLMError("the stream ended before the answer was finished")
