"""bench replies: the answers benchmark through the app's own path (a real agent, MiniLM and Chroma;
a scripted model that answers with the memory it was given), and how it scores and pairs replies."""

from bench.replies import personal_people, run_person, summarise
from bench.reply_scores import Question, paired, parrots, score
from tests.fakes import ScriptedLLM


def test_the_personal_set_is_three_people_or_more_over_three_sessions_asked_later():
    people = personal_people()
    assert len(people) >= 3 and sum(len(p.questions) for p in people) >= 30
    for p in people:
        dates = [s["date"] for s in p.history["sessions"]]
        assert len(dates) >= 3 and dates == sorted(dates) and p.ask_date > dates[-1]
        assert {q.kind for q in p.questions} == {"fact", "changed", "reason"}
        assert all(q.old for q in p.questions if q.kind == "changed")


def test_strict_needs_every_gold_word_and_the_new_value_before_the_old():
    q = Question("x", "Where do I live now?", ["Grenoble"], old="Lyon")
    assert score("You live in Grenoble now.", q)["strict"]
    assert score("You moved from Lyon to Grenoble.", q)["strict"] is False  # the old value first
    assert score("You live in Lyon.", q)["strict"] is False
    assert score("Grenoble, since you left Lyon.", q)["strict"]
    both = Question("y", "Kids?", ["Leo and Mia"])
    assert score("Leo and Mia!", both)["strict"] and not score("Leo.", both)["strict"]
    assert score("I'm sorry, but I can't assist with that.", both)["refusal"]


def test_parroting_is_the_message_repeated():
    assert parrots("What is my dog's name? Rex!", "What is my dog's name?")
    assert parrots("What's my dogs name.", "What's my dog's name?")
    assert not parrots("Your dog is called Rex.", "What's my dog's name?")


def test_paired_differences_name_the_better_run_only_when_the_interval_says_so():
    a = [{"id": str(i), "set": "p", "strict": True, "f1": 1.0} for i in range(40)]
    b = [{"id": str(i), "set": "p", "strict": i % 4 == 0, "f1": 0.25} for i in range(40)]
    out = paired(a, b, "new", "old")
    assert "strict +0.750" in out and "better" in out and "only there 0" in out
    same = paired(a, a, "new", "new")
    assert "+0.000" in same and "no difference shown" in same


def test_a_person_is_imported_then_asked_in_chat_sessions_never_built_into_memory(tmp_path):
    from bench.replies import make_service

    def answer(messages):  # every memory block of the session's prompt (memory.shown_memory), or nothing
        return "\n".join(m["content"] for m in messages[1:] if m["role"] == "system") or "Hello!"

    svc, _ = make_service(tmp_path, llm_factory=lambda cfg: ScriptedLLM(answer))
    maya = personal_people()[0]
    uid = svc.rooms.users.new_user("127.0.0.1")
    rows = run_person(svc, maya, group=5, strategy="theanine", uid=uid)
    assert [r["first"] for r in rows] == [True, False, False, False, False] * 2
    assert all(r["id"].startswith("theanine|personal:maya:") and not r["error"] for r in rows)
    dog = rows[0]
    assert dog["question"] == "What's my dog's name?" and dog["strict"] and dog["memory"]
    assert summarise(rows)["personal"] > 0.5  # the memory reached the reply
    # Two chat sessions were typed; neither was built into memory: only the three imported ones were.
    assert len(svc.store.sessions(uid, status="closed")) == 3
    assert len(svc.store.sessions(uid, status="closing")) == 1  # the first chat session, ended, unbuilt
    assert "dog's name" not in str(svc.agent.graph_view(uid))


def test_the_chat_set_scores_parroting_apart_from_the_questions():
    from bench.replies import chat_person

    chat = chat_person()
    assert len(chat.questions) >= 50 and all(q.kind == "chat" and not q.answers for q in chat.questions)
    assert len(chat.history["sessions"]) >= 2  # the small memory, imported as the app imports

    def row(qid: str, kind: str, strict: bool, parrot: bool) -> dict:
        return {"id": qid, "set": qid.split(":")[0], "kind": kind, "strict": strict, "f1": float(strict),
                "parrot": parrot, "refusal": False, "first": True, "first_token_s": 1.0, "complete_s": 1.0,
                "prompt_tokens": None, "error": ""}  # fmt: skip

    said_back = [row(f"chat:{i}", "chat", False, True) for i in range(10)]
    answered = [row(f"personal:x:{i}", "fact", True, False) for i in range(4)]
    s = summarise(said_back + answered)
    assert s["n"] == 4 and s["personal"] == 1.0 and s["parroting"] == 0.0  # the questions' figures
    assert s["chat_n"] == 10 and s["chat_parroting"] == 1.0
    quiet = [dict(r, parrot=False) for r in said_back]
    out = paired(quiet + answered, said_back + answered, "new", "old")
    assert "chat parroting -1.000" in out and "4 questions" in out
