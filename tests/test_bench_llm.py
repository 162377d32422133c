"""`python -m memory.bench qa` and `teafarm`: plumbing on a tiny LoCoMo file.

The fast test runs them against a fake OpenAI-compatible server on 127.0.0.1 (the real `openai`
client, the app's whole agent: LLM segmenter, summaries, relations, refinement, judge). Its answers
are known (the judge always says "correct" and "does not resist"), so the figures are checked.
The slow test runs both once against the embedded model (Gemma 3 270M) on one question.
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from bench_fixtures import write_tiny

from memory.bench import cost, qa, teafarm
from memory.tokens import count_tokens


class FakeOpenAI:
    """/v1/chat/completions answered by the benchmarks' CountingLLM (plain or streamed)."""

    def __init__(self):
        self.llm = cost.CountingLLM()
        self.requests = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                owner.requests.append(body)
                text = owner.llm._answer(body["messages"])
                usage = {
                    "prompt_tokens": sum(count_tokens(m["content"]) for m in body["messages"]),
                    "completion_tokens": count_tokens(text),
                }
                usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
                if body.get("stream"):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    for i in range(0, len(text), 6):
                        chunk = {
                            "id": "c",
                            "object": "chat.completion.chunk",
                            "created": 0,
                            "model": "fake",
                            "choices": [{"index": 0, "delta": {"content": text[i : i + 6]}, "finish_reason": None}],
                        }
                        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    end = {
                        "id": "c",
                        "object": "chat.completion.chunk",
                        "created": 0,
                        "model": "fake",
                        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                    }
                    self.wfile.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
                    return
                data = json.dumps(
                    {
                        "id": "c",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "fake",
                        "choices": [
                            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
                        ],
                        "usage": usage,
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_endpoint(monkeypatch):
    with FakeOpenAI() as srv:
        for k in ("LLM_BACKEND", "LLM_GGUF_PATH", "EMBEDDER", "SECOM_SEGMENTER", "CHROMA_HOST"):
            monkeypatch.delenv(k, raising=False)
        monkeypatch.setenv("OPENAI_BASE_URL", srv.url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("LLM_MODEL", "fake")
        yield srv


def test_qa_and_teafarm_through_an_openai_compatible_endpoint(tmp_path, fake_endpoint):
    data = write_tiny(tmp_path / "tiny.json")
    out = tmp_path / "qa.json"
    assert qa.main(["--data", str(data), "--out", str(out), "--limit", "2", "--seed", "1"]) == 0
    d = json.loads(out.read_text())
    assert set(d["strategies"]) == {"theanine", "secom", "none"}
    calls = {"theanine": 2, "secom": 1, "none": 1}
    for s, r in d["strategies"].items():
        assert r["n"] == 2 and r["n_judged"] == 2 and r["accuracy"] == 1.0  # the fake judge says correct
        assert r["llm_calls_per_reply"] == calls[s] and r["tokens_per_question"] > 0 and r["errors"] == 0
        assert r["latency_s_p50"] >= 0
    assert {q["category"] for q in d["questions"]} <= {1, 2, 3, 4}
    assert d["close"]["bench-conv-t0"]["sessions"] == 2
    assert "fake" in d["config"]["llm"] and (tmp_path / "qa_accuracy.png").exists()
    prompts = [m["content"] for r in fake_endpoint.requests for m in r["messages"]]
    assert any("[Exchange 0]" in p for p in prompts)  # the LLM segmenter ran

    out = tmp_path / "teafarm.json"
    n_before = len(fake_endpoint.requests)
    assert teafarm.main(["--data", str(data), "--out", str(out), "--limit", "2", "--judge-model", "judge-x"]) == 0
    d = json.loads(out.read_text())
    assert d["config"]["generated"] == 2
    # neutral prompt and the optional false-premise instruction, for every strategy (issue 10)
    assert set(d["strategies"]) == {"theanine", "secom", "none", "theanine+hint", "secom+hint", "none+hint"}
    for r in d["strategies"].values():
        assert r["n"] == 2 and r["success_rate"] == 0.0  # the fake judge says no
    assert d["questions"][0]["false_premise"] and (tmp_path / "teafarm_success.png").exists()
    assert {q["speaker"] for q in d["questions"]} == {"Alice", "Bob"}  # both perspectives
    reqs = fake_endpoint.requests[n_before:]
    gen = [r for r in reqs if '"false_premise"' in r["messages"][-1]["content"]]
    assert len(gen) == 2 and all(r["model"] == "judge-x" for r in gen)  # generator: --judge-model
    text = gen[0]["messages"][-1]["content"]
    assert text.index("1 May, 2023") < text.index("2 May, 2023")  # all summaries, in time order
    judged = [r for r in reqs if '"states_truth"' in r["messages"][-1]["content"]]
    assert judged and all(r["model"] == "judge-x" for r in judged)
    replies = [r for r in reqs if r.get("stream")]
    assert replies and all(r["model"] == "fake" for r in replies)  # the agent keeps its model
    assert d["config"]["generator_and_judge"].startswith("OpenAI-compatible: judge-x")


def test_teafarm_success_needs_resisting_and_the_true_past():
    assert teafarm.success({"resists": True, "states_truth": True}) is True
    assert teafarm.success({"resists": True, "states_truth": False}) is False  # before: resisting was enough
    assert teafarm.success({"resists": False, "states_truth": True}) is False
    assert teafarm.success(None) is None


@pytest.mark.slow
def test_qa_and_teafarm_plumbing_with_the_embedded_model(tmp_path, monkeypatch):
    for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "LLM_BACKEND", "LLM_GGUF_PATH", "EMBEDDER", "SECOM_SEGMENTER"):
        monkeypatch.delenv(k, raising=False)
    data = write_tiny(tmp_path / "tiny.json")
    out = tmp_path / "qa.json"
    assert qa.main(["--data", str(data), "--out", str(out), "--limit", "1", "--max-reply-tokens", "16"]) == 0
    d = json.loads(out.read_text())
    assert "embedded" in d["config"]["llm"]
    for r in d["strategies"].values():
        assert r["n"] == 1 and r["errors"] == 0 and r["llm_calls_per_reply"] >= 1
    # the 270M base model rarely writes a usable counterfactual: the run must still finish and report
    out = tmp_path / "teafarm.json"
    assert (
        teafarm.main(
            [
                "--data",
                str(data),
                "--out",
                str(out),
                "--limit",
                "1",
                "--max-reply-tokens",
                "16",
                "--strategies",
                "theanine",
            ]
        )
        == 0
    )
    d = json.loads(out.read_text())
    assert d["config"]["generated"] in (0, 1) and d["strategies"]["theanine"]["n"] == d["config"]["generated"]


def test_locomo_agent_path_with_the_configured_llm_summariser(tmp_path, fake_endpoint, monkeypatch):
    """Issue 10: `--summariser llm` closes the sessions with the configured endpoint (injected into
    MemoryAgent through llm_factory) and scores the memory text the reply would receive."""
    from memory.bench import locomo

    monkeypatch.setenv("MEMORY_DATA_DIR", str(tmp_path / "data"))
    data = write_tiny(tmp_path / "tiny.json")
    out = tmp_path / "locomo.json"
    assert (
        locomo.main(
            [
                "--data",
                str(data),
                "--out",
                str(out),
                "--budgets",
                "50,1000",
                "--retrievers",
                "bm25",
                "--summariser",
                "llm",
                "--methods",
                "secom,theanine-topk",
            ]
        )
        == 0
    )
    d = json.loads(out.read_text())
    assert d["config"]["path"] == "agent" and "fake" in d["config"]["llm"]
    close = d["close"]["llm"]["conv-t0"]
    assert close["llm_calls"] > 0 and close["memories"] > 0
    prompts = [r["messages"][-1]["content"] for r in fake_endpoint.requests]
    assert any("worth remembering" in p for p in prompts)  # the engine's summary prompt
    assert {r["summariser"] for r in d["results"] if r["method"] != "turn"} == {"llm"}
