"""A scripted stand-in for the summariser, for one LoCoMo conversation: it answers the summary prompt
with the session's LoCoMo observation facts (what a capable summariser would write) and the refinement
prompt with the raw timelines unchanged. Not a model (see memory/evaluation/agent_run.py)."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterator

from ..llm import Completion


def _norm(text: str) -> str:
    return " ".join(str(text).split())[:200]


class ReferenceLLM:
    """A scripted LLM for one LoCoMo conversation (see the module docstring). Not a model."""

    name = "reference (LoCoMo observation facts; scripted)"
    json_attempts = 1

    def __init__(self, conv):
        self.dia_by_text = {(_norm(t.speaker), _norm(t.text)): t.turn_id for s in conv.sessions for t in s.turns}
        self.obs = defaultdict(list)
        for o in conv.observations:
            self.obs[o.session].append(o)
        self.calls: Counter[str] = Counter()

    def _memories(self, prompt: str) -> str:
        index: dict[str, int] = {}  # dia_id -> the number the prompt gives that turn
        for i, sp, body in re.findall(r"^\[(\d+)\] ([^:\n]+): (.*)$", prompt, re.M):
            d = self.dia_by_text.get((_norm(sp), _norm(body)))
            if d:
                index[d] = int(i)
        sessions = {d.split(":")[0] for d in index}
        mems = []
        for s in sorted(sessions):
            for o in self.obs.get(s, []):
                # A fact belongs to the part of a long session that holds its first evidence turn.
                if o.dia_ids and o.dia_ids[0] in index:
                    mems.append(
                        {"speaker": o.speaker, "event": o.text, "turns": [index[d] for d in o.dia_ids if d in index]}
                    )
        return json.dumps({"memories": mems})

    def _answer(self, purpose: str, messages: list[dict]) -> str:
        prompt = str(messages[-1].get("content", ""))
        if purpose == "summarise":
            self.calls["summarise"] += 1
            return self._memories(prompt)
        if purpose == "refine":
            self.calls["refine"] += 1
            return json.dumps({"timelines": re.findall(r"^Timeline \d+: (.*)$", prompt, re.M)})
        self.calls["other"] += 1
        return "{}"  # relations, segmentation: the engine falls back

    def chat(self, messages, *, temperature, max_tokens, json_schema=None, purpose="") -> Completion:
        return Completion(self._answer(purpose, messages))

    def stream(self, messages, *, temperature, max_tokens, seed=None, purpose="") -> Iterator[str]:
        yield ""
