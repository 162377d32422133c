"""Long-term memory for a chat agent: THEANINE timelines and SeCom segments.

This package never imports Gradio. The app and the benchmarks use it through
`memory.agent.MemoryAgent`.
"""
