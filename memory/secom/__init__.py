"""SeCom memory (Pan et al., ICLR 2025): topical segments per session, compressed retrieval keys.

* `segmentation`: LLM segmentation (validated and repaired) and the offline embedding segmenter
* `compression`: LLMLingua-2 behind a small protocol
* `strategy.SecomMemory`: build segments at session close; retrieve them (BM25 / dense / hybrid)
* `seg_metrics`: Pk, WindowDiff, boundary F1 and Score, DialSeg711 and TIAGE loaders
"""
