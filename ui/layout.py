"""The Gradio Blocks: chat on the left, "See why" (graph, timelines, segments, cost) on the right.

Only layout and wiring live here; what each event does is in handlers.py.
UI events are api_visibility="private": the documented API is in api.py.
"""
from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from memory.settings import BACKENDS, RETRIEVERS, STRATEGIES, Settings
from sessions import SessionService
from sessions.chat import MAX_MESSAGE_CHARS
from sessions.lifecycle import today

from . import fairness, panels
from .api import register_api
from .handlers import Handlers

CSS = """
.mc-banner {padding: 8px 12px; border-radius: 6px; background: #eef4fb; font-size: 0.92em}
.mc-warn {margin-top: 4px; color: #8a5300}
.mc-status {padding: 6px 10px; border-radius: 6px; margin: 4px 0; background: #f3f4f6}
.mc-error {background: #fde8e8; color: #8a1c1c}
.mc-ok {background: #e7f6ea; color: #1d5e2c}
.mc-busy {background: #fff7e0}
.mc-muted {color: #777}
.mc-why h4 {margin: 4px 0} .mc-why h5 {margin: 10px 0 4px}
.mc-table {font-size: 0.85em; border-collapse: collapse; width: 100%}
.mc-table td, .mc-table th {border: 1px solid #e5e7eb; padding: 2px 6px; vertical-align: top}
.mc-timelines li, .mc-segments li {margin-bottom: 6px}
.mc-raw {font-family: monospace; font-size: 0.85em; white-space: pre-wrap}
.mc-refined {font-size: 0.9em}
.mc-key {font-family: monospace; font-size: 0.85em; color: #555}
.mc-text, .mc-reply {white-space: pre-wrap}
.mc-legend {font-size: 0.8em; margin-bottom: 4px}
.mc-chip {color: #fff; border-radius: 8px; padding: 0 6px; margin: 0 2px; display: inline-block}
.mc-rel {border-bottom: 3px solid; margin: 0 4px; display: inline-block}
.mc-graph-empty {padding: 24px; border: 1px dashed #ccc; border-radius: 6px; text-align: center}
.mc-compare {border: 1px solid #e5e7eb; border-radius: 6px; padding: 8px}
.mc-past summary {cursor: pointer}
.mc-turns {font-size: 0.9em}
/* The chatbot's own Clear button only empties the display, not the stored session: hidden to avoid confusion. */
#chat button[aria-label="Clear"] {display: none !important}
"""


