"""SeCom memory (Pan et al., ICLR 2025): topical segments per session, compressed retrieval keys.

* `segmentation`: LLM segmentation (validated and repaired) and the offline embedding segmenter
* `compression`: LLMLingua-2 behind a small protocol
* `strategy.SecomMemory`: build segments at session close; retrieve them (BM25 / dense / hybrid)

The segmentation metrics and dataset loaders, the embedding segmenter's fitting and the rubric learning
are tools, not the product: bench/secom/ (`python -m bench learn`, `python -m bench segmentation`).
"""
