"""Issue 44: the paper's setting as the paper reads it. Its retrieval query (the last six turns, then
the message) always holds the message within what MiniLM reads (the first 256 word pieces); on a
bundled model it keeps its own budget, so its three whole timelines are not cut to the bundled 200
tokens; Compare shows the other cards before the paper card starts."""

from __future__ import annotations

from memory.design import QUERY_WINDOW_TOKENS, retrieval_query
from memory.records import Turn
from memory.settings import LLMConfig, Options, Settings
from sessions import new_user_id, open_service
from tests.fakes import ScriptedAgent
from tests.flat_service import FlatService

LONG = (
    "We spent the whole weekend at the lake house with my cousins, fixing the old boat, painting the "
    "fence, cooking fish on the grill and talking until late about everything that happened this year. "
)
MESSAGE = "Which city did my sister move to after her wedding?"


def _history(n: int = 8) -> list[Turn]:
    return [Turn("user" if i % 2 else "assistant", f"{i}: {LONG * 2}") for i in range(n)]


def test_the_paper_query_keeps_the_message_within_what_minilm_reads(minilm):
    paper = Options(theanine_mode="paper").for_theanine()
    assert paper.query_turns == 6 and paper.query_order == "time"
    q = retrieval_query(_history(), MESSAGE, paper)
    lines = q.split("\n")
    assert lines[-1] == f"user: {MESSAGE}" and len(lines) >= 2  # the paper's order: the turns, then the message
    assert len(lines) - 1 < 6  # the oldest turns were dropped so that it fits
    pieces = minilm.model.tokenizer(q)["input_ids"]
    assert len(pieces) <= 256  # MiniLM's window: every word of the query, the message too, is read
    # without the cut, the message would fall outside the window
    whole = "\n".join([f"{t.speaker}: {t.text}" for t in _history()[-6:]] + [f"user: {MESSAGE}"])
    assert len(minilm.model.tokenizer(whole)["input_ids"]) > 256
    assert QUERY_WINDOW_TOKENS < 256


def test_the_query_forms():
    h = [Turn("assistant", "How was the trip?"), Turn("user", "Great, thanks.")]
    assert retrieval_query(h, MESSAGE, Options()) == MESSAGE  # the default: the message alone
    assert retrieval_query(h, MESSAGE, Options(query_turns=4)).split("\n") == [
        "assistant: How was the trip?",
        "user: Great, thanks.",
        f"user: {MESSAGE}",
    ]
    assert retrieval_query(h, MESSAGE, Options(query_turns=4, query_order="message-first")).split("\n") == [
        f"user: {MESSAGE}",
        "user: Great, thanks.",
        "assistant: How was the trip?",
    ]
    assert retrieval_query([Turn("user", LONG * 20)], MESSAGE, Options(query_turns=1)) == MESSAGE


def test_the_paper_setting_keeps_its_budget_on_a_bundled_model():
    bundled = LLMConfig(backend="embedded")
    assert bundled.is_bundled
    tuned = Options(budget=1000, bundled_budget=200)
    assert tuned.for_backend(bundled).budget == 200
    assert tuned.with_(strategy="secom").for_backend(bundled).budget == 200
    assert tuned.for_column("theanine-paper").for_backend(bundled).budget == 1000
    assert tuned.for_backend(LLMConfig(backend="openai", base_url="http://x/v1")).budget == 1000


def test_compare_shows_the_other_cards_before_the_paper_card_starts(tmp_path):
    """On the bundled model the replies run one after the other: the paper card (which refines) runs
    last, and each card is shown done as soon as its reply is, so the others never wait for it."""
    svc = FlatService(open_service(Settings(data_dir=tmp_path), ScriptedAgent()))
    uid = new_user_id()
    list(svc.send(uid, "hello"))
    seen = []
    for results in svc.compare(uid, "what do you know?"):
        seen.append({s: (r["status"], r["done"]) for s, r in results.items()})
    first_paper = next(i for i, snap in enumerate(seen) if snap["theanine-paper"][0] != "waiting")
    assert all(seen[first_paper - 1][s][1] for s in ("theanine", "secom", "none"))
    assert seen[-1]["theanine-paper"][1]
