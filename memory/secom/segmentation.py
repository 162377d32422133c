"""Topic segmentation of a session into runs of exchanges (exchanges.py): the protocol, and the one assembly.

Implementations: `EmbeddingSegmenter` (offline default and fallback, `embedding_segmenter.py`) and
`LLMSegmenter` (SeCom's zero-shot LLM segmentation, `llm_segmenter.py`); answers are read and repaired
in `segment_answers.py`, the embedding segmenter is fitted by bench/secom/segmenter_fit.py.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from .embedding_segmenter import EmbeddingSegmenter, SegParams
from .exchanges import Exchange
from .llm_segmenter import LLMSegmenter
from .segment_answers import Segment, is_valid_cover, parse_and_repair, repair_segments

if TYPE_CHECKING:
    from ..llm import LLMSession
    from ..settings import Settings

__all__ = [
    "Segment",
    "Segmenter",
    "is_valid_cover",
    "make_segmenter",
    "parse_and_repair",
    "repair_segments",
    "segmenter_for",
]


class Segmenter(Protocol):
    name: str

    @property
    def params(self) -> SegParams:
        """The offline segmentation's parameters (an LLM segmenter's: its fallback's)."""
        ...

    def segment(self, exchanges: Sequence[Exchange], llm: LLMSession | None = None) -> list[Segment]:
        """(start, end, summary) segments covering every exchange once, in order. `llm` is the job's LLM
        session, or None where no LLM step may run (offline)."""
        ...

    def fingerprint(self, llm: LLMSession | None) -> list:
        """What the segments depend on (a build made with another fingerprint is redone)."""
        ...


def make_segmenter(kind: str, embedder, params: SegParams | None = None, rubric: str = "", **overrides) -> Segmenter:
    """The one place a segmenter is assembled: "embedding", or "llm" (with the embedding one as its fallback).
    `overrides` set embedding-segmenter parameters (e.g. max_len)."""
    offline = EmbeddingSegmenter(embedder, params, **overrides)
    if kind == "embedding":
        return offline
    if kind == "llm":
        return LLMSegmenter(offline, rubric)
    raise ValueError(f"unknown segmenter {kind!r}: embedding or llm")


def segmenter_for(settings: Settings, embedder, kind: str | None = None, **overrides) -> Segmenter:
    """The segmenter the settings name (fitted parameters and learned rubric included)."""
    params = None
    if settings.segmenter_params:
        params = SegParams.from_dict(json.loads(Path(settings.segmenter_params).read_text())["params"])
    return make_segmenter(kind or settings.segmenter, embedder, params, settings.rubric_text(), **overrides)
