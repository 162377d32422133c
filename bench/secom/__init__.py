"""SeCom's learning tools (not used by the app at runtime; the segmenters themselves are memory/secom/).

* `seg_metrics`: Pk, WindowDiff, boundary F1 and Score, DialSeg711 and TIAGE loaders
* `segmenter_fit`: fitting the embedding segmenter's parameters on labelled dialogues
* `learn`: learning the LLM segmenter's rubric (its prompts are memory/secom/rubric_prompts.py, whose
  `PROJECT_RUBRIC` the app can put in the rubric slot); `python -m bench learn rubric|embedding`
"""
