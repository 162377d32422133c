"""Run the UI on the scripted agent (fast, no model): `python tests/ui_fake_app.py [port]`.

For developing the UI only; the real app is app.py.
"""
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory.settings import Settings  # noqa: E402
from sessions import SessionService  # noqa: E402
from ui import build_demo, launch_kwargs  # noqa: E402
from ui_fixtures import ScriptedAgent  # noqa: E402

if __name__ == "__main__":
    data = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(tempfile.mkdtemp(prefix="memory-chat-fake-"))
    settings = Settings(data_dir=data)
    demo = build_demo(SessionService(settings, ScriptedAgent()), settings, "fake-secret-0123456789")
    demo.queue().launch(server_name="127.0.0.1", server_port=int(sys.argv[1]) if len(sys.argv) > 1 else 7861,
                        **launch_kwargs())
