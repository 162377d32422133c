"""LoCoMo samples as the conversations an evaluation runs on: sessions, questions, observation facts."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import locomo_format as lf
from ..records import SessionRecord


@dataclass
class Conversation:
    sample_id: str
    sessions: list[SessionRecord]
    questions: list[lf.Question]
    observations: list[lf.Observation]
    # The questions' vectors, set by the run that embeds them.
    qvecs: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32), repr=False)


def load_samples(data, only: list[str] | None = None) -> list[Conversation]:
    """Conversations from a LoCoMo file's content (a list of samples or one). ValueError when it is not
    LoCoMo's format; LookupError naming the conversations of `only` that it does not hold."""
    samples = data if isinstance(data, list) else [data]
    by_id = dict(lf.load_sessions(samples))
    out: list[Conversation] = []
    for s in samples:
        sid = str(s.get("sample_id", f"sample-{len(out)}"))
        if only and sid not in only:
            continue
        out.append(Conversation(sid, by_id[sid], lf.questions(s), lf.observations(s)))
    if only:
        missing = sorted(set(only) - {c.sample_id for c in out})
        if missing:
            raise LookupError(f"no conversation {', '.join(missing)}")
    return out
