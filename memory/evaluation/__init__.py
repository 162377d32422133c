"""Evidence-recall evaluation on LoCoMo-format conversations, through the app's own path.

The one API that the CLI (`python -m bench locomo`), the service (sessions/evaluation.py)
and the evaluation tab (ui/evaluation.py) call. The benchmark package imports it; it never imports
the benchmark package.

* conversations: LoCoMo samples as `Conversation`s.
* spec: `RunSpec`, what one run measures, and its checks.
* agent_run: `run`, sessions closed by `MemoryAgent` and every question scored on `memory_context`.
* baselines, ranking: the turn / session baselines and the bm25 / dense / hybrid ranking of them.
* scoring: evidence recall and the results rows.
* reference_llm: the scripted summariser that answers with LoCoMo's observation facts.
* figures: the recall figures the tab shows and the CLI saves. machine: the facts a run ran on.
* teafarm: whether a TeaFarm result is a valid TeaFarm score (the tab shows the committed one).
"""
