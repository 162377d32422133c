"""The embedded Chroma's files after a purge (memory/chroma_purge.py), on a real PersistentClient:
a dropped collection's vector-index folder is gone, the unused slots of a live index are zeroes
(hnswlib writes its malloc'ed element array whole, heap bytes included), and the live collection
still answers, in this client and in a new one opened on the same folder.
"""

from __future__ import annotations

import numpy as np

from memory.chroma_purge import _HEADER, blank_unused_slots, purge
from memory.store import ChromaStore


def _index_dirs(path):
    return sorted(d for d in path.iterdir() if d.is_dir())


def test_purge_removes_dropped_indexes_and_zeroes_unused_slots(tmp_path):
    path = tmp_path / "chroma"
    store = ChromaStore(path=path)
    rng = np.random.default_rng(0)
    vecs = rng.random((120, 8), dtype=np.float32)
    # Enough records that Chroma writes both vector indexes to disk.
    for user in ("keep", "drop"):
        ids = [f"{user}{i}" for i in range(120)]
        store.add(user, "theanine", ids, [f"text {i}" for i in ids], vecs, [{"n": i} for i in range(120)])
    dirs = _index_dirs(path)
    assert len(dirs) >= 2, "Chroma wrote no vector index to disk: the test checks nothing"
    # Plant bytes in the last slot of every index, as heap garbage would be.
    for d in dirs:
        with (d / "data_level0.bin").open("r+b") as f:
            f.seek(-64, 2)
            f.write(b"ZQXPLANTED" * 6)
    store.drop_user("drop", ("theanine",))
    assert purge(path)
    left = _index_dirs(path)
    assert len(left) == len(dirs) - 1  # the dropped collection's folder went
    for d in left:
        _v, _o, _max, count, per = _HEADER.unpack_from((d / "header.bin").read_bytes())
        level0 = (d / "data_level0.bin").read_bytes()
        assert b"ZQXPLANTED" not in level0 and set(level0[count * per :]) <= {0}
        assert blank_unused_slots(d) == len(level0) - count * per + (d / "length.bin").stat().st_size - count * 4
    # The kept collection answers, here and from a fresh client on the same files.
    assert [h.id for h in store.query("keep", "theanine", vecs[5], 1)] == ["keep5"]
    assert [h.id for h in ChromaStore(path=path).query("keep", "theanine", vecs[7], 1)] == ["keep7"]
