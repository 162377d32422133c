"""Configuration: declared in two modules (memory/settings.py, sessions/settings.py), read once at start by
`AppSettings.from_env` (no other module reads the environment: tests/test_config_reads.py), refused with a
clear message when a value is wrong, and documented in docs/settings.md: every variable the code reads is in
its tables, and every variable there is read."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app import AppSettings
from memory.errors import InvalidSetting
from memory.settings import LLMConfig, Settings
from sessions import open_service
from sessions.work import Limits
from tests.fakes import ScriptedAgent
from ui import fairness

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "settings.md"
# A read of a variable: os.environ.get("X") / e.get("X") / environ["X"] / getenv("X"), or a field env("X", ...).
READ = re.compile(r'(?:\.get\(|environ\[|getenv\(|\benv\()\s*"([A-Z][A-Z0-9_]{2,})"')


def documented() -> set[str]:
    """The variables named in the first column of docs/settings.md's tables."""
    names: set[str] = set()
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = line.split("|")
        if len(cells) > 2:
            names |= set(re.findall(r"`([A-Z][A-Z0-9_]{2,})`", cells[1]))
    return names


def read_in_code() -> set[str]:
    files = [ROOT / "app.py", *(p for d in ("memory", "sessions", "ui") for p in (ROOT / d).rglob("*.py"))]
    return {name for f in files for name in READ.findall(f.read_text(encoding="utf-8"))}


def test_every_variable_read_is_documented_and_every_documented_one_is_read():
    code, known, doc = read_in_code(), set(AppSettings.variables()), documented()
    assert code - known == set(), "read in the code but not declared in memory.settings or sessions.settings"
    assert known - doc == set(), "read by the app but missing from docs/settings.md"
    assert doc - known == set(), "documented in docs/settings.md but read nowhere"


@pytest.mark.parametrize(
    "env, words",
    [
        ({"LLM_TIMEOUT": "soon"}, ["LLM_TIMEOUT", "'soon'", "a number from 0.1 to 3600"]),
        ({"LLM_TIMEOUT": "-5"}, ["LLM_TIMEOUT", "'-5'", "from 0.1 to 3600"]),
        ({"LLM_TIMEOUT": "nan"}, ["LLM_TIMEOUT", "'nan'"]),
        ({"LLM_MAX_RETRIES": "2.5"}, ["LLM_MAX_RETRIES", "'2.5'", "a whole number from 0 to 20"]),
        ({"MEMORY_MAX_SESSIONS": "-1"}, ["MEMORY_MAX_SESSIONS", "'-1'", "at least 0"]),
        ({"MEMORY_BUILD_WORKERS": "0"}, ["MEMORY_BUILD_WORKERS", "'0'", "from 1 to 64"]),
        ({"MEMORY_CONCURRENCY": "many"}, ["MEMORY_CONCURRENCY", "'many'", "a whole number"]),
        ({"CHROMA_PORT": "70000"}, ["CHROMA_PORT", "'70000'", "from 1 to 65535"]),
        ({"LLM_EMBEDDED_GRAMMAR": "maybe"}, ["LLM_EMBEDDED_GRAMMAR", "'maybe'", "1 or 0"]),
        ({"MEMORY_STRATEGY": "graph"}, ["MEMORY_STRATEGY", "'graph'", "theanine, secom, none"]),
        ({"LLM_BACKEND": "ollama"}, ["LLM_BACKEND", "'ollama'", "embedded, openai"]),
        ({"EMBEDDER": "bert"}, ["EMBEDDER", "'bert'", "minilm, openai"]),
        ({"LLM_TEMPERATURE": "9"}, ["LLM_TEMPERATURE", "'9'", "between 0.0 and 2.0"]),
        ({"SECOM_COMPRESSION_RATE": "0"}, ["SECOM_COMPRESSION_RATE", "'0'", "between 0.05 and 1.0"]),
        ({"GRAPH_MAX_NODES": "0"}, ["GRAPH_MAX_NODES", "'0'", "at least 1"]),
    ],
)
def test_a_bad_value_names_the_variable_the_value_and_what_is_allowed(env, words):
    with pytest.raises(InvalidSetting) as e:
        AppSettings.from_env(env)
    assert all(w in str(e.value) for w in words), str(e.value)


