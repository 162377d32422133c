"""SeCom memory: segments per session, compressed keys, BM25 / dense / hybrid retrieval.

build(): a closed session is cut into exchanges, the exchanges into topical
segments (LLM or embeddings), each segment's text is compressed (LLMLingua-2)
into its retrieval *key*, each key is embedded whole, in parts of one exchange
(`vectors`: MiniLM reads only a text's first 256 word pieces; the segment's
vector is the mean of its parts', the parts are stored too, kind PARTS) and
upserted to the vector store with the original text in the metadata. Ids are
deterministic
("{session_id}:seg{i}") and a rebuild first deletes the session's old
segments, so building twice leaves the same records.

retrieve(): ranks segments by BM25 over the keys, by dense similarity of the
keys (`vectors.mixed_score`: the best part's and the mean vector's cosines),
or by reciprocal-rank fusion of both, and packs the best k into the token
budget (counted on the original text) by the rule the benchmarks use
(memory.packing): whole segments in rank order, the first that does not fit cut
to the turns around its best-matching exchange. Returned in chronological order;
for a question about the present, found with the dense ranking fused into BM25
and returned newest first (`retrieve`).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from typing import Any, cast

import numpy as np

from ..bm25 import tokenize
from ..dates import timestamp, ts_order_key
from ..design import Forgetting, MemoryClients, Recall, Recalled, RecallRequest, SessionOf
from ..fusion import rrf
from ..packing import Piece, Unit, pack, render
from ..protocols import VectorStore
from ..records import ReplyEvent, SessionRecord, exchanges
from ..settings import Options, Settings
from ..steps_policy import StepPlan
from ..tokens import count_tokens
from ..trace import Trace
from ..trace_types import Segment
from .bm25_cache import BM25Cache
from .compression import Compressor, load_compressor
from .exchanges import exchange_lines
from .present import asks_present
from .segmentation import Segmenter, segmenter_for
from .vectors import SCHEME, Embedded, embed_segments, mixed_score

KIND = "secom_segments"
PARTS = "secom_parts"  # one record per part of a segment (vectors.key_parts), for the dense search
CANDIDATES = 50  # candidates taken from each ranker before fusion / budgeting
SEGMENT_POOL = 200  # a dense search reads the mean-vector cosines of this many segments at most
PART_POOL = 1000  # ... and the cosines of this many parts at most (all of them, for most users)


def _natural(s: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", s or ""))


def _needs_vector(h) -> bool:
    """A segment SecomMemory built (it has a fingerprint) before its vector was made from the whole segment."""
    m = h.metadata or {}
    return bool(m.get("fingerprint")) and m.get("vector") != SCHEME


class SecomMemory:
    """SeCom's memory for every user of one store (memory.design.MemoryDesign). Thread-safe.

    `segmenter` (see `segmentation.Segmenter`) cuts each session; it gets the job's LLM session, or None
    where no LLM step may run.
    """

    export_key = "secom_segments"

    def __init__(
        self, store: VectorStore, embedder, compressor: Compressor | None, compressor_note: str, segmenter: Segmenter
    ):
        self.store = store
        self.embedder = embedder
        self.compressor = compressor
        self.compressor_note = compressor_note or "compression unavailable; segment keys are the original text"
        self.segmenter = segmenter
        self._bm25 = BM25Cache(KIND)
        # Held while segments are written or deleted (briefly, never during segmentation): the vector
        # upgrade of older segments (`_upgrade_vectors`) never writes back a segment deleted meanwhile.
        self._write = threading.Lock()
        self._upgraded: set[str] = set()

    @classmethod
    def from_clients(cls, settings: Settings, clients: MemoryClients) -> SecomMemory:
        """With the compressor and segmenter the settings name."""
        compressor, note = load_compressor(settings.compressor_model)
        mem = cls(clients.store, clients.embedder, compressor, note, segmenter_for(settings, clients.embedder))
        mem.use_clients(clients)
        return mem

    def use_clients(self, clients: MemoryClients) -> None:
        if clients.versions is not None:
            self.use_versions(clients.versions)

    def use_versions(self, versions) -> None:
        """`versions.version(user_id, kind)` / `.bump(user_id, kind)`: shared by every replica."""
        self._bm25.shared = versions

    # --- building -------------------------------------------------------------

    def fingerprint(self, session: SessionRecord, llm_session, options) -> str:
        """What a build depends on: the session's turns and date, the rate, the segmenter and compressor used."""
        payload = json.dumps(
            [
                session.date,
                [(t.speaker, t.text, t.turn_id) for t in session.turns],
                float(options.compression_rate),
                self.segmenter.fingerprint(llm_session),
                self.compressor.name if self.compressor is not None else "none",
            ]
        )
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]

    def build_step(self, plan: StepPlan) -> tuple[bool, str]:
        return plan.segmentation, "SeCom: segmenting and compressing the session"

    def build(
        self, user_id: str, session: SessionRecord, llm_session, options, trace: Trace, force: bool = False
    ) -> list[str] | None:
        """Segment, compress, embed and store one session; returns the new segment ids.

        Idempotent: the session's old segments are replaced. When they were built
        from the same session content with the same settings, nothing is redone
        and None is returned (unless `force`).
        """
        exs = exchanges([t for t in session.turns if (t.text or "").strip()])
        fp = self.fingerprint(session, llm_session, options)
        with trace.timed("secom_build"):
            old = self.store.get(user_id, KIND, where={"session_id": session.session_id})
            if old and not force and all((h.metadata or {}).get("fingerprint") == fp for h in old):
                return None
            with self._write:
                self.store.delete(user_id, KIND, where={"session_id": session.session_id})
                self.store.delete(user_id, PARTS, where={"session_id": session.session_id})
            self._bm25.invalidate(user_id)
            if not exs:
                return []
            with trace.timed("secom_segment"):
                segs = self.segmenter.segment(exs, llm_session)
            texts = ["\n".join(exchange_lines(ex) for ex in exs[s : e + 1]) for s, e, _ in segs]
            with trace.timed("secom_compress"):
                keys, compressed = self._compress(texts, options.compression_rate, trace)
            with trace.timed("secom_embed"):
                emb = embed_segments(self.embedder, keys)
            ids = [f"{session.session_id}:seg{i}" for i in range(len(segs))]
            ts = timestamp(session.date)
            metas = []
            for i, (s, e, summary) in enumerate(segs):
                seg_turns = [t for ex in exs[s : e + 1] for t in ex]
                turn_ids = [t.turn_id for t in seg_turns if t.turn_id]
                metas.append(
                    {
                        "turn_lines": ",".join(str(len(t.text.split("\n"))) for t in seg_turns),
                        "turn_id_per_turn": ",".join(t.turn_id or "" for t in seg_turns),
                        "compressed": bool(compressed),
                        "session_id": session.session_id,
                        "date": session.date or "",
                        "date_ts": ts,
                        "start": int(s),
                        "end": int(e),
                        "text": texts[i],
                        "summary": summary or "",
                        "turn_ids": ",".join(turn_ids),
                        "compression_rate": float(options.compression_rate),
                        "fingerprint": fp,
                        "vector": SCHEME,
                    }
                )
            with self._write:
                self.store.add(user_id, KIND, ids, keys, emb.vectors, metas)
                self._add_parts(user_id, ids, [session.session_id] * len(ids), emb)
            self._bm25.invalidate(user_id)
        return ids

    def _add_parts(self, user_id: str, seg_ids: list[str], session_ids: list[str], emb: Embedded) -> None:
        """Store each segment's parts with their vectors ("{segment id}#{j}"); call with `_write` held."""
        ids, docs, vecs, metas = [], [], [], []
        for seg_id, sid, parts, pv in zip(seg_ids, session_ids, emb.parts, emb.part_vectors, strict=True):
            for j, (text, v) in enumerate(zip(parts, pv, strict=True)):
                ids.append(f"{seg_id}#{j}")
                docs.append(text)
                vecs.append(v)
                metas.append({"segment": seg_id, "session_id": sid, "vector": SCHEME})
        if ids:
            self.store.add(user_id, PARTS, ids, docs, np.stack(vecs), metas)

    def _compress(self, texts: list[str], rate: float, trace: Trace) -> tuple[list[str], bool]:
        """(keys, compressed): compressed is False when the keys are the original text."""
        if self.compressor is None:
            trace.notice(self.compressor_note)
            return list(texts), False
        if rate >= 1.0:
            return list(texts), False
        try:
            keys = self.compressor.compress(texts, rate)
        except Exception as e:
            trace.notice(f"compression failed ({type(e).__name__}: {e}); segment keys are the original text")
            return list(texts), False
        return [k if (k or "").strip() else t for k, t in zip(keys, texts, strict=False)], True

    # --- retrieval ------------------------------------------------------------

    def _rank_bm25(self, user_id: str, query: str) -> list[tuple[Any, float]]:
        idx, hits = self._bm25.get(user_id, lambda: self.store.get(user_id, KIND))
        return [(hits[i], s) for i, s in idx.top(query, CANDIDATES)]

    def _upgrade_vectors(self, user_id: str) -> None:
        """Once per user and process, before a dense search: segments built before their vectors were made
        from the whole segment (a fingerprint, no `"vector": SCHEME`) get their vector and parts made from
        their stored key, under the same id, text and metadata. Records not built here (no fingerprint)
        are left as they are, and ranked by their own vector."""
        if user_id in self._upgraded:
            return
        old = [h for h in self.store.get(user_id, KIND) if _needs_vector(h)]
        if old:
            emb = embed_segments(self.embedder, [h.document for h in old])
            with self._write:  # write back only what is still there, unchanged
                now = {h.id: h for h in self.store.get(user_id, KIND, ids=[h.id for h in old])}
                keep = [
                    i
                    for i, h in enumerate(old)
                    if h.id in now and _needs_vector(now[h.id]) and now[h.id].document == h.document
                ]
                if keep:
                    ids = [old[i].id for i in keep]
                    metas = [{**(now[x].metadata or {}), "vector": SCHEME} for x in ids]
                    part = Embedded(
                        emb.vectors[keep], [emb.parts[i] for i in keep], [emb.part_vectors[i] for i in keep]
                    )
                    self.store.add(user_id, KIND, ids, [old[i].document for i in keep], part.vectors, metas)
                    self._add_parts(user_id, ids, [str(m.get("session_id", "")) for m in metas], part)
        self._upgraded.add(user_id)

    def _rank_dense(self, user_id: str, query: str) -> list[tuple[Any, float]]:
        """Segments by `mixed_score`: the cosine of their best part and of their mean vector. A segment
        without parts (not built here) is ranked by its own vector's cosine alone. Past the pools (a user
        with more than SEGMENT_POOL segments or PART_POOL parts), a cosine not read counts as the lowest
        one read."""
        self._upgrade_vectors(user_id)
        q = self.embedder.embed([query])[0]
        n_seg, n_parts = self.store.count(user_id, KIND), self.store.count(user_id, PARTS)
        segs = self.store.query(user_id, KIND, q, min(n_seg, SEGMENT_POOL) if n_parts else CANDIDATES)
        parts = self.store.query(user_id, PARTS, q, min(n_parts, PART_POOL)) if n_parts else []
        mean = {h.id: float(h.score) for h in segs}
        best: dict[str, float] = {}
        for p in parts:
            seg = str((p.metadata or {}).get("segment", ""))
            best[seg] = max(best.get(seg, -1.0), float(p.score))
        mean_floor = min(mean.values(), default=0.0) if len(segs) < n_seg else None
        part_floor = min(best.values(), default=0.0) if len(parts) < n_parts else None
        hits = {h.id: h for h in segs}
        missing = [i for i in best if i not in hits]
        if missing:
            hits.update((h.id, h) for h in self.store.get(user_id, KIND, ids=missing))
        scored = []
        for i, h in hits.items():
            m = mean.get(i, mean_floor if mean_floor is not None else 0.0)
            x = best.get(i, part_floor if part_floor is not None else m)  # no parts read: its own vector
            scored.append((h, mixed_score(x, m)))
        scored.sort(key=lambda p: (-p[1], p[0].id))
        return scored[:CANDIDATES]

    def rank(self, user_id: str, query: str, retriever: str) -> list[tuple[Any, float]]:
        """All candidate segments (store hits) with scores, best first."""
        if not (query or "").strip() or self.store.count(user_id, KIND) == 0:
            return []
        if retriever == "bm25":
            return self._rank_bm25(user_id, query)
        if retriever == "dense":
            return self._rank_dense(user_id, query)
        by_id: dict[str, Any] = {}
        rankings = []
        for ranked in (self._rank_bm25(user_id, query), self._rank_dense(user_id, query)):
            rankings.append([h.id for h, _ in ranked])
            by_id.update((h.id, h) for h, _ in ranked if h.id not in by_id)
        return [(by_id[i], score) for i, score in rrf(rankings)]

    def retrieve(
        self,
        user_id: str,
        query: str,
        options,
        trace: Trace,
        max_segments: int | None = None,
        sessions: set[str] | None = None,
    ) -> list[dict]:
        """The best `options.k` segments for `query` packed into `options.budget` tokens, in
        chronological order. The best segment is always used: one that does not fit is cut to
        the turns around its best-matching exchange (memory.packing). `max_segments` overrides k
        (0 = only the budget limits); `sessions` keeps only segments of those sessions. Each dict's
        "context" is the text the reply reads.

        A question about the present ("Where do I live now?", `present.asks_present`): BM25 gets the
        dense ranking fused in (hybrid), since the latest statement of a fact often shares no word with
        the question ("I moved to Lisbon"), and the segments come newest first, so the reply reads the
        current value before the old one (trace.counts["secom_present"] = 1)."""
        t0 = time.perf_counter()
        try:
            limit = options.k if max_segments is None else max_segments
            present = asks_present(query)
            retriever = "hybrid" if present and options.retriever == "bm25" else options.retriever
            ranked = self.rank(user_id, query, retriever)
            if sessions is not None:  # the memory as of a session or date (agent.memory_context's as_of)
                ranked = [(h, sc) for h, sc in ranked if (h.metadata or {}).get("session_id") in sessions]
            if limit:
                ranked = ranked[:limit]
            idf = self._idf(user_id, query)
            units = [self._unit(h, score, idf) for h, score in ranked]
            picked: list[dict] = []
            for unit, pieces in pack(units, options.budget).chosen:
                d = unit.meta
                body = [p for p in pieces if p is not unit.head]
                d["cut"] = len(body) < len(unit.pieces)
                d["text"] = "\n".join(p.text for p in body)
                d["context"] = render(unit, pieces)
                d["covers"] = [t for p in body for t in p.covers]
                d["tokens"] = count_tokens(d["context"])
                picked.append(d)
            picked.sort(key=lambda d: (*ts_order_key(d["_ts"]), _natural(d["session_id"]), d["start"]))
            if present:  # newest first; undated segments stay last
                dated = [d for d in picked if not ts_order_key(d["_ts"])[0]]
                picked = dated[::-1] + [d for d in picked if ts_order_key(d["_ts"])[0]]
                trace.count("secom_present", 1)
            for d in picked:
                del d["_ts"]
            if any(not d["compressed"] for d in picked):
                trace.notice(
                    "segment keys are the original text (not compressed: "
                    f"{self.compressor_note if self.compressor is None else 'compression off or failed'})"
                )
            trace.segments = cast(list[Segment], list(picked))  # unit.meta's keys less "_ts": a Segment
            return picked
        finally:
            trace.timings["secom_retrieve"] = trace.timings.get("secom_retrieve", 0.0) + time.perf_counter() - t0

    def recall(self, user_id: str, options: Options, trace: Trace, ask: RecallRequest) -> Recall:
        """The segments one reply reads (SeCom asks no LLM at reply time)."""
        yield ReplyEvent("status", "Retrieving segments of earlier sessions...")
        segs = self.retrieve(user_id, ask.query(options), options, trace, sessions=ask.sessions)
        return Recalled([s["context"] for s in segs], [tuple(s["covers"]) for s in segs])

    def _idf(self, user_id: str, query: str) -> dict[str, float]:
        idx, _ = self._bm25.get(user_id, lambda: self.store.get(user_id, KIND))
        return {t: idx.idf(t) for t in set(tokenize(query))}

    @staticmethod
    def _unit(h, score: float, idf: dict[str, float]) -> Unit:
        """A stored segment as packing pieces (one per turn), anchored at its best-matching turn."""
        m = h.metadata or {}
        text = m.get("text", h.document)
        lines = text.split("\n")
        counts = [int(x) for x in str(m.get("turn_lines", "")).split(",") if x.isdigit()]
        tids = str(m.get("turn_id_per_turn", "")).split(",")
        if not counts or sum(counts) != len(lines) or len(tids) != len(counts):
            # Records built before per-turn provenance: one piece per line when lines and ids agree.
            ids = [x for x in str(m.get("turn_ids", "")).split(",") if x]
            counts = [1] * len(lines)
            tids = ids if len(ids) == len(lines) else [""] * len(lines)
            if not any(tids) and ids:
                counts, tids = [len(lines)], [",".join(ids)]
        pieces, i = [], 0
        for n, tid in zip(counts, tids, strict=False):
            pieces.append(Piece("\n".join(lines[i : i + n]), tuple(x for x in tid.split(",") if x)))
            i += n
        # fsum: exact, so the same in every process (a plain sum over a set of strings depends on the
        # hash seed's iteration order, and a last-bit difference flipped near-tied anchors between runs).
        match = [math.fsum(idf.get(t, 0.0) for t in set(tokenize(p.text))) for p in pieces]
        anchor = max(range(len(pieces)), key=lambda j: (match[j], -j))  # the earliest best-matching turn
        meta = {
            "id": h.id,
            "session_id": m.get("session_id", ""),
            "date": m.get("date", ""),
            "key": h.document,
            "summary": m.get("summary", ""),
            "score": float(score),
            "start": int(m.get("start", 0)),
            "end": int(m.get("end", 0)),
            "turn_ids": [x for x in str(m.get("turn_ids", "")).split(",") if x],
            "compressed": bool(m.get("compressed", False)),
            "_ts": float(m.get("date_ts", -1.0)),
        }
        head = Piece(f"({meta['date']})") if meta["date"] else None
        return Unit(h.id, pieces, anchor=anchor, meta=meta, head=head)

    # --- forgetting -------------------------------------------------------------

    def forget(
        self,
        user_id: str,
        memory: Forgetting,
        session_of: SessionOf,
        options: Options | None = None,
        trace: Trace | None = None,
    ) -> dict:
        """Rebuild every segment built from any of `memory.turns` without those turns ("delete means delete").

        The store keeps each segment's joined text only, so `session_of(session_id)` gives the
        transcript (a SessionRecord, or None). An affected segment is re-made from its remaining
        turns: text, compressed key and embedding replaced under the same id, its (LLM-written)
        summary dropped because it may repeat the fact, and the BM25 index rebuilt. A segment left
        without turns, or whose transcript is gone, is removed. Returns the ids of the segments
        rebuilt and removed, and the turn ids taken out.
        """
        drop = {str(t) for t in memory.turns if t}
        out: dict = {"rebuilt": [], "removed": [], "turns": []}
        if not drop:
            return out
        trace = trace or Trace(strategy="forget")
        taken: set[str] = set()
        for h in self.store.get(user_id, KIND):
            m = dict(h.metadata or {})
            ids = [t for t in str(m.get("turn_ids", "")).split(",") if t]
            hit = drop.intersection(ids)
            if not hit:
                continue
            taken |= hit
            rec = session_of(str(m.get("session_id", "")))
            by_id = {t.turn_id: t for t in (rec.turns if rec else [])}
            kept = [by_id[t] for t in ids if t not in drop and t in by_id and (by_id[t].text or "").strip()]
            if not kept:
                with self._write:
                    self.store.delete(user_id, KIND, ids=[h.id])
                    self.store.delete(user_id, PARTS, where={"segment": h.id})
                out["removed"].append(h.id)
                continue
            text = "\n".join(exchange_lines(ex) for ex in exchanges(kept))
            rate = float(m.get("compression_rate", getattr(options, "compression_rate", 1.0)))
            keys, compressed = self._compress([text], rate, trace)
            key = keys[0]
            m["vector"] = SCHEME
            forgotten = sorted(set(str(m.get("forgotten", "")).split(",")) - {""} | hit)
            m.update(
                text=text,
                summary="",
                turn_ids=",".join(t.turn_id for t in kept),
                forgotten=",".join(forgotten),
                compressed=bool(compressed),
                turn_lines=",".join(str(len(t.text.split("\n"))) for t in kept),
                turn_id_per_turn=",".join(t.turn_id or "" for t in kept),
            )
            emb = embed_segments(self.embedder, [key])
            with self._write:
                self.store.delete(user_id, KIND, ids=[h.id])
                self.store.delete(user_id, PARTS, where={"segment": h.id})
                self.store.add(user_id, KIND, [h.id], [key], emb.vectors, [m])
                self._add_parts(user_id, [h.id], [str(m.get("session_id", ""))], emb)
            out["rebuilt"].append(h.id)
        self._bm25.invalidate(user_id)
        out["turns"] = sorted(taken)
        return out

    # --- housekeeping ---------------------------------------------------------

    def delete_session(self, user_id: str, session_id: str) -> None:
        with self._write:
            self.store.delete(user_id, KIND, where={"session_id": session_id})
            self.store.delete(user_id, PARTS, where={"session_id": session_id})
        self._bm25.invalidate(user_id)

    def drop_user(self, user_id: str) -> None:
        with self._write:
            self.store.drop_user(user_id, (KIND, PARTS))
            self._upgraded.discard(user_id)
        self._bm25.invalidate(user_id)

    def export(self, user_id: str) -> list[dict]:
        """Every segment of the user (original text, key, provenance), in chronological order."""
        out = []
        for h in self.store.get(user_id, KIND):
            m = dict(h.metadata or {})
            m.pop("fingerprint", None)
            m.pop("vector", None)
            out.append({"id": h.id, "key": h.document, **m})
        out.sort(
            key=lambda d: (
                *ts_order_key(float(d.get("date_ts", -1))),
                _natural(str(d.get("session_id", ""))),
                int(d.get("start", 0)),
            )
        )
        return out

    def view(self, user_id: str) -> dict:
        """{"segments": the export}: every segment, its text, key and turns, in chronological order."""
        return {"segments": self.export(user_id)}

    def count(self, user_id: str) -> int:
        return self.store.count(user_id, KIND)
