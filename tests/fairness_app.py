"""app.py for the fairness benchmark: the same app, plus an /import_history API endpoint when the
app does not have one yet (it lands with the offline-mode change, issue 9).

    python tests/fairness_app.py        # environment as for app.py
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import gradio as gr  # noqa: E402

import app  # noqa: E402


def main() -> None:
    import logging
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app.load_env()
    from ui import fairness, launch_kwargs
    from ui.api import _end
    from sessions.service import user_message

    demo = app.build()
    service = demo.memory_service
    if "import_history" not in {d.api_name for d in demo.fns.values()}:
        def import_history(user_id: str, data: str, sample_id: str = "") -> dict:
            """Import a history (JSON text) and build its memory (stand-in until issue 9's endpoint)."""
            try:
                return _end(service.import_history(user_id, data, sample_id or ""))
            except Exception as e:  # noqa: BLE001
                raise gr.Error(user_message(e)) from None
        with demo:
            gr.api(import_history, api_name="import_history", **fairness.build_events())
    demo.launch(**launch_kwargs())


if __name__ == "__main__":
    main()