def build_demo(service: SessionService, settings: Settings, storage_secret: str,
               allow_llm_change: bool | None = None) -> gr.Blocks:
    allow_llm_change = fairness.llm_choice_allowed(service, settings, allow_llm_change)
    o = settings.options
    c = SimpleNamespace()
    with gr.Blocks(title="Memory chat: THEANINE and SeCom") as demo:
        # The browser's user id, encrypted in its localStorage; the secret is stable across restarts.
        c.uid = gr.BrowserState(None, storage_key="memory_chat_user", secret=storage_secret)
        c.msg_ids = gr.State([])
        gr.HTML(panels.banner_html(settings.llm.describe(), settings.llm.is_bundled, not allow_llm_change))
        with gr.Row(equal_height=False):
            with gr.Column(scale=5):
                c.session_header = gr.HTML(elem_id="session-header-wrap")
                c.chatbot = gr.Chatbot(label="Chat", height=480, elem_id="chat", feedback_options=None,
                                       buttons=["copy"], placeholder="Say hello. Your conversations are remembered "
                                       "across sessions.")
                with gr.Row():
                    c.msg = gr.Textbox(placeholder="Type a message and press Enter", show_label=False, scale=6,
                                       elem_id="msg", max_lines=6, max_length=MAX_MESSAGE_CHARS)
                    c.send = gr.Button("Send", variant="primary", scale=1, elem_id="send-btn")
                with gr.Row():
                    c.strategy = gr.Radio([(panels.STRATEGY_NAMES[s], s) for s in STRATEGIES], value=o.strategy,
                                          label="Memory strategy for this chat", elem_id="strategy", scale=3)
                    c.compare = gr.Button("Compare strategies", elem_id="compare-btn", scale=1)
                    c.retry = gr.Button("Retry", visible=False, elem_id="retry-btn", scale=1)
                c.status = gr.HTML(elem_id="status")
                with gr.Row():
                    c.date = gr.Textbox(value=today(), label="Date of the next session (e.g. 2023-05-15)",
                                        elem_id="session-date", scale=2, max_length=64)
                    c.new = gr.Button("New session", elem_id="new-session-btn", scale=1)
                    c.end = gr.Button("End session", elem_id="end-session-btn", variant="stop", scale=1)
                with gr.Accordion("Earlier sessions", open=True):
                    c.sessions = gr.HTML(elem_id="earlier-sessions-wrap")
            with gr.Column(scale=6):
                gr.Markdown("### See why")
                c.graph = gr.HTML(elem_id="graph-panel")
                c.why = gr.HTML(panels.trace_html(None), elem_id="why-wrap")
        with gr.Row(visible=False) as c.compare_row:
            c.compare_cols = [gr.HTML(elem_id=f"compare-{s}") for s in STRATEGIES]
        with gr.Accordion("Settings", open=False):
            with gr.Row(visible=allow_llm_change, elem_id="llm-choice"):   # none offered when locked
                c.backend = gr.Radio(list(BACKENDS), value=settings.llm.backend, label="LLM backend",
                                     interactive=allow_llm_change)
                c.model = gr.Textbox(label="Model (OpenAI-compatible)", value=settings.llm.model,
                                     interactive=allow_llm_change)
                c.base_url = gr.Textbox(label="Base URL (empty = api.openai.com)", value=settings.llm.base_url,
                                        interactive=allow_llm_change)
            gr.Markdown("API keys are read only from the environment or `.env` and are sent only to the endpoint "
                        "they were configured for.")
            with gr.Row():
                c.temperature = gr.Number(o.temperature, label="temperature (0-2)")
                c.j = gr.Number(o.j, label="THEANINE j: links per new memory", precision=0)
                c.k = gr.Number(o.k, label="k: memories / segments retrieved", precision=0)
                c.n = gr.Number(o.n, label="THEANINE n: timelines per memory", precision=0)
            with gr.Row():
                c.compression_rate = gr.Number(o.compression_rate, label="SeCom compression rate (tokens kept)")
                c.retriever = gr.Radio(list(RETRIEVERS), value=o.retriever, label="SeCom retriever")
                c.max_reply_tokens = gr.Number(o.max_reply_tokens, label="max reply tokens", precision=0)
            gr.Textbox(settings.rubric_text() or "(none: SeCom's zero-shot segmentation prompt)",
                       label=f"SeCom segmentation rubric (SECOM_RUBRIC; segmenter in use: {settings.segmenter})",
                       interactive=False, lines=3, max_lines=12, elem_id="secom-rubric")
            c.save_settings = gr.Button("Apply settings", elem_id="apply-settings-btn")
            c.settings_status = gr.HTML()
        with gr.Accordion("Your data: import, export, delete a memory, forget me", open=False):
            with gr.Row():
                with gr.Column():
                    c.import_file = gr.File(label="History to import (.json: this app's format or LoCoMo)",
                                            file_types=[".json"], type="filepath")
                    c.sample_id = gr.Textbox(label="LoCoMo conversation id (only for files holding several)",
                                             max_length=100)
                    c.import_btn = gr.Button("Import and build memory")
                with gr.Column():
                    c.export_btn = gr.Button("Export my memory (JSON)")
                    c.export_file = gr.File(label="Download", interactive=False, visible=False)
                    c.memory = gr.Dropdown(label="Memory to delete", choices=[], elem_id="memory-select")
                    c.delete_btn = gr.Button("Delete this memory")
                with gr.Column():
                    c.forget_confirm = gr.Checkbox(label="Yes, delete all my sessions and memory")
                    c.forget_btn = gr.Button("Forget me", variant="stop")
            c.data_status = gr.HTML()

        register_api(service)     # first, so the documented endpoints get the plain names
        h = Handlers(service, c, allow_llm_change)
        settings_fields = [c.strategy, c.backend, c.model, c.base_url, c.temperature, c.j, c.k, c.n,
                           c.compression_rate, c.retriever, c.max_reply_tokens]
        view = [c.chatbot, c.msg_ids, c.session_header, c.sessions, c.graph, c.why, c.memory, c.retry]
        private = {"api_visibility": "private"}

        demo.load(h.load, [c.uid], [c.uid, *view, *settings_fields, c.date, c.status], **private)
        chat_out = [*view, c.msg, c.status]
        reply, build = fairness.reply_events(), fairness.build_events()
        c.msg.submit(h.send, [c.uid, c.msg, c.strategy], chat_out, **private, **reply)
        c.send.click(h.send, [c.uid, c.msg, c.strategy], chat_out, **private, **reply)
        c.retry.click(h.retry, [c.uid, c.strategy], chat_out, **private, **reply)
        c.compare.click(h.compare, [c.uid, c.msg], [c.compare_row, *c.compare_cols, c.status], **private, **reply)
        c.chatbot.select(h.select, [c.uid, c.msg_ids], [c.why, c.graph, c.status], **private)
        c.strategy.input(h.set_strategy, [c.uid, c.strategy], [c.session_header, c.status], **private)
        c.end.click(h.end_session, [c.uid], [*view, c.status], **private, **build)
        c.new.click(h.new_session, [c.uid, c.date], [*view, c.status], **private, **build)
        c.save_settings.click(h.save_settings, [c.uid, c.backend, c.model, c.base_url, c.temperature, c.j, c.k, c.n,
                                                c.compression_rate, c.retriever, c.max_reply_tokens],
                              [*settings_fields, c.settings_status], **private)
        c.import_btn.click(h.import_history, [c.uid, c.import_file, c.sample_id], [*view, c.data_status, c.import_file],
                           **private, **build)
        c.export_btn.click(h.export, [c.uid], [c.export_file, c.data_status], **private)
        c.delete_btn.click(h.delete_memory, [c.uid, c.memory], [c.graph, c.memory, c.data_status], **private)
        c.forget_btn.click(h.forget, [c.uid, c.forget_confirm],
                           [c.uid, *view, *settings_fields, c.forget_confirm, c.compare_row, c.export_file,
                            c.data_status], **private)
    return demo


def launch_kwargs() -> dict:
    """Arguments for demo.launch() (Gradio 6 takes theme and css there)."""
    # Uploads above the import cap (20 MB) plus a margin are refused by Gradio itself; between the two
    # the import shows its own message.
    return {"theme": gr.themes.Soft(), "css": CSS, "max_file_size": "25mb"}
