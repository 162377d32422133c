"""The page's components, by name: what the handlers read or update and the layout wires.

layout.py makes a `Page()` and fills its fields as it places the components; handlers return
{component: value} dicts keyed by them.
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

# A value of the Delete dropdown (`Page.memory`) that repairs a damaged stored value instead of naming a
# memory: repair:<rebuild|drop>:<item> (ui.views makes these choices, ui.data_handlers reads them).
REPAIR = "repair:"


@dataclass(init=False, eq=False)
class Page:
    """Every component the handlers read or update (filled in by layout.py as it builds the page)."""

    # the browser's state and the page's timers
    uid: gr.BrowserState  # the user id, encrypted in the browser's localStorage
    msg_ids: gr.State  # the stored id of each message shown in the chat
    timer: gr.Timer  # polls a background memory build while one runs
    job: gr.HTML  # the one progress bar of the page
    # the sidebar
    date: gr.Textbox
    new: gr.Button
    end: gr.Button
    set_date: gr.Button
    sessions: gr.Radio
    # the chat column
    session_header: gr.HTML
    chatbot: gr.Chatbot
    msg: gr.Textbox
    send: gr.Button
    stop: gr.Button
    strategy: gr.Radio
    compare: gr.Button
    retry: gr.Button
    status: gr.HTML
    compare_row: gr.Column
    compare_view: gr.HTML
    # the "See why" tab (time travel and the Evaluate tab hold their own components: layout.py wires them)
    graph_query: gr.Textbox
    graph_find: gr.Button
    graph_found: gr.HTML
    graph: gr.HTML
    why: gr.HTML
    # the settings panel (one input per option field, named like it: ui.form_fields.SETTING_FIELDS)
    backend: gr.Radio
    model: gr.Textbox
    base_url: gr.Textbox
    model_in_use: gr.Markdown
    temperature: gr.Number
    j: gr.Number
    k: gr.Number
    n: gr.Number
    whole_timelines: gr.Number
    theanine_mode: gr.Radio
    compression_rate: gr.Number
    retriever: gr.Radio
    max_reply_tokens: gr.Number
    save_settings: gr.Button
    settings_status: gr.HTML
    # the data panel
    import_file: gr.File
    sample_id: gr.Textbox
    import_btn: gr.Button
    export_btn: gr.Button
    export_file: gr.File
    memory: gr.Dropdown
    redact: gr.Checkbox
    delete_btn: gr.Button
    delete_ask: gr.Row
    delete_yes: gr.Button
    delete_no: gr.Button
    forget_confirm: gr.Checkbox
    forget_btn: gr.Button
    data_status: gr.HTML
