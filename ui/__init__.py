"""The Gradio app: layout, handlers, panels and the graph view. Holds no memory algorithm.

`build_demo(service, settings, storage_secret)` builds the Blocks; app.py builds the agent
and the session service and launches it with `launch_kwargs()`.
"""

from .layout import build_demo, launch_kwargs

__all__ = ["build_demo", "launch_kwargs"]
