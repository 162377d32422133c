"""Whether a TeaFarm result is a valid TeaFarm score: the rule `python -m bench teafarm` writes into its
result and the evaluation tab shows for a committed one (ui/evaluation.py reads it here, not from bench/)."""

from __future__ import annotations

from memory.settings import LLMConfig

PERSPECTIVE = "user asks about either speaker"  # the paper's: the user sends every question


def _same_model(a: LLMConfig, b: LLMConfig) -> bool:
    if a.backend != b.backend:
        return False
    if a.backend == "embedded":
        return (a.gguf_path or a.bundled_model) == (b.gguf_path or b.bundled_model)
    return a.model.strip().lower() == b.model.strip().lower()


def validity(agent: LLMConfig, judge: LLMConfig) -> dict:
    """Whether a run is a TeaFarm score: not when its generator and judge is the agent's own model (it
    grades its own replies to questions it wrote) or a model bundled with the app (too small to write or
    judge them: the paper's were GPT-4)."""
    why = []
    if _same_model(agent, judge):
        why.append(f"the generator and judge is the agent's own model ({judge.describe()})")
    if judge.is_bundled:
        why.append(f"the generator and judge is a model bundled with the app ({judge.describe()})")
    out: dict = {"perspective": PERSPECTIVE, "valid": not why}
    out["why"] = (
        "; ".join(why) + ": not a valid TeaFarm score, only a check that the pipeline runs "
        "(give another, capable model with --judge-model / --judge-base-url)"
        if why
        else f"generator and judge {judge.describe()}, not the agent's model ({agent.describe()})"
    )
    return out


def validity_of(result: dict) -> dict:
    """The validity fields of a TeaFarm result file. A file written before they existed is not valid:
    half its questions were written for the agent's own persona to send, and its models are named
    from its config."""
    if isinstance(result.get("valid"), bool):
        return {k: result.get(k) for k in ("perspective", "valid", "why")}
    cfg = result.get("config") or {}
    agent, judge = str(cfg.get("llm", "")), str(cfg.get("generator_and_judge", ""))
    why = ["half its questions were written for the agent's own persona to send"]
    if judge and judge == agent:
        why.append(f"the generator and judge is the agent's own model ({judge})")
    if "bundled" in judge:
        why.append(f"the generator and judge is a model bundled with the app ({judge})")
    return {
        "perspective": "each speaker asks about either speaker (written before the paper's user-only rule)",
        "valid": False,
        "why": "; ".join(why) + ": not a valid TeaFarm score",
    }
