"""THEANINE (Kim et al., NAACL 2025): a never-deleted memory graph linked by time and cause/effect,
retrieved as whole timelines and refined by the LLM for the current dialogue."""
