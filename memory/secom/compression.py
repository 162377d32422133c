"""Segment compression (SeCom's denoising step) behind a small protocol.

LLMLingua-2 keeps the tokens a token classifier judges informative. In SeCom
the compressed text is only the *retrieval key*; the reply reads the original.
`rate` is LLMLingua's: the fraction of tokens KEPT (0.9 keeps nine tenths).

The defaults (memory/settings.py) are SeCom's official ones: the model
`microsoft/llmlingua-2-xlm-roberta-large-meetingbank` at rate 0.9. It has 560M
parameters against the bert-base multilingual model's 180M and ran 3.0 times
slower per 512-token chunk on a 2-core CPU here (random weights of each
architecture: the hub is unreachable); it compresses when a session closes,
in the background memory build, not on a reply's path. COMPRESSOR_MODEL and
SECOM_COMPRESSION_RATE choose another.

`load_compressor(model_name)` never raises: offline, or without the model, it
returns (None, reason) and SeCom uses the original text as the key (and says
so in the trace).
"""

from __future__ import annotations

import os
import re
import threading
from typing import Protocol

from ..hub import configure_hub_access

# SeCom's official list is ["\n", ".", "[human]", "[bot]"]: its lines start with role tags. This project's
# lines start with "Speaker: " (see secom.exchanges.exchange_lines), so the markers forced here are the
# speakers' own names with their colon, found in each text: compression never drops who said what.
FORCE_TOKENS = ["\n", "."]
_SPEAKER = re.compile(r"^([^:\n]{1,40}):\s", re.M)
MAX_FORCED = 90  # LLMLingua-2 has 100 placeholder tokens for multi-piece forced tokens


def force_tokens(text: str) -> list[str]:
    """The tokens LLMLingua-2 must keep in `text`: line breaks, full stops and each "Speaker:" marker."""
    speakers = list(dict.fromkeys(m.group(1).strip() + ":" for m in _SPEAKER.finditer(text or "")))
    return FORCE_TOKENS + [s for s in speakers if s != ":"][:MAX_FORCED]


class Compressor(Protocol):
    name: str

    def compress(self, texts: list[str], rate: float) -> list[str]:
        """One compressed text per input text; `rate` = fraction of tokens kept."""
        ...


class LLMLingua2Compressor:
    """LLMLingua-2 (`llmlingua.PromptCompressor(..., use_llmlingua2=True)`) on the CPU.

    Each text (a segment) is compressed on its own, its lines (exchanges or
    turns) given as LLMLingua's context list, as SeCom does:
    `compress_prompt(lines, rate=rate, use_context_level_filter=False,
    force_tokens=...)`, with the force tokens naming this text's speakers
    (`force_tokens`).
    """

    def __init__(self, model_name: str):
        from ..tokens import ensure_offline_tiktoken

        ensure_offline_tiktoken()  # LLMLingua builds a tiktoken encoder at construction
        configure_hub_access()
        from llmlingua import PromptCompressor

        self.model_name = model_name
        self.name = f"llmlingua-2:{os.path.basename(model_name.rstrip('/')) or model_name}"
        self._pc = PromptCompressor(model_name=model_name, use_llmlingua2=True, device_map="cpu")
        self._lock = threading.Lock()  # one model, one inference at a time

    def compress(self, texts: list[str], rate: float) -> list[str]:
        rate = float(rate)
        out = []
        for text in texts:
            lines = [ln for ln in (text or "").split("\n") if ln.strip()]
            if rate >= 1.0 or not lines:
                out.append(text or "")
                continue
            with self._lock:
                r = self._pc.compress_prompt(
                    lines, rate=rate, use_context_level_filter=False, force_tokens=force_tokens(text)
                )
            parts = r.get("compressed_prompt_list") or [r.get("compressed_prompt", "")]
            key = "\n".join(" ".join(p.split()) for p in parts if p and p.strip())
            out.append(key if key.strip() else text)
        return out


class IdentityCompressor:
    """Keeps the text as it is (compression off)."""

    name = "none"

    def compress(self, texts: list[str], rate: float) -> list[str]:
        return list(texts)


_cache: dict[str, tuple[Compressor | None, str]] = {}
_lock = threading.Lock()


def load_compressor(model_name: str) -> tuple[Compressor | None, str]:
    """(compressor, "") when the model loads, else (None, why). Never raises; loads each model once."""
    if not model_name:
        return None, "compression is off (no compressor model configured); segment keys are the original text"
    with _lock:
        if model_name in _cache:
            return _cache[model_name]
        try:
            result: tuple[Compressor | None, str] = (LLMLingua2Compressor(model_name), "")
        except ImportError as e:
            result = (
                None,
                f"compression unavailable: llmlingua is not installed ({e}); segment keys are the original text",
            )
        except Exception as e:
            msg = " ".join(str(e).split())[:300]
            if not configure_hub_access():
                msg = "the model hub cannot be reached and the model is not in the local cache"
            result = (
                None,
                f"compression unavailable: could not load {model_name} ({type(e).__name__}: {msg}); "
                "segment keys are the original text",
            )
        _cache[model_name] = result
        return result
