import math
import random
import threading
import time

import numpy as np

from memory.bm25 import BM25Index, tokenize


def test_tokenize_lowercases_drops_stopwords_and_stems():
    assert tokenize("The Cats were HIKING in the mountains!") == ["cat", "hike", "mountain"]
    assert tokenize("The Cats", stem=False) == ["cats"]
    assert tokenize("") == [] and tokenize(None) == []  # type: ignore[arg-type]


def test_scores_match_hand_computed_okapi():
    docs = ["cat cat dog", "dog bird", "fish"]
    idx = BM25Index(docs, k1=1.2, b=0.75, stem=False)
    s = idx.score("cat")
    n, df, avgdl = 3, 1, (3 + 2 + 1) / 3
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    tf, dl = 2, 3
    expected = idf * tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * dl / avgdl))
    assert s.shape == (3,)
    assert abs(s[0] - expected) < 1e-5 and s[1] == 0 and s[2] == 0
    # a repeated query term counts twice, as in Okapi with query term frequency
    assert abs(idx.score("cat cat")[0] - 2 * expected) < 1e-4


def test_ranking_and_rebuild_with_one_more_document():
    docs = ["I adopted a puppy last week", "We went hiking in the Alps", "My sister paints landscapes"]
    idx = BM25Index(docs)
    assert idx.top("Where did they go hiking?", 2)[0][0] == 1
    idx = BM25Index([*docs, "Hiking again, this time in Norway, more hiking"])  # a changed corpus is a new index
    top = idx.top("hiking", 5)
    assert [i for i, _ in top] == [3, 1]  # only matching documents, best first
    assert len(idx) == 4 and idx.score("nothing-matches").sum() == 0
    assert idx.top("", 3) == [] and BM25Index().score("x").shape == (0,)


def test_pretokenised_documents_score_as_the_texts():
    docs = ["The cats were hiking", "", "A cat, a dog and another cat", "Dogs hiking in the mountains"]
    by_text, by_tokens = BM25Index(docs), BM25Index(tokens=[tokenize(d) for d in docs])
    for q in ("cat", "hiking dogs", "mountain cat cat", "nothing"):
        assert np.array_equal(by_text.score(q), by_tokens.score(q))
    assert by_text.idf("cat") == by_tokens.idf("cat") < by_text.idf("mountain") < by_text.idf("unseen")


def test_idf_never_negative_for_common_terms():
    idx = BM25Index(["apple"] * 10 + ["pear"], stem=False)
    assert (idx.score("apple") >= 0).all() and idx.score("apple")[0] > 0


def test_fast_on_many_short_documents():
    rng = random.Random(0)
    vocab = [f"w{i}" for i in range(5000)]
    docs = [" ".join(rng.choice(vocab) for _ in range(12)) for _ in range(10_000)]
    idx = BM25Index(docs, stem=False)
    times = []
    for _ in range(60):
        q = " ".join(rng.choice(vocab) for _ in range(8))
        t0 = time.perf_counter()
        s = idx.score(q)
        times.append(time.perf_counter() - t0)
    assert s.shape == (10_000,)
    assert np.percentile(times, 95) < 0.05


def test_concurrent_rebuild_and_score():
    # As SeCom's per-user cache does it: a writer publishes a rebuilt index while readers query the current one.
    current = [BM25Index()]
    errors = []

    def writer():
        for i in range(200):
            current[0] = BM25Index([f"note number {j} about gardening" for j in range(i + 1)])

    def reader():
        try:
            for _ in range(200):
                idx = current[0]
                s = idx.score("gardening")
                assert len(s) == len(idx) and (s > 0).all()
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=writer), threading.Thread(target=reader)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    idx = current[0]
    assert not errors and len(idx) == 200 and (idx.score("gardening") > 0).all()
