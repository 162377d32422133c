"""The "Evaluate memory designs" tab: the app-path evidence-recall benchmark on a LoCoMo-format file
or on the user's own history and questions, with its progress, results and JSON.

What runs is sessions.evaluation (the benchmark's own code, in the background on scratch data);
this module only lays out the tab, wires its events and renders the benchmark's JSON: recall vs
token budget (the figure `bench locomo` draws), the same figures as a table, recall per
LoCoMo category, and a per-question table whose rows open each strategy's packed context.
`build_tab` is the one call the page makes (inside its gr.Tabs).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import gradio as gr

from memory.evaluation.figures import answers_figure, strategy_figure
from memory.evaluation.spec import AGENT_METHODS, DEFAULT_BUDGETS, DEFAULT_RETRIEVERS, SUMMARISERS
from sessions import SessionService, UserError, UserKey, check_user_id
from sessions.evaluation import EvalRun, Evaluations, my_turn_rows
from sessions.service import user_message

from .eval_results import (
    ANSWERS_TITLE,
    INSTALLED,
    TEAFARM_TITLE,
    WORDS,
    answers_html,
    category_figure,
    context_html,
    first_strategies,
    measured_answers,
    measured_teafarm,
    progress_html,
    question_table,
    recall_table_html,
    run_title,
    status_line,
    strategy_labels,
    summary_html,
    table_update,
    teafarm_html,
)
from .events import FAST

log = logging.getLogger(__name__)

FILE, HISTORY = "A LoCoMo-format file", "My history and my questions"
METHOD_NAMES = {
    "turn": "turn (baseline: single turns)",
    "session": "session (baseline: whole sessions)",
    "secom": "SeCom segments",
    "theanine-topk": "THEANINE memories (top-k)",
    "theanine-timeline": "THEANINE timelines",
    "theanine-paper": "THEANINE, paper settings (k = 3, dense, whole timelines)",
    "app-defaults": "app defaults (SeCom and THEANINE as installed)",
}
SUMMARISER_NAMES = {
    "offline": "offline (no LLM: the app's offline memory)",
    "reference": "reference (LoCoMo's observation facts, scripted)",
    "llm": "llm (the configured endpoint)",
}
QUESTION_HEADERS = ["question", "turn ids that answer it (e.g. D1:3, D2:5)", "category (1-4)"]
INTRO = (
    "Measure how much of each question's evidence every memory design puts into the reply's context, "
    "at each token budget: the app's own path (sessions closed into memory, then the memory text a reply "
    "would read), the same code as <code>python -m bench locomo</code>. It runs in the background "
    "on a scratch copy: your memory is never changed, and the chat stays usable."
)


class EvalTab:
    def __init__(self, evaluations: Evaluations, llm_available: bool, user: Callable[[object], UserKey]):
        self.ev = evaluations
        self.llm_available = llm_available
        self.user = user  # the user of an event that reads their history (sessions.user_room.UserRoom.user)

    # --- layout --------------------------------------------------------------------------------------
    def layout(self) -> None:
        gr.HTML(f'<div class="mc-intro">{INTRO}</div>{WORDS}')
        self.source = gr.Radio([FILE, HISTORY], value=FILE, label="Evaluate on", elem_id="eval-source")
        with gr.Group(visible=True) as self.file_box:
            self.file = gr.File(
                label="LoCoMo-format file (.json)", file_types=[".json"], type="filepath", elem_id="eval-file"
            )
            self.only = gr.Textbox(
                label="Conversation ids (comma-separated; empty = every conversation in the file)",
                max_length=500,
                elem_id="eval-conversations",
            )
        with gr.Group(visible=False) as self.history_box:
            self.questions = gr.Dataframe(
                value=[["", "", "4"] for _ in range(3)],
                headers=QUESTION_HEADERS,
                datatype=["str", "str", "str"],
                column_count=3,
                interactive=True,
                label="Your questions (categories: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop)",
                elem_id="eval-my-questions",
            )
            self.show_turns = gr.Button("Show my turns and their ids", size="sm", elem_id="eval-show-turns")
            self.turns = gr.Dataframe(
                headers=["turn id", "session date", "speaker", "text"],
                interactive=False,
                visible=False,
                max_height=300,
                wrap=True,
                elem_id="eval-my-turns",
            )
        methods = list(AGENT_METHODS)
        self.methods = gr.CheckboxGroup(
            [(METHOD_NAMES[m], m) for m in methods], value=methods, label="Strategies", elem_id="eval-methods"
        )
        with gr.Row():
            self.retrievers = gr.CheckboxGroup(
                list(DEFAULT_RETRIEVERS),
                value=list(DEFAULT_RETRIEVERS),
                label=(
                    "Retrievers: each strategy is scored with each one ticked (THEANINE paper settings: dense; "
                    f"app defaults: as installed, SeCom {INSTALLED.retriever}, THEANINE "
                    f"{INSTALLED.theanine_retriever})"
                ),
                elem_id="eval-retrievers",
            )
            self.budgets = gr.Textbox(
                value=",".join(map(str, DEFAULT_BUDGETS)),
                label="Token budgets (comma-separated, 50-32000)",
                max_length=200,
                elem_id="eval-budgets",
            )
        summ = [s for s in SUMMARISERS if s != "llm" or self.llm_available]
        self.summarisers = gr.CheckboxGroup(
            [(SUMMARISER_NAMES[s], s) for s in summ], value=["offline"], label="Memory built by", elem_id="eval-summ"
        )
        self.run = gr.Button("Run the evaluation", variant="primary", elem_id="eval-run-btn")
        self.status = gr.HTML(elem_id="eval-status")
        self.progress = gr.HTML(elem_id="eval-progress-wrap")
        self.timer = gr.Timer(1.0, active=False)
        with gr.Column(visible=False) as self.results:
            self.summary = gr.HTML(elem_id="eval-summary")
            self.plot = gr.Plot(label="Evidence recall vs token budget", show_label=False, elem_id="eval-plot")
            self.recall_table = gr.HTML(elem_id="eval-recall-table")
            self.budget = gr.Dropdown(
                choices=[], label="Budget for the category bars and the questions", elem_id="eval-budget"
            )
            self.bars = gr.Plot(label="Recall per LoCoMo category", show_label=False, elem_id="eval-bars")
            self.table_strategies = gr.Dropdown(
                choices=[],
                multiselect=True,
                label="Strategies side by side in the per-question table (all of them: the recall table above)",
                elem_id="eval-table-strategies",
            )
            self.table = gr.Dataframe(
                interactive=False,
                wrap=True,
                max_height=420,
                label="Per question: evidence turns each strategy's context held (click a row for the contexts)",
                elem_id="eval-questions",
            )
            self.context = gr.HTML(elem_id="eval-context")
            self.download = gr.DownloadButton("Download the benchmark JSON", elem_id="eval-download")
        measured = measured_answers()
        with gr.Accordion(ANSWERS_TITLE, open=False, elem_id="eval-answers"):
            gr.HTML(answers_html(measured), elem_id="eval-answers-table")
            if measured:
                gr.Plot(answers_figure(measured["summary"]), show_label=False, elem_id="eval-answers-plot")
        with gr.Accordion(TEAFARM_TITLE, open=False, elem_id="eval-teafarm"):
            gr.HTML(teafarm_html(measured_teafarm()), elem_id="eval-teafarm-table")

    # --- events --------------------------------------------------------------------------------------
    def wire(self, demo: gr.Blocks, uid) -> None:
        shown = self._result_outputs()
        demo.load(self.load, [uid], [self.timer, self.progress, self.status, *shown], **FAST)
        self.source.change(
            lambda s: (gr.update(visible=s == FILE), gr.update(visible=s == HISTORY)),
            [self.source],
            [self.file_box, self.history_box],
            **FAST,
        )
        self.show_turns.click(self.my_turns, [uid], [self.turns, self.status], **FAST)
        inputs = [uid, self.source, self.file, self.only, self.questions]
        inputs += [self.methods, self.retrievers, self.budgets, self.summarisers]
        self.run.click(self.start, inputs, [self.timer, self.progress, self.status], **FAST)
        self.timer.tick(self.poll, [uid], [self.timer, self.progress, self.status, *shown], **FAST)
        self.budget.input(
            self.at_budget, [uid, self.budget, self.table_strategies], [self.bars, self.table, self.context], **FAST
        )
        self.table_strategies.input(
            self.at_budget, [uid, self.budget, self.table_strategies], [self.bars, self.table, self.context], **FAST
        )
        self.table.select(self.show_context, [uid, self.budget], [self.context], **FAST)

    def on_forget(self, button, uid, confirmed) -> None:
        button.click(self.forget, [uid, confirmed], [self.results, self.progress, self.status], **FAST)

    def _result_outputs(self) -> list:
        return [
            self.results,
            self.summary,
            self.plot,
            self.recall_table,
            self.budget,
            self.bars,
            self.table_strategies,
            self.table,
            self.context,
            self.download,
        ]

    # --- handlers --------------------------------------------------------------------------------------
    def my_turns(self, uid):
        try:
            rows = my_turn_rows(self.ev.sessions, self.user(uid))
            if not rows:
                return {
                    self.turns: gr.update(visible=False),
                    self.status: status_line("Your history is empty.", "info"),
                }
            return {self.turns: gr.update(value=rows, visible=True), self.status: ""}
        except Exception as e:
            return {self.status: status_line(user_message(e), "error")}

    def start(self, uid, source, path, only, rows, methods, retrievers, budgets, summarisers):
        try:
            uid = check_user_id(uid)
            if source == HISTORY:
                req = self.ev.request_history(self.user(uid), rows, methods, retrievers, budgets, summarisers)
            else:
                if not path:
                    raise UserError("Choose a LoCoMo-format JSON file first (or evaluate on your history).")
                with open(path, "rb") as f:
                    data = f.read()
                name = str(path).replace("\\", "/").rsplit("/", 1)[-1]
                req = self.ev.request_file(data, only, methods, retrievers, budgets, summarisers, name)
            run = self.ev.start(uid, req)
            n_q = sum(len(c.questions) for c in req.convs)
            text = f"Started: {n_q} questions from {req.source}."
            return {
                self.timer: gr.Timer(active=True),
                self.progress: progress_html(run),
                self.status: status_line(text),
            }
        except Exception as e:
            if not isinstance(e, UserError):
                log.exception("evaluation refused")
            return {self.status: status_line(user_message(e), "error")}

    def load(self, uid):
        try:
            uid = check_user_id(uid)
        except UserError:
            return {self.status: gr.update()}  # (an empty dict would be taken for one output's value)
        run = self.ev.get(uid)
        if run is None:
            return {self.status: gr.update()}
        if not run.done:
            out = {self.timer: gr.Timer(active=True), self.progress: progress_html(run)}
            last = self.ev.finished(uid)
            return {**out, **(self._results(last) if last else {})}
        return self._finished(uid, run)

    def poll(self, uid):
        try:
            uid = check_user_id(uid)
        except UserError:
            return {self.timer: gr.Timer(active=False), self.progress: ""}
        run = self.ev.get(uid)
        if run is None:
            return {self.timer: gr.Timer(active=False), self.progress: ""}
        if not run.done:
            return {self.progress: progress_html(run)}
        return self._finished(uid, run)

    def _finished(self, uid: str, run: EvalRun) -> dict:
        out = {self.timer: gr.Timer(active=False), self.progress: ""}
        if run.error:
            out[self.status] = status_line(run.error, "error")
            last = self.ev.finished(uid)
            return {**out, **(self._results(last) if last else {})}
        out[self.status] = status_line(f"Evaluated {run.source}: {run.text}", "ok")
        return {**out, **self._results(run)}

    def _results(self, run: EvalRun) -> dict:
        res = run.result or {}
        budgets = [int(b) for b in res.get("config", {}).get("budgets", [])]
        at = 1000 if 1000 in budgets else (budgets[-1] if budgets else None)
        labels = strategy_labels(res)
        chosen = first_strategies(labels)
        return {
            self.results: gr.update(visible=True),
            self.summary: summary_html(run),
            self.plot: strategy_figure(res.get("results", []), title=run_title(res)),
            self.recall_table: recall_table_html(res),
            self.budget: gr.update(choices=[str(b) for b in budgets], value=str(at) if at else None),
            self.bars: category_figure(res, at) if at else None,
            self.table_strategies: gr.update(choices=labels, value=chosen),
            self.table: table_update(question_table(res, at, chosen)) if at else None,
            self.context: "",
            self.download: gr.update(value=str(run.path) if run.path else None),
        }

    def at_budget(self, uid, budget, strategies=None):
        run = self._shown(uid)
        if run is None or not budget:
            return {self.context: gr.update()}
        res, b = run.result or {}, int(budget)
        chosen = [s for s in strategy_labels(res) if s in (strategies or [])] or first_strategies(strategy_labels(res))
        table = table_update(question_table(res, b, chosen))
        return {self.bars: category_figure(res, b), self.table: table, self.context: ""}

    def show_context(self, uid, budget, evt: gr.SelectData):
        run = self._shown(uid)
        if run is None:
            return {self.context: gr.update()}
        try:
            row = evt.row_value[0] if getattr(evt, "row_value", None) else evt.index[0] + 1
            i = int(row) - 1
            return {self.context: context_html(run.result or {}, i, int(budget), run.turns)}
        except (ValueError, TypeError, IndexError):
            return {self.context: gr.update()}

    def forget(self, uid, confirmed):
        """With the page's Forget me: the user's evaluation runs are dropped too."""
        if not confirmed:
            return {self.status: gr.update()}
        try:
            self.ev.forget(check_user_id(uid))
        except UserError:
            return {self.status: gr.update()}
        return {self.results: gr.update(visible=False), self.progress: "", self.status: ""}

    def _shown(self, uid) -> EvalRun | None:
        try:
            return self.ev.finished(check_user_id(uid))
        except UserError:
            return None


# --- rendering the benchmark's JSON -------------------------------------------------------------------


def build_tab(service: SessionService, evaluations: Evaluations | None = None) -> EvalTab:
    """The "Evaluate memory designs" tab (call inside the page's gr.Tabs); `wire` adds its events."""
    evaluations = evaluations or Evaluations(service.rooms.sessions, service.settings, service.limits)
    tab = EvalTab(evaluations, evaluations.llm_available, service.rooms.users.user)
    with gr.Tab("Evaluate memory designs", elem_id="eval-tab"):
        tab.layout()
    return tab


def wire(tab: EvalTab, demo: gr.Blocks, uid, forget_btn=None, forget_confirm=None) -> None:
    """The tab's events (and its part of Forget me: the user's runs are dropped too)."""
    tab.wire(demo, uid)
    if forget_btn is not None:
        tab.on_forget(forget_btn, uid, forget_confirm)
