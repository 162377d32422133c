"""The Gradio Blocks: chat on the left, "See why" (graph, timelines, segments, cost) on the right.

Only layout and wiring live here; what each event does is in handlers.py.
UI events are api_visibility="private": the documented API is in api.py.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from memory.dates import today
from memory.settings import BACKENDS, RETRIEVERS, STRATEGIES, Options, Settings
from sessions import SessionService
from sessions.lifecycle import MAX_MESSAGE_CHARS
from sessions.users import Accounts

from . import agent_keys_panel, evaluation, fairness, html_text, panels, see_why, timetravel
from .api import register_api
from .components import Page
from .events import FAST, QUIET, EventOptions
from .graph_view import static_dir
from .handlers import FIELD_LABELS, SETTING_FIELDS, Handlers

CSS = """
.mc-banner {padding: 6px 10px; border-radius: 6px; background: #eef4fb; font-size: 0.9em}
.mc-banner details {display: inline} .mc-banner details[open] {display: block; margin-top: 4px}
.mc-banner summary {cursor: pointer; display: inline; color: #1d4f91}
.mc-intro {font-size: 0.92em; margin: 2px 0 4px}
.mc-warn {color: #8a5300}
.mc-status {padding: 6px 10px; border-radius: 6px; margin: 4px 0; background: #f3f4f6}
.mc-error {background: #fde8e8; color: #8a1c1c}
.mc-ok {background: #e7f6ea; color: #1d5e2c}
.mc-busy {background: #fff7e0}
.mc-muted {color: #777}
.mc-job {padding: 6px 10px; border-radius: 6px; background: #fff7e0; margin: 4px 0; font-size: 0.9em}
.mc-bar {height: 8px; background: #eee; border-radius: 4px; overflow: hidden; margin-bottom: 4px}
.mc-bar span {display: block; height: 100%; background: #e0a100; transition: width 0.5s}
.mc-why h4 {margin: 4px 0} .mc-why h5 {margin: 10px 0 4px}
/* Trace tables: columns sized to their content, words kept whole (a long string still wraps), headers on
   one line; on a phone each row becomes a card whose cells are labelled by their column. */
.mc-table {font-size: 0.85em; border-collapse: collapse; width: 100%; table-layout: auto}
.mc-table td, .mc-table th {border: 1px solid #e5e7eb; padding: 2px 6px; vertical-align: top}
.mc-why .mc-table td, .mc-compare .mc-table td, .mc-table td {overflow-wrap: break-word; word-break: normal}
.mc-why .mc-table th, .mc-compare .mc-table th, .mc-table th {white-space: nowrap; word-break: normal}
@media (max-width: 600px) {
  .mc-table thead {display: none}
  .mc-table, .mc-table tbody, .mc-table tr, .mc-table td {display: block; width: auto !important}
  .mc-table tr {border: 1px solid #e5e7eb; border-radius: 6px; margin-bottom: 6px; padding: 2px 0}
  .mc-table td {border: none}
  .mc-table td[data-label]::before {content: attr(data-label) ": "; font-weight: 600; color: #555}
}
.mc-timelines li, .mc-segments li {margin-bottom: 6px}
.mc-raw {font-family: monospace; font-size: 0.85em; white-space: pre-wrap}
.mc-refined {font-size: 0.9em}
.mc-key {font-family: monospace; font-size: 0.85em; color: #555}
.mc-text, .mc-reply {white-space: pre-wrap}
.mc-graph-empty {padding: 24px; border: 1px dashed #ccc; border-radius: 6px; text-align: center}
.mc-compare-all h3 {margin: 4px 0}
.mc-compare {border: 1px solid #e5e7eb; border-radius: 8px; padding: 8px 12px; margin: 8px 0; min-width: 0}
.mc-compare h4 {margin: 0 0 6px}
.mc-compare .mc-reply {font-size: 1.02em; line-height: 1.45}
.mc-recalled {margin-top: 8px} .mc-recalled > summary {cursor: pointer; color: #1d4f91}
/* Long unbroken strings wrap everywhere instead of pushing the page sideways. */
#chat .message, #chat .message *, .mc-why, .mc-why *, .mc-compare, .mc-compare *, .mc-session, .mc-status,
#session-list label {overflow-wrap: anywhere; word-break: break-word}
#chat pre, .mc-why pre, .mc-compare pre {white-space: pre-wrap}
/* The reply whose trace is shown. */
#chat .mc-selected {outline: 2px solid #e0a100; outline-offset: 2px; border-radius: 8px}
/* The list scrolls on its own below the session controls. */
#session-list .wrap {flex-direction: column; flex-wrap: nowrap; align-items: stretch; max-height: 55vh; overflow: auto}
#session-list label {width: 100%; font-size: 0.85em}
.mc-table td:nth-child(2) {width: 55%}
/* The LLM-calls table: numbers and times never break ("6.84 s" on one line); the detail takes the room. */
.mc-calls td:nth-child(2) {width: auto}
.mc-calls td[data-label="prompt tok"], .mc-calls td[data-label="completion tok"], .mc-calls td[data-label="time"],
.mc-calls td[data-label="status"] {white-space: nowrap}
/* A long notice: one line, its detail folded. */
details.mc-notice > summary {cursor: pointer; white-space: nowrap; overflow: hidden; text-overflow: ellipsis}
details.mc-notice > div {font-size: 0.9em; color: #555; margin: 2px 0 4px 16px}
/* Gradio's own timers ("0.1s", "processing | 0.3/0.2s", "queue: 1/1"): the page says what runs in its own
   status line and progress bar, so Gradio's status text never flickers over them. */
.gradio-container .progress-text, .gradio-container .meta-text, .gradio-container .meta-text-center,
.gradio-container .eta-bar {display: none !important}
/* The chatbot's own Clear button only empties the display, not the stored session: hidden to avoid confusion. */
#chat button[aria-label="Clear"] {display: none !important}
/* The sidebar's toggle says what it opens (on a phone the sidebar starts closed). Gradio turns the whole
   button over (rotate 180deg) while the sidebar is open, which drew "Sessions" upside down: the button stays
   upright and only its chevron turns; the date field below starts under it instead of behind it. */
#sidebar button[aria-label="Toggle Sidebar"] {width: auto; padding: 0 6px}
#sidebar button[aria-label="Toggle Sidebar"]::after {content: "Sessions"; font-size: 0.8em; margin-left: 2px}
#sidebar.open button[aria-label="Toggle Sidebar"], .open #sidebar button[aria-label="Toggle Sidebar"] {transform: none}
#sidebar.open button[aria-label="Toggle Sidebar"] .chevron {transform: rotate(180deg)}
#sidebar.open #session-date {margin-top: 40px}
@media (max-width: 700px) {#llm-banner {margin-top: 30px}}
@media (max-width: 640px) { .mc-intro {font-size: 0.85em} }
"""

# Marks the clicked chat message (the reply whose trace "See why" shows); runs once in the page.
SELECT_JS = """<script>
// Gradio 6.31's client reads the queue's event stream with fetch through a stand-in EventSource whose
// close() only logs console.warn("Method not implemented."); the client calls it each time the page's
// running events have all ended and the stream is closed (the stream is ended by its AbortController
// regardless). That one message says nothing about the page: it is dropped, every other warning kept.
(() => {
  const warn = console.warn.bind(console);
  console.warn = (...args) => { if (!(args.length === 1 && args[0] === 'Method not implemented.')) warn(...args); };
})();
document.addEventListener('click', (e) => {
  const msg = e.target.closest && e.target.closest('#chat .message');
  if (!msg) return;
  document.querySelectorAll('#chat .mc-selected').forEach((m) => m.classList.remove('mc-selected'));
  msg.classList.add('mc-selected');
}, true);
// On a phone the open sidebar would cover the chat: start with it closed there (its toggle opens it).
// (Gradio adds this script after the page's load event, so it runs at once.)
if (window.innerWidth <= 700) {
  const t = setInterval(() => {
    const bar = document.querySelector('.sidebar.open');
    const btn = bar && bar.querySelector('button[aria-label="Toggle Sidebar"]');
    if (btn) { clearInterval(t); btn.click(); }
  }, 200);
  setTimeout(() => clearInterval(t), 15000);
}
</script>"""


# Typing in the message box hides a status about the box itself (in the browser: no server call).
CLEAR_ON_TYPE_JS = """() => { document.querySelectorAll('#status [data-clear-on-type]')
  .forEach((e) => { e.style.display = 'none'; }); }"""


def build_demo(
    service: SessionService,
    settings: Settings,
    storage_secret: str,
    allow_llm_change: bool | None = None,
    accounts: Accounts | None = None,
    serving: fairness.Serving | None = None,
    require_agent_keys: bool = False,
) -> gr.Blocks:
    """The page: sessions sidebar, chat beside "See why", settings and data panels; then the events.
    With `accounts` (MEMORY_HF_LOGIN=1), a "Sign in with Hugging Face" button: a signed-in account is the user.
    `require_agent_keys` (MEMORY_REQUIRE_AGENT_KEYS): every API and MCP call needs an agent key (ui/api.py)."""
    allow_llm_change = fairness.llm_choice_allowed(service, allow_llm_change)
    serving = serving or fairness.Serving()
    c = Page()  # every component the handlers read or update, by name (filled in below)
    gr.set_static_paths([static_dir()])  # the graph page and vis-network, fetched once per browser
    with gr.Blocks(title="Memory chat: THEANINE and SeCom") as demo:
        # The browser's user id, encrypted in its localStorage; the secret is stable across restarts.
        c.uid = gr.BrowserState(None, storage_key="memory_chat_user", secret=storage_secret)
        c.msg_ids = gr.State([])
        c.timer = gr.Timer(1.0, active=False)  # polls a background memory build while one runs
        _sidebar(c)
        if accounts is not None:
            gr.LoginButton(elem_id="hf-login")  # Gradio's OAuth routes; the profile reaches Handlers.load_signed_in
        # One block for the banner and the intro: the message box stays on a phone's first screen.
        gr.HTML(
            panels.banner_html(settings.llm.describe(), settings.llm.is_bundled, not allow_llm_change) + panels.INTRO
        )
        c.job = gr.HTML(elem_id="job-wrap")  # the one progress bar of the page
        with gr.Row(equal_height=False):
            _chat_column(c, settings.options)
            travel, evaluate = _see_why_column(c, service)
        _settings_panel(c, settings, allow_llm_change, service)
        _data_panel(c)
        register_api(service, serving, require_agent_keys)  # first, so the documented endpoints get the plain names
        _wire(demo, c, service, settings, allow_llm_change, accounts, serving, (travel, evaluate))
    return demo


def _sidebar(c: Page) -> None:
    """The sessions list and the controls that end or start a session."""
    # The controls first, then the list (it scrolls on its own): with dozens of sessions the buttons stay in reach.
    with gr.Sidebar(label="Sessions", open=True, elem_id="sidebar", width=300):
        c.date = gr.Textbox(
            value=today(),
            label="Start the next session on (e.g. 2023-05-15, 1 May 2023)",
            elem_id="session-date",
            max_length=64,
        )
        c.new = gr.Button("Start next session", elem_id="new-session-btn", variant="primary")
        c.end = gr.Button("End session and build its memory", elem_id="end-session-btn", variant="stop")
        c.set_date = gr.Button("Give the chosen session this date", elem_id="set-date-btn", size="sm")
        gr.Markdown(
            "Ending a session turns it into memories (both THEANINE and SeCom) and opens the next one, "
            "dated today (or the ended session's date, if that is later). To date it otherwise, type the "
            "date above and press Start next session while it is still empty. A session may not be dated "
            "before the previous one.",
            elem_classes=["mc-muted"],
        )
        # The list folds away under its own labelled toggle; long imported runs fold into one entry.
        with gr.Accordion("Your sessions, in time order (click one to read it)", open=True, elem_id="session-fold"):
            c.sessions = gr.Radio([], show_label=False, elem_id="session-list")


def _chat_column(c: Page, o: Options) -> None:
    with gr.Column(scale=5, min_width=300):
        c.session_header = gr.HTML(elem_id="session-header-wrap")
        c.chatbot = gr.Chatbot(
            label="Chat",
            show_label=False,  # a floating "Chat" label covered the first message; the header names the session
            height="min(440px, 42vh)",  # the message box, the strategy and Compare stay on the first screen
            elem_id="chat",
            feedback_options=None,
            buttons=["copy"],
            placeholder="Say hello. Your conversations are remembered across sessions.",
        )
        with gr.Row():
            c.msg = gr.Textbox(
                placeholder="Type a message and press Enter",
                show_label=False,
                scale=6,
                elem_id="msg",
                max_lines=6,
                max_length=MAX_MESSAGE_CHARS,
                min_width=160,
            )
            c.send = gr.Button("Send", variant="primary", scale=1, elem_id="send-btn", min_width=70)
            c.stop = gr.Button("Stop", visible=False, scale=1, elem_id="stop-btn", min_width=70)
        with gr.Row():
            c.strategy = gr.Radio(
                [(html_text.STRATEGY_NAMES[s], s) for s in STRATEGIES],
                value=o.strategy,
                label="Memory strategy for this chat",
                elem_id="strategy",
                scale=3,
            )
            c.compare = gr.Button("Compare strategies", elem_id="compare-btn", scale=1, min_width=120)
            c.retry = gr.Button("Retry", visible=False, elem_id="retry-btn", scale=1, min_width=70)
        c.status = gr.HTML(elem_id="status")
        # Compare: under the chat it answers, one card per strategy (shown again after a reload).
        with gr.Column(visible=False, elem_id="compare-wrap") as c.compare_row:
            c.compare_view = gr.HTML(elem_id="compare")


def _see_why_column(c: Page, service: SessionService) -> tuple[timetravel.TimePanel, evaluation.EvalTab]:
    """Two tabs: "See why" (the memory graph with time travel, the trace of the selected reply) and
    "Evaluate memory designs" (ui/evaluation.py); returns the time travel panel and the Evaluate tab."""
    with gr.Column(scale=6, min_width=300), gr.Tabs(elem_id="right-tabs"):
        with gr.Tab("See why", elem_id="why-tab"):
            with gr.Row(elem_id="graph-search-row"):
                c.graph_query = gr.Textbox(
                    placeholder="Search every memory (e.g. surfing)",
                    show_label=False,
                    elem_id="graph-search",
                    max_length=200,
                    scale=5,
                    min_width=160,
                )
                c.graph_find = gr.Button("Find", elem_id="graph-find-btn", scale=1, min_width=70, size="sm")
            c.graph_found = gr.HTML(elem_id="graph-found")
            c.graph = gr.HTML(elem_id="graph-panel")
            travel = timetravel.build_panel()
            c.why = gr.HTML(see_why.trace_html(None), elem_id="why-wrap")
        evaluate = evaluation.build_tab(service)
    return travel, evaluate


def _settings_panel(c: Page, settings: Settings, allow_llm_change: bool, service: SessionService) -> None:
    o = settings.options
    with gr.Accordion("Settings", open=False):
        with gr.Row(visible=allow_llm_change, elem_id="llm-choice"):  # none offered when locked
            c.backend = gr.Radio(
                list(BACKENDS), value=settings.llm.backend, label="LLM backend", interactive=allow_llm_change
            )
            c.model = gr.Textbox(
                label="Model (OpenAI-compatible backend only)", value=settings.llm.model, interactive=allow_llm_change
            )
            c.base_url = gr.Textbox(
                label="Base URL (empty = api.openai.com)", value=settings.llm.base_url, interactive=allow_llm_change
            )
        # the model replies come from (the form's model field names only an OpenAI-compatible one)
        c.model_in_use = gr.Markdown(panels.model_in_use(settings.llm.describe(), o), elem_id="model-in-use")
        gr.Markdown(
            "API keys are read only from the environment or `.env` and are sent only to the endpoint "
            "they were configured for."
        )
        with gr.Row():
            c.temperature = gr.Number(o.temperature, label=FIELD_LABELS["temperature"] + " (0-2)")
            c.j = gr.Number(o.j, label=FIELD_LABELS["j"], precision=0)
            c.k = gr.Number(o.k, label=FIELD_LABELS["k"], precision=0)
            c.n = gr.Number(o.n, label=FIELD_LABELS["n"], precision=0)
            c.whole_timelines = gr.Number(o.whole_timelines, label=FIELD_LABELS["whole_timelines"], precision=0)
        c.theanine_mode = gr.Radio(
            [("tuned (measured defaults)", "tuned"), ("paper (k = 3, dense, whole timelines, all refined)", "paper")],
            value=o.theanine_mode,
            label=FIELD_LABELS["theanine_mode"],
        )
        with gr.Row():
            c.compression_rate = gr.Number(
                o.compression_rate, label=FIELD_LABELS["compression_rate"] + " (fraction of tokens kept)"
            )
            c.retriever = gr.Radio(list(RETRIEVERS), value=o.retriever, label=FIELD_LABELS["retriever"])
            c.max_reply_tokens = gr.Number(o.max_reply_tokens, label=FIELD_LABELS["max_reply_tokens"], precision=0)
        gr.Textbox(
            rubric_box_text(settings),
            label=f"SeCom segmentation rubric (SECOM_RUBRIC; segmenter in use: {settings.segmenter})",
            interactive=False,
            lines=3,
            max_lines=12,
            elem_id="secom-rubric",
        )
        c.save_settings = gr.Button("Apply settings", elem_id="apply-settings-btn")
        c.settings_status = gr.HTML(elem_id="settings-status")
        agent_keys_panel.panel(service, c.uid)


def rubric_box_text(settings: Settings) -> str:
    """What the rubric box says, in agreement with the segmenter in use: the embedding segmenter reads no
    prompt, so no rubric applies to it."""
    if settings.segmenter != "llm":
        return (
            "(not used: the embedding segmenter cuts a session where its topic changes, without a prompt; "
            "a rubric applies with SECOM_SEGMENTER=llm)"
        )
    return settings.rubric_text() or "(none: SeCom's zero-shot segmentation prompt)"


def _data_panel(c: Page) -> None:
    """Import, export, delete a memory, forget me."""
    with gr.Accordion("Your data: import, export, delete a memory, forget me", open=False):
        with gr.Row():
            with gr.Column(min_width=240):
                c.import_file = gr.File(
                    label="History to import (.json: this app's format or LoCoMo)",
                    file_types=[".json"],
                    type="filepath",
                    elem_id="import-file",
                )
                c.sample_id = gr.Textbox(
                    label="LoCoMo conversation id (only for files holding several)", max_length=100, elem_id="sample-id"
                )
                c.import_btn = gr.Button("Import and build memory", elem_id="import-btn")
            with gr.Column(min_width=240):
                c.export_btn = gr.Button("Export my memory (JSON)")
                c.export_file = gr.File(label="Download", interactive=False, visible=False)
                c.memory = gr.Dropdown(label="Memory to delete", choices=[], elem_id="memory-select")
                c.redact = gr.Checkbox(
                    label="Also redact its source turns from the transcript", value=False, elem_id="redact"
                )
                c.delete_btn = gr.Button("Delete this memory", elem_id="delete-btn")
                with gr.Row(visible=False, elem_id="delete-ask") as c.delete_ask:  # asked once before deleting
                    c.delete_yes = gr.Button("Yes, delete it", variant="stop", elem_id="delete-yes-btn", min_width=90)
                    c.delete_no = gr.Button("Keep it", elem_id="delete-no-btn", min_width=70)
            with gr.Column(min_width=240):
                c.forget_confirm = gr.Checkbox(label="Yes, delete all my sessions and memory")
                c.forget_btn = gr.Button("Forget me", variant="stop")
        c.data_status = gr.HTML(elem_id="data-status")


def _wire(
    demo: gr.Blocks,
    c: Page,
    service: SessionService,
    settings: Settings,
    allow_llm_change: bool,
    accounts: Accounts | None,
    serving: fairness.Serving,
    tabs: tuple[timetravel.TimePanel, evaluation.EvalTab],
):
    """Every event of the page (what each does is in handlers.py and the parts it holds); `tabs` are time
    travel's panel and the Evaluate tab, which hold their own components."""
    h = Handlers(service, c, allow_llm_change, has_api_key=bool(settings.llm.api_key), accounts=accounts)
    timetravel.wire(tabs[0], service, c.uid, h.views.building)
    evaluation.wire(tabs[1], demo, c.uid, c.forget_btn, c.forget_confirm)
    option_inputs = [getattr(c, f) for f in SETTING_FIELDS]  # the order SideHandlers.save_settings reads them in
    settings_fields = [c.strategy, c.backend, c.model, c.base_url, c.model_in_use, *option_inputs]
    view = [c.chatbot, c.msg_ids, c.session_header, c.sessions, c.graph, c.why, c.memory, c.retry, c.date]
    # Events: private (the documented API is in api.py); no Gradio overlay (the page shows its own
    # status line and one progress bar); cheap views (FAST) never wait behind a running reply.

    demo.load(
        h.load if accounts is None else h.load_signed_in,
        [c.uid],
        [c.uid, *view, *settings_fields, c.status, c.timer, c.job, c.compare_row, c.compare_view],
        **FAST,
    )
    c.timer.tick(h.poll, [c.uid], [c.timer, c.job, *view, c.status, c.data_status], **FAST)
    chat_out = [*view, c.msg, c.status, c.stop]
    reply: EventOptions = {**QUIET, **fairness.reply_events(serving)}  # one pool of reply workers shared by all users
    replies: list[dict[str, Any]] = [  # (Gradio's Dependency is a dict)
        c.msg.submit(h.send, [c.uid, c.msg, c.strategy], chat_out, trigger_mode="multiple", **reply),
        c.send.click(h.send, [c.uid, c.msg, c.strategy], chat_out, trigger_mode="multiple", **reply),
        c.retry.click(h.retry, [c.uid, c.strategy], chat_out, **reply),
    ]
    compared = [c.compare_row, c.compare_view, c.status]
    replies.append(c.compare.click(h.explore.compare, [c.uid, c.msg], compared, **reply))
    c.stop.click(h.stopped, [c.uid], [*view, c.status, c.stop], cancels=replies, **FAST)
    for trigger in (c.graph_query.submit, c.graph_find.click):
        trigger(h.explore.find_memory, [c.uid, c.graph_query], [c.graph, c.graph_found], **FAST)
    c.msg.input(None, None, None, js=CLEAR_ON_TYPE_JS, api_visibility="private")
    # While the person types, the memory for the draft is read ahead (one read-ahead at a time for the
    # whole server, the latest draft only: the model is one; docs/speed.md).
    ahead: EventOptions = {**QUIET, "concurrency_limit": 1, "concurrency_id": "read_ahead"}
    c.msg.input(h.read_ahead, [c.uid, c.msg, c.strategy], None, trigger_mode="always_last", **ahead)
    c.chatbot.select(h.select, [c.uid, c.msg_ids], [c.why, c.graph, c.status], **FAST)
    c.strategy.input(h.set_strategy, [c.uid, c.strategy], [c.session_header, c.status], **FAST)
    c.sessions.input(h.side.view_session, [c.uid, c.sessions], [*view, c.status], **FAST)
    c.set_date.click(h.actions.set_session_date, [c.uid, c.sessions, c.date], [*view, c.status, c.timer, c.job], **FAST)
    c.end.click(h.side.end_session, [c.uid, c.date], [*view, c.status, c.timer, c.job], **FAST)
    c.new.click(h.side.new_session, [c.uid, c.date], [*view, c.status, c.timer, c.job], **FAST)
    if allow_llm_change:
        c.backend.input(h.side.backend_note, [c.backend, c.base_url], [c.settings_status], **FAST)
    c.save_settings.click(
        h.side.save_settings,
        [c.uid, c.backend, c.model, c.base_url, *option_inputs],
        [*settings_fields, c.settings_status],
        **FAST,
    )
    c.import_btn.click(
        h.data.import_history,
        [c.uid, c.import_file, c.sample_id],
        [*view, c.data_status, c.import_file, c.timer, c.job, c.compare_row, c.compare_view],
        **FAST,
    )
    c.export_btn.click(h.data.export, [c.uid], [c.export_file, c.data_status], **FAST)
    c.export_file.download(h.actions.export_downloaded, [c.uid], [c.data_status], **FAST)
    # Delete asks once: the first click names the memory and shows "Yes, delete it" / "Keep it".
    c.delete_btn.click(h.data.ask_delete, [c.uid, c.memory, c.redact], [c.delete_ask, c.data_status], **FAST)
    c.delete_no.click(h.data.keep_memory, None, [c.delete_ask, c.data_status], **FAST)
    c.memory.input(h.data.keep_memory, None, [c.delete_ask, c.data_status], **FAST)
    c.delete_yes.click(
        h.data.delete_memory,
        [c.uid, c.memory, c.redact],
        [c.graph, c.memory, c.data_status, c.chatbot, c.msg_ids, c.delete_ask],
        **FAST,
    )
    c.forget_btn.click(
        h.data.forget,
        [c.uid, c.forget_confirm],
        [c.uid, *view, *settings_fields, c.forget_confirm, c.compare_row, c.compare_view, c.export_file, c.data_status],
        **FAST,
    )


def launch_kwargs() -> dict:
    """Arguments for demo.launch() (Gradio 6 takes theme and css there)."""
    # Uploads above the import cap (20 MB) plus a margin are refused by Gradio itself; between the two
    # the import shows its own message.
    return {"theme": gr.themes.Soft(), "css": CSS, "max_file_size": "25mb", "head": SELECT_JS}
