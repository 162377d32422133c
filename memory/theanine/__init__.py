"""THEANINE (Kim et al., NAACL 2025): a never-deleted memory graph linked by time and cause/effect,
retrieved as timelines through the memories that match (within the reply's budget) and refined by the
LLM for the current dialogue."""
