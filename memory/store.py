"""Chroma vector store, scoped per user.

Each (user, kind) pair has its own collection, named from a hash of the user
id, so no query can reach another user's records whatever its filter says.
Embeddings are always computed by us (the collection has no embedding
function, so Chroma never tries to download one).
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import StoreUnavailable
from .userspace import user_key


@dataclass
class Hit:
    id: str
    score: float  # cosine similarity for queries; 0.0 for get()
    document: str
    metadata: dict = field(default_factory=dict)


PAGE = 2000


def collection_name(user_id: str, kind: str) -> str:
    return f"{kind}-{user_key(user_id)}"


EXACT_UP_TO = 2000  # records: up to this many, a query ranks every one (see ChromaStore.query)


def _exact_top(got: dict, embedding: np.ndarray, n: int) -> list[tuple[str, float]]:
    """(id, cosine) of the n records of a `get` (with embeddings) most similar to `embedding`, ties by id."""
    ids = list(got["ids"])
    if not ids:
        return []
    vecs = np.asarray(got["embeddings"], dtype=np.float64)
    vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    q = np.asarray(embedding, dtype=np.float64).ravel()
    sims = vecs @ (q / max(float(np.linalg.norm(q)), 1e-12))
    order = sorted(range(len(ids)), key=lambda i: (-sims[i], ids[i]))[:n]
    return [(ids[i], float(sims[i])) for i in order]


class ChromaStore:
    def __init__(self, path: Path | str | None = None, host: str = "", port: int = 8000):
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        cs = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
        if host:
            # Connected on first use: a server that is down at start-up is an error of that call,
            # not of the app's start.
            self._connect = lambda: chromadb.HttpClient(host=host, port=port, settings=cs)
            self.where = f"chroma server {host}:{port}"
        else:
            path = Path(path or "data/chroma")
            path.mkdir(parents=True, exist_ok=True)
            self._connect = lambda: chromadb.PersistentClient(path=str(path), settings=cs)
            self.where = f"embedded chroma at {path}"
        self.path = None if host else path  # the embedded store's folder (purge_deleted)
        self._client: Any = None
        self._cols: dict[str, object] = {}
        self._lock = threading.Lock()
        # The embedded store's files are only touched by one call at a time: a purge rewrites parts
        # of the index files that a concurrent write would be extending (memory.chroma_purge).
        self._files: contextlib.AbstractContextManager[Any] = (
            threading.RLock() if self.path is not None else contextlib.nullcontext()
        )

    @property
    def client(self):
        with self._lock:
            if self._client is None:
                self._client = self._connect()
            return self._client

    # Every public call goes through _call, which turns a lost server into StoreUnavailable.
    def _call(self, fn):
        try:
            with self._files:
                return fn()
        except StoreUnavailable:
            raise
        except Exception as e:
            if _is_connection_error(e):
                with self._lock:
                    self._cols.clear()  # reopen after the server is back
                raise StoreUnavailable(f"the vector store ({self.where}) cannot be reached; try again shortly") from e
            raise

    def _col(self, user_id: str, kind: str, create: bool = True):
        name = collection_name(user_id, kind)
        with self._lock:
            col = self._cols.get(name)
        if col is None:
            if create:
                col = self.client.get_or_create_collection(
                    name, embedding_function=None, metadata={"hnsw:space": "cosine"}
                )
            else:
                try:
                    col = self.client.get_collection(name, embedding_function=None)
                except Exception as e:
                    if _is_connection_error(e):
                        raise
                    return None
            with self._lock:
                self._cols[name] = col
        return col

    def add(
        self, user_id: str, kind: str, ids: list[str], docs: list[str], vecs: np.ndarray, metas: list[dict]
    ) -> None:
        if not ids:
            return

        def go():
            col = self._col(user_id, kind)
            for i in range(0, len(ids), 1000):
                s = slice(i, i + 1000)
                col.upsert(
                    ids=ids[s], documents=docs[s], embeddings=np.asarray(vecs[s], dtype=np.float32), metadatas=metas[s]
                )

        self._call(go)

    def query(self, user_id: str, kind: str, embedding: np.ndarray, n: int, where: dict | None = None) -> list[Hit]:
        def go():
            col = self._col(user_id, kind, create=False)
            if col is None:
                return []
            count = col.count()
            if count == 0:
                return []
            # Chroma's HNSW index is approximate and its build (parallel inserts) varies between runs: the
            # same memories gave different hits from one run to the next, even when every record was asked
            # for (a node the graph search does not reach is never returned). Up to EXACT_UP_TO records the
            # ranking is computed here, exactly, over every stored vector; above, HNSW is asked for twice as
            # many as needed. Best first, ties by id (issue 14: benchmark figures differing by a turn).
            if count <= EXACT_UP_TO:
                best = _exact_top(col.get(where=where, include=["embeddings"]), embedding, n)
            else:
                r = col.query(
                    query_embeddings=[np.asarray(embedding, dtype=np.float32)],
                    n_results=min(2 * n + 10, count),
                    where=where,
                    include=["distances"],
                )
                pairs = zip(r["ids"][0], r["distances"][0], strict=True)
                best = sorted(((i, 1.0 - float(d)) for i, d in pairs), key=lambda p: (-p[1], p[0]))[:n]
            if not best:
                return []
            got = col.get(ids=[i for i, _ in best], include=["documents", "metadatas"])
            rec = {i: (doc, m) for i, doc, m in zip(got["ids"], got["documents"], got["metadatas"], strict=True)}
            return [Hit(i, score, rec[i][0] or "", rec[i][1] or {}) for i, score in best if i in rec]

        return self._call(go)

    def get(self, user_id: str, kind: str, ids: list[str] | None = None, where: dict | None = None) -> list[Hit]:
        def go():
            col = self._col(user_id, kind, create=False)
            if col is None:
                return []
            include = ["documents", "metadatas"]
            # Paged: one get() over tens of thousands of records exceeds SQLite's variable limit.
            if ids is not None:
                return [
                    h
                    for k in range(0, len(ids), PAGE)
                    for h in _hits(col.get(ids=ids[k : k + PAGE], where=where, include=include))
                ]
            out: list[Hit] = []
            while True:
                page = _hits(col.get(where=where, limit=PAGE, offset=len(out), include=include))
                out.extend(page)
                if len(page) < PAGE:
                    return out

        return self._call(go)

    def embeddings(self, user_id: str, kind: str, ids: list[str]) -> np.ndarray:
        def go():
            col = self._col(user_id, kind, create=False)
            if col is None or not ids:
                return np.zeros((0, 0), dtype=np.float32)
            r = col.get(ids=ids, include=["embeddings"])
            order = {i: k for k, i in enumerate(r["ids"])}
            return np.asarray([r["embeddings"][order[i]] for i in ids if i in order], dtype=np.float32)

        return self._call(go)

    def delete(self, user_id: str, kind: str, ids: list[str] | None = None, where: dict | None = None) -> None:
        def go():
            col = self._col(user_id, kind, create=False)
            # Neither ids nor where: nothing (not everything); an empty id list selects nothing either.
            if col is not None and ids != [] and (ids or where):
                col.delete(ids=ids, where=where)

        self._call(go)

    def count(self, user_id: str, kind: str) -> int:
        def go():
            col = self._col(user_id, kind, create=False)
            return 0 if col is None else col.count()

        return self._call(go)

    def purge_deleted(self) -> bool:
        """After deletions: no deleted text stays in the embedded store's files (memory.chroma_purge)."""
        from .chroma_purge import purge

        if self.path is None:
            return False
        with self._files:
            return purge(self.path)

    def drop_user(self, user_id: str, kinds: tuple[str, ...]) -> None:
        def go():
            for kind in kinds:
                name = collection_name(user_id, kind)
                with self._lock:
                    self._cols.pop(name, None)
                try:
                    self.client.delete_collection(name)
                except Exception as e:
                    if _is_connection_error(e):
                        raise

        self._call(go)

    def heartbeat(self) -> bool:
        try:
            self.client.heartbeat()
            return True
        except Exception:
            return False


def _hits(r: dict) -> list[Hit]:
    return [
        Hit(i, 0.0, doc or "", m or {}) for i, doc, m in zip(r["ids"], r["documents"], r["metadatas"], strict=False)
    ]


def _is_connection_error(e: Exception) -> bool:
    text = f"{type(e).__name__} {e}".lower()
    return any(
        s in text
        for s in (
            "connect",
            "connection",
            "timed out",
            "timeout",
            "unreachable",
            "could not connect",
            "refused",
            "remoteprotocol",
        )
    )
