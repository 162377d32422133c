"""SeCom's segmentation by an LLM (the official zero-shot instruction, plus a rubric where one is
set): validated, repaired, and falling back to embeddings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..llm import LLMSession, Repaired
from .embedding_segmenter import EmbeddingSegmenter, SegParams, extractive_summary
from .exchanges import Exchange, exchange_lines
from .prompts import SEGMENTATION_SCHEMA, format_exchanges, segmentation_messages
from .segment_answers import Segment, parse_segmentation, repair_segments


class LLMSegmenter:
    """Asks the LLM for SeCom's segmentation of a session's exchanges ("[Exchange i]: ..." lines).

    `rubric`: optional plain-text guidance, inserted as quoted data. `fallback` segments when there is
    no LLM for this job, or it is down, or it answers badly twice.
    """

    name = "llm"

    def __init__(self, fallback: EmbeddingSegmenter, rubric: str = ""):
        self.fallback = fallback
        self.rubric = rubric or ""

    @property
    def params(self) -> SegParams:
        return self.fallback.params

    def fingerprint(self, llm: LLMSession | None) -> list:
        return ["llm", self.rubric] if llm is not None else self.fallback.fingerprint(None)

    def segment(self, exchanges: Sequence[Exchange], llm: LLMSession | None = None) -> list[Segment]:
        """Segments as (start, end, summary), always a valid cover of the exchanges. A session too long
        for one call within the context window is segmented in consecutive parts (a part's end is
        then a segment boundary)."""
        if llm is None:
            return self.fallback.segment(exchanges)
        texts = self._whole_or_cut(llm, [exchange_lines(ex) for ex in exchanges])
        out: list[Segment] = []
        for lo, hi in self._parts(llm, texts):
            out += [(s + lo, e + lo, t) for s, e, t in self._segment_part(llm, exchanges[lo:hi], texts[lo:hi])]
        return out

    @staticmethod
    def _answer(n: int) -> int:
        return min(4096, 200 + 60 * n)

    def _whole_or_cut(self, llm: LLMSession, texts: list[str]) -> list[str]:
        """Each exchange whole, as the official code passes it; one too long for the window on its own
        (with the prompt and the answer two exchanges need) is cut to fit, and the trace says so."""
        room = llm.room(self._answer(2)) - llm.prompt_tokens(segmentation_messages([], self.rubric)) - 8
        cut = [i for i, t in enumerate(texts) if llm.count(t) > room]
        for i in cut:
            while texts[i] and llm.count(texts[i]) > room:
                texts[i] = texts[i][: int(len(texts[i]) * 0.9)]
        if cut:
            llm.trace.notice(
                f"segmentation: {len(cut)} of {len(texts)} exchanges were cut to fit the {llm.window}-token "
                f"window (exchange {', '.join(map(str, cut[:8]))})"
            )
        return texts

    def _parts(self, llm: LLMSession, texts: list[str]) -> list[tuple[int, int]]:
        """[start, end) runs of exchanges whose prompt and answer fit the context window."""
        base = llm.prompt_tokens(segmentation_messages([], self.rubric))
        out, lo, used = [], 0, 0
        for i, t in enumerate(texts):
            n = llm.count(format_exchanges([t])) + 2
            if i > lo and base + used + n > llm.room(self._answer(i + 1 - lo)):
                out.append((lo, i))
                lo, used = i, 0
            used += n
        return [*out, (lo, len(texts))] if texts else out

    def _segment_part(self, llm: LLMSession, exchanges: Sequence[Exchange], texts: list[str]) -> list[Segment]:
        n = len(texts)
        if n <= 1:
            return [(0, 0, extractive_summary(texts))] if n else []

        def validate(raw: Any) -> Any:
            segs, repaired = repair_segments(raw, n)
            segs = [(s, e, t or extractive_summary(texts[s : e + 1])) for s, e, t in segs]
            return Repaired(segs) if repaired else segs

        return llm.json(
            "segment",
            segmentation_messages(texts, self.rubric),
            SEGMENTATION_SCHEMA,
            validate,
            lambda: self.fallback.segment(exchanges),
            max_tokens=self._answer(n),
            parse=parse_segmentation,
            fallback_note="used the embedding segmenter",
        )  # at the session's temperature, as the official code calls every step at its client's default
