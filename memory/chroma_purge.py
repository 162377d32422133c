"""Delete means gone, in an embedded Chroma: deleted records leave no text in its files.

Chroma keeps every write in its own log (the `embeddings_queue` table of chroma.sqlite3) until
its vector index has persisted it, keeps deleted words in its full-text index until the index
is merged, and SQLite keeps deleted rows in free pages. After a deletion, `purge(path)`:

* drops the log rows of collections that no longer exist (Forget me drops a user's collections);
* blanks the metadata (the document text) of log writes that a later delete of the same record
  cancels: replaying the log still adds then deletes the record, so the index stays consistent;
* merges the full-text index (FTS5 'optimize') and VACUUMs the file (free pages are not kept).

A Chroma server (CHROMA_HOST) keeps its own files; this reaches only the embedded one.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

log = logging.getLogger(__name__)

_DELETE = 3  # chromadb's Operation.DELETE in the log
_UUID_CHARS = 36  # a log topic ends with its collection's id


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
        return True
    except sqlite3.Error:
        log.exception("could not purge deleted records from %s", db)
        return False
    finally:
        con.close()
