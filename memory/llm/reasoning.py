"""A reasoning model's thinking kept out of the answer: `<think>...</think>` blocks in the text, and
the `reasoning_content` field some servers send beside it. Neither reaches the chat or the JSON parser;
the trace keeps the thinking for "See why" (folded)."""

from __future__ import annotations

import re

OPEN, CLOSE = "<think>", "</think>"
_BLOCK = re.compile(r"<think>(.*?)(?:</think>|\Z)", re.S | re.I)


class ReasoningPiece(str):
    """A streamed piece of reasoning (a server's `reasoning_content` delta), not of the answer."""


def split_reasoning(text: str) -> tuple[str, str]:
    """(answer, reasoning) of a whole answer. An unclosed `<think>` runs to the end (the answer was cut
    while thinking); a `</think>` with no opening (the chat template opened it) ends the thinking."""
    text = text or ""
    low = text.lower()
    if CLOSE in low and OPEN not in low[: low.index(CLOSE)]:
        at = low.index(CLOSE)
        head, text = text[:at], text[at + len(CLOSE) :]
        thoughts = [head]
    else:
        thoughts = []
    thoughts += [m.group(1) for m in _BLOCK.finditer(text)]
    answer = _BLOCK.sub("", text)
    return answer.strip() if thoughts else answer, "\n".join(t.strip() for t in thoughts if t.strip())


class ThinkFilter:
    """Splits a stream of answer pieces into visible text and reasoning, holding back a piece that may
    be the start of a tag until it is known."""

    def __init__(self) -> None:
        self.inside = False
        self.pending = ""
        self.reasoning: list[str] = []

    def feed(self, piece: str) -> str:
        buf, out = self.pending + piece, list[str]()
        self.pending = ""
        while buf:
            tag = CLOSE if self.inside else OPEN
            at = buf.lower().find(tag)
            if at < 0:
                keep = _partial_tag_suffix(buf, tag)
                chunk, self.pending = buf[: len(buf) - keep], buf[len(buf) - keep :]
                (self.reasoning if self.inside else out).append(chunk)
                break
            (self.reasoning if self.inside else out).append(buf[:at])
            buf = buf[at + len(tag) :]
            self.inside = not self.inside
            if not self.inside:
                buf = buf.lstrip()  # the answer after the thinking starts at its first word
        return "".join(out)

    def finish(self) -> str:
        """What is left at the end of the stream (a held-back partial tag is plain text)."""
        rest, self.pending = self.pending, ""
        if self.inside:
            self.reasoning.append(rest)
            return ""
        return rest

    @property
    def thoughts(self) -> str:
        return "".join(self.reasoning).strip()


def _partial_tag_suffix(buf: str, tag: str) -> int:
    """Length of the longest end of `buf` that could begin `tag`."""
    low = buf.lower()
    for n in range(min(len(tag) - 1, len(low)), 0, -1):
        if tag.startswith(low[-n:]):
            return n
    return 0
