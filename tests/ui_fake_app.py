"""Run the UI on the scripted agent (fast, no model): `python -m tests.ui_fake_app [port]`.

For developing the UI only; the real app is app.py.
"""

import sys
import tempfile
from pathlib import Path

from memory.settings import Settings
from sessions import open_service
from tests.fakes import ScriptedAgent
from ui import build_demo, launch_kwargs

if __name__ == "__main__":
    data = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(tempfile.mkdtemp(prefix="memory-chat-fake-"))
    settings = Settings(data_dir=data)
    demo = build_demo(open_service(settings, ScriptedAgent()), settings, "fake-secret-0123456789")
    demo.queue().launch(
        server_name="127.0.0.1", server_port=int(sys.argv[1]) if len(sys.argv) > 1 else 7861, **launch_kwargs()
    )
