"""Delete means gone, in an embedded Chroma: deleted records leave no text in its files.

Chroma keeps every write in its own log (the `embeddings_queue` table of chroma.sqlite3) until
its vector index has persisted it, keeps deleted words in its full-text index until the index
is merged, and SQLite keeps deleted rows in free pages. After a deletion, `purge(path)`:

* drops the log rows of collections that no longer exist (Forget me drops a user's collections);
* blanks the metadata (the document text) of log writes that a later delete of the same record
  cancels: replaying the log still adds then deletes the record, so the index stays consistent;
* merges the full-text index (FTS5 'optimize') and VACUUMs the file (free pages are not kept);
* removes the vector-index folders of dropped collections (Chroma leaves them on disk);
* zeroes the unused slots of every vector index file. hnswlib allocates its element array with
  malloc and writes it whole, so slots past the last element hold whatever the process's heap
  held, which can be any text it handled. Chroma rewrites only the elements it changes, so the
  zeroes stay until the index next grows (a later resize can capture new heap bytes).

A Chroma server (CHROMA_HOST) keeps its own files; this reaches only the embedded one.
"""

from __future__ import annotations

import logging
import re
import shutil
import sqlite3
import struct
from pathlib import Path

log = logging.getLogger(__name__)

_DELETE = 3  # chromadb's Operation.DELETE in the log
_UUID_CHARS = 36  # a log topic ends with its collection's id
_SEGMENT_DIR = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# header.bin of Chroma's hnswlib: int32 version, then size_t offsetLevel0, max_elements,
# cur_element_count, size_data_per_element, ...
_HEADER = struct.Struct("<iQQQQ")


def purge(path: Path | str) -> bool:
    """Purge the embedded Chroma at `path` (its folder); False when there is nothing to purge or it failed."""
    db = Path(path) / "chroma.sqlite3"
    if not db.exists():
        return False
    con = sqlite3.connect(db, timeout=30, isolation_level=None)
    try:
        con.execute("PRAGMA secure_delete=ON")
        con.execute("BEGIN IMMEDIATE")
        con.execute(
            f"DELETE FROM embeddings_queue WHERE substr(topic, -{_UUID_CHARS}) NOT IN (SELECT id FROM collections)"
        )
        con.execute(
            f"""UPDATE embeddings_queue SET metadata = NULL
                WHERE operation != {_DELETE} AND metadata IS NOT NULL AND EXISTS (
                    SELECT 1 FROM embeddings_queue AS d
                    WHERE d.topic = embeddings_queue.topic AND d.id = embeddings_queue.id
                      AND d.operation = {_DELETE} AND d.seq_id > embeddings_queue.seq_id)"""
        )
        con.execute("COMMIT")
        con.execute("INSERT INTO embedding_fulltext_search(embedding_fulltext_search) VALUES('optimize')")
        con.execute("VACUUM")
        live = {row[0] for row in con.execute("SELECT id FROM segments")}
    except sqlite3.Error:
        log.exception("could not purge deleted records from %s", db)
        return False
    finally:
        con.close()
    try:
        for d in Path(path).iterdir():
            if not (d.is_dir() and _SEGMENT_DIR.fullmatch(d.name)):
                continue
            if d.name not in live:
                shutil.rmtree(d)
            else:
                blank_unused_slots(d)
    except OSError:
        log.exception("could not purge the vector index files under %s", path)
        return False
    return True


def blank_unused_slots(segment: Path) -> int:
    """Zero the element slots past the last element in a vector index folder; the bytes zeroed."""
    header, level0, lengths = segment / "header.bin", segment / "data_level0.bin", segment / "length.bin"
    if not (header.exists() and level0.exists()):
        return 0
    raw = header.read_bytes()
    if len(raw) < _HEADER.size:
        return 0
    _version, _offset, _max_elements, count, per_element = _HEADER.unpack_from(raw)
    zeroed = _zero_from(level0, count * per_element)
    if lengths.exists():
        zeroed += _zero_from(lengths, count * 4)  # one int32 link-list length per element
    return zeroed


def _zero_from(path: Path, start: int) -> int:
    size = path.stat().st_size
    if start >= size:
        return 0
    with path.open("r+b") as f:
        f.seek(start)
        f.write(bytes(size - start))
    return size - start