def test_values_are_read_with_their_types_and_an_empty_number_means_unset(tmp_path):
    env = {
        "MEMORY_DATA_DIR": str(tmp_path),
        "LLM_TIMEOUT": " 2.5 ",
        "LLM_EMBEDDED_GRAMMAR": "1",
        "LLM_EMBEDDED_MODEL": "Gemma3",
        "MEMORY_STRATEGY": "secom",
        "MEMORY_CONCURRENCY": "2",
        "MEMORY_BUILD_WAITING": "3",
        "MEMORY_MAX_SESSIONS": "0",
        "MEMORY_BROWSER_SECRET": "a-secret-of-this-deployment",
        "LLM_MAX_RETRIES": "",  # empty: the default
    }
    s, a = Settings.from_env(env), AppSettings.from_env(env)
    assert s == a.memory  # the app's settings hold the memory's, read from the same variables
    assert s.data_dir == tmp_path and s.llm.timeout == 2.5 and s.llm.embedded_grammar is True
    assert s.llm.bundled_model == "gemma3" and s.options.strategy == "secom" and s.llm.max_retries == 3
    assert a.limits == Limits(sessions=0) and (a.serving.concurrency, a.serving.build_waiting) == (2, 3)
    assert "a-secret" not in repr(a) and "a-secret" not in str(s.public())  # a secret stays out of logs
    assert Settings.from_env({"LLM_THREADS": "0"}).llm.threads == Settings().llm.threads  # 0: the default
    assert Settings.from_env({"COMPRESSOR_MODEL": ""}).compressor_model == ""  # an empty text is kept: no model
    empty = Settings.from_env({})
    assert empty == Settings(data_dir=empty.data_dir, llm=LLMConfig(model_cache=empty.llm.model_cache))
    assert empty.llm.model_cache == Path.home() / ".cache" / "memory-chat"
    assert Settings.from_env({"XDG_CACHE_HOME": "/x"}).llm.model_cache == Path("/x/memory-chat")
    assert Settings.from_env({"MEMORY_MODEL_CACHE": "/m", "XDG_CACHE_HOME": "/x"}).llm.model_cache == Path("/m")
    assert AppSettings.from_env({"GRAPH_MAX_NODES": "20"}).page.graph_max_nodes == 20
    assert AppSettings.from_env({}).allow_llm_change is True


def test_the_server_and_the_service_take_their_numbers_from_the_settings(tmp_path):
    a = AppSettings.from_env({"MEMORY_DATA_DIR": str(tmp_path), "MEMORY_CONCURRENCY": "3", "MEMORY_MAX_MEMORIES": "7"})
    assert fairness.reply_events(a.serving)["concurrency_limit"] == 3
    assert fairness.build_events(a.serving)["concurrency_limit"] == a.serving.build_waiting == 8
    assert open_service(a.memory, ScriptedAgent(), limits=a.limits).limits.memories == 7


def test_the_app_refuses_to_start_on_a_bad_value_and_says_why(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_", "OPENAI_", "MEMORY_"))}
    env.update(MEMORY_DOTENV="0", MEMORY_DATA_DIR=str(tmp_path), LLM_TIMEOUT="soon")
    run = subprocess.run(
        [sys.executable, str(ROOT / "app.py")], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    assert "LLM_TIMEOUT must be a number from 0.1 to 3600, not 'soon'" in run.stderr


def test_the_libraries_never_write_the_environment():
    """Configuration is read once, by app.py (and the maintenance command's entry): memory/, sessions/ and
    ui/ take what they need as arguments and never set a variable for someone else to read."""
    writes = re.compile(r"os\.environ\[[^]]+\]\s*=|os\.environ\.(setdefault|update|pop)\(|os\.putenv\(")
    files = [p for d in ("memory", "sessions", "ui") for p in (ROOT / d).rglob("*.py") if p.name != "__main__.py"]
    found = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in files
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if writes.search(line)
    ]
    assert found == []
