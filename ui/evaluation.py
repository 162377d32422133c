"""The "Evaluate memory designs" tab: the app-path evidence-recall benchmark on a LoCoMo-format file
or on the user's own history and questions, with its progress, results and JSON.

What runs is sessions.evaluation (the benchmark's own code, in the background on scratch data);
this module only lays out the tab, wires its events and renders the benchmark's JSON: recall vs
token budget (the figure `bench locomo` draws), the same figures as a table, recall per
LoCoMo category, and a per-question table whose rows open each strategy's packed context.
`build_tab` is the one call the page makes (inside its gr.Tabs).
"""

from __future__ import annotations

import html
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path

import gradio as gr

from memory.evaluation.figures import answers_figure, bars_figure, strategy_figure
from memory.evaluation.scoring import CATEGORY_NAMES as SCORED_NAMES
from memory.evaluation.spec import AGENT_METHODS, DEFAULT_BUDGETS, DEFAULT_RETRIEVERS, SUMMARISERS
from memory.evaluation.teafarm import validity_of
from memory.settings import Options
from sessions import SessionService, UserError, check_user_id
from sessions.evaluation import CATEGORY_NAMES, EvalRun, Evaluations, my_turn_rows
from sessions.service import user_message
from sessions.users import UserKey

from . import panels
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
# What `python -m bench answers` measured (committed with the docs; shown read-only below the runner)
ANSWERS_TITLE = "Answer quality per strategy, as measured (LoCoMo answers through the reply path)"
MEASURED_ANSWERS = Path(__file__).resolve().parents[1] / "docs" / "results" / "answers.json"
# What `python -m bench teafarm` measured, with whether it is a valid TeaFarm score
TEAFARM_TITLE = "TeaFarm: false premises resisted, as measured"
MEASURED_TEAFARM = MEASURED_ANSWERS.with_name("teafarm.json")
INTRO = (
    "Measure how much of each question's evidence every memory design puts into the reply's context, "
    "at each token budget: the app's own path (sessions closed into memory, then the memory text a reply "
    "would read), the same code as <code>python -m bench locomo</code>. It runs in the background "
    "on a scratch copy: your memory is never changed, and the chat stays usable."
)
_INSTALLED = Options()
# The words of the results, said once where they are shown (the form, the results).
WORDS = (
    '<details class="mc-words" id="eval-words"><summary>What the results say</summary><ul>'
    "<li><b>evidence recall</b>: of the dialogue turns that answer a question (LoCoMo's evidence), the share "
    "whose text the strategy put whole into the reply's memory context; 1.0 = all of them.</li>"
    "<li><b>token budget</b>: how many tokens of memory the reply's prompt may hold; each strategy fills it "
    "best first and stops there.</li>"
    "<li><b>bm25 / dense / hybrid</b>: how memory is ranked for a question: bm25 by shared words (keywords), "
    "dense by embedding similarity (meaning), hybrid both, fused by rank.</li>"
    "<li><b>strategy names</b>: <code>method [memory built by] (retriever)</code>, e.g. "
    "<code>theanine-timeline [offline] (hybrid)</code>; the baselines need no memory build. THEANINE's paper "
    "settings always rank densely (as the paper); app defaults rank as installed (SeCom "
    f"{_INSTALLED.retriever}, THEANINE {_INSTALLED.theanine_retriever}).</li></ul></details>"
)
TABLE_STRATEGIES = 3  # strategies side by side in the per-question table at first (it fits a phone)


def _e(x) -> str:
    return html.escape(str(x), quote=True)


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
                    f"app defaults: as installed, SeCom {_INSTALLED.retriever}, THEANINE "
                    f"{_INSTALLED.theanine_retriever})"
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
                return {self.turns: gr.update(visible=False), self.status: _status("Your history is empty.", "info")}
            return {self.turns: gr.update(value=rows, visible=True), self.status: ""}
        except Exception as e:
            return {self.status: _status(user_message(e), "error")}

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
            return {self.timer: gr.Timer(active=True), self.progress: progress_html(run), self.status: _status(text)}
        except Exception as e:
            if not isinstance(e, UserError):
                log.exception("evaluation refused")
            return {self.status: _status(user_message(e), "error")}

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
            out[self.status] = _status(run.error, "error")
            last = self.ev.finished(uid)
            return {**out, **(self._results(last) if last else {})}
        out[self.status] = _status(f"Evaluated {run.source}: {run.text}", "ok")
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
            self.plot: strategy_figure(res.get("results", []), title=_title(res)),
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


def _status(text: str, kind: str = "info") -> str:
    return panels.status_html(text, kind)


def progress_html(run: EvalRun) -> str:
    took = round(time.time() - run.started)
    note = (
        f"Running for {took // 60} min {took % 60:02d} s; the time left is the pace measured so far. It runs in "
        "the background on a scratch copy; you can keep chatting."
    )
    return panels.progress_html("eval-progress", f"Evaluating {run.source}", run.fraction, run.eta(), run.text, note)


def _title(res: dict) -> str:
    convs = ", ".join(res.get("config", {}).get("conversations", []))
    return f"Evidence recall, agent path ({convs})"


def summary_html(run: EvalRun) -> str:
    cfg = (run.result or {}).get("config", {})
    close = (run.result or {}).get("close", {})
    built = []
    for summ, per in close.items():
        mems = sum(c.get("memories", 0) for c in per.values())
        segs = sum(c.get("segments", 0) for c in per.values())
        built.append(f"{summ}: {mems} memories, {segs} segments")
    return (
        f'<div class="mc-muted" id="eval-summary-line">{_e(run.source)} · conversations '
        f"{_e(', '.join(cfg.get('conversations', [])))} · {cfg.get('n_questions', 0)} questions · "
        f"{_e('; '.join(built))} · took {cfg.get('seconds', '?')} s · embedder {_e(cfg.get('embedder', ''))}</div>"
        + WORDS
    )


def measured_answers(path: Path = MEASURED_ANSWERS) -> dict | None:
    """The committed answer-quality results, or None when the file is absent or unreadable."""
    try:
        res = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        log.warning("measured answers unreadable (%s): %s", path, e)
        return None
    return res if isinstance(res, dict) and isinstance(res.get("summary"), list) and res["summary"] else None


def answers_html(res: dict | None) -> str:
    """The answer-quality table (`bench answers`): token F1 overall and per category, every answer
    word, memory tokens and reply latency per strategy, with what was measured and how to measure it again."""
    how = "<code>python -m bench answers --data ../shared/data/locomo/locomo_dev.json</code>"
    if not res:
        return f'<div class="mc-muted">Not measured on this install yet: run {how}.</div>'
    cfg = res.get("config", {})
    head = "".join(f"<th>F1 {_e(n)}</th>" for n in SCORED_NAMES.values())
    body = ""
    for s in res["summary"]:
        cats = "".join(
            f"<td>{s['f1_by_category'][c]:.3f}</td>" if c in s.get("f1_by_category", {}) else "<td>-</td>"
            for c in SCORED_NAMES
        )
        body += (
            f'<tr data-strategy="{_e(s["strategy"])}"><th>{_e(s["strategy"])}</th><td>{s["f1"]:.3f}</td>'
            f"<td>{s['all_words']:.2f}</td>{cats}<td>{s['memory_tokens']}</td>"
            f"<td>{s['latency_p50']:.1f} / {s['latency_p95']:.1f}</td></tr>"
        )
    n = max((s["n"] for s in res["summary"]), default=0)
    return (
        f'<div class="mc-muted">{n} questions of {_e(", ".join(cfg.get("conversations") or []))}, '
        f"{_e(cfg.get('model', ''))}, temperature {cfg.get('temperature', '?')}, memory budget "
        f"{cfg.get('budget', '?')} tokens; measured by {how}.</div>"
        '<table class="mc-table" id="eval-answers-f1"><thead><tr><th>strategy</th><th>F1</th>'
        f"<th>every answer word</th>{head}<th>memory tokens</th><th>reply s p50 / p95</th></tr></thead>"
        f"<tbody>{body}</tbody></table>"
    )


def measured_teafarm(path: Path = MEASURED_TEAFARM) -> dict | None:
    """The committed TeaFarm result, or None when the file is absent or unreadable."""
    try:
        res = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        log.warning("measured TeaFarm result unreadable (%s): %s", path, e)
        return None
    return res if isinstance(res, dict) and isinstance(res.get("strategies"), dict) else None


def teafarm_html(res: dict | None) -> str:
    """The TeaFarm table (`bench teafarm`), first saying whether it is a valid TeaFarm score: not
    when the generator and judge is the agent's own model or a bundled one (`teafarm.validity`)."""
    how = "<code>python -m bench teafarm --data FILE --judge-model M --judge-base-url URL</code>"
    if not res:
        return f'<div class="mc-muted">Not measured on this install yet: run {how}.</div>'
    v = validity_of(res)
    verdict = (
        panels.status_html(f"Valid TeaFarm score: {v['why']}", "ok")
        if v["valid"]
        else panels.status_html(f"Not a valid TeaFarm score: {v['why']}", "error")
    )
    cfg = res.get("config", {})
    body = ""
    for name, r in res["strategies"].items():
        rate = r.get("success_rate")
        resists = r.get("resists_rate")
        body += (
            f'<tr data-strategy="{_e(name)}"><th>{_e(name)}</th><td>{"-" if rate is None else f"{rate:.3f}"}</td>'
            f"<td>{'-' if resists is None else f'{resists:.3f}'}</td><td>{r.get('n_judged', 0)}/{r.get('n', 0)}</td>"
            f"<td>{_e(r.get('tokens_per_question') if r.get('tokens_per_question') is not None else '-')}</td></tr>"
        )
    return (
        f'<div id="eval-teafarm-validity" data-valid="{str(bool(v["valid"])).lower()}">{verdict}</div>'
        f'<div class="mc-muted">Who asks: {_e(v.get("perspective") or "")}; agent {_e(cfg.get("llm", ""))}; '
        f"generator and judge {_e(cfg.get('generator_and_judge', ''))}; {cfg.get('generated', 0)} questions; "
        f"measured by {how}.</div>"
        '<table class="mc-table" id="eval-teafarm-rates"><thead><tr><th>strategy</th><th>success</th>'
        "<th>resists</th><th>judged</th><th>tokens / question</th></tr></thead>"
        f"<tbody>{body}</tbody></table>"
    )


def recall_table_html(res: dict) -> str:
    """Recall per strategy (rows) and budget (columns), as the JSON has them (4 decimals)."""
    budgets = [int(b) for b in res.get("config", {}).get("budgets", [])]
    rows: dict[str, dict[int, float | None]] = {}
    for r in res.get("results", []):
        rows.setdefault(r["strategy"], {})[int(r["budget"])] = r["recall"]
    head = "".join(f"<th>{b}</th>" for b in budgets)
    body = ""
    for label, vals in rows.items():
        cells = "".join(
            f'<td data-budget="{b}">{"-" if vals.get(b) is None else format(vals[b], ".4f")}</td>' for b in budgets
        )
        body += f'<tr data-strategy="{_e(label)}"><th>{_e(label)}</th>{cells}</tr>'
    return (
        '<table class="mc-table" id="eval-recall"><thead><tr><th title="the share of each question\'s evidence '
        "turns the strategy's memory context held (see What the results say)\">evidence recall: strategy \\ "
        f"token budget</th>{head}</tr></thead><tbody>{body}</tbody></table>"
    )


def category_figure(res: dict, budget: int):
    rows = [r for r in res.get("results", []) if int(r["budget"]) == int(budget)]
    cats = [c for c in ("1", "2", "3", "4") if any(r["by_category"].get(c) is not None for r in rows)]
    labels = [f"{c} {CATEGORY_NAMES[int(c)]}" for c in cats]
    series = {r["strategy"]: [r["by_category"].get(c) or 0.0 for c in cats] for r in rows}
    fig = bars_figure(labels, series, "evidence recall", (7.0, 4.6), False)
    ax = fig.axes[0]
    ax.set_title(f"Evidence recall per category at {budget} tokens", fontsize=10)
    ax.set_ylim(0, 1.02)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=7, frameon=False)
    fig.tight_layout()
    return fig


def _held_cell(cell: dict | None, evidence: list[str]) -> str:
    if cell is None:
        return "-"
    held = cell.get("held", [])
    mark = "✓" if len(held) == len(evidence) else ("✗" if not held else "◐")
    return f"{mark} {len(held)}/{len(evidence)}" + (f" ({', '.join(held)})" if 0 < len(held) < len(evidence) else "")


def strategy_labels(res: dict) -> list[str]:
    """The run's strategies, in the order of its results."""
    return list(dict.fromkeys(r["strategy"] for r in res.get("results", [])))


def first_strategies(labels: list[str]) -> list[str]:
    """The per-question table's first columns: the app's own strategies (app defaults) and the first
    baseline, else the first few; a person adds others with the chooser above it."""
    app = [lab for lab in labels if lab.startswith("app-defaults")]
    base = [lab for lab in labels if lab.startswith("turn")][:1]
    chosen = (app + base)[:TABLE_STRATEGIES] or labels[:TABLE_STRATEGIES]
    return [lab for lab in labels if lab in chosen]


def question_table(res: dict, budget: int, strategies: list[str] | None = None) -> dict:
    """One row per question: its number, text, category, evidence turns, and per chosen strategy what its
    context held at `budget` (✓ all, ◐ some, ✗ none)."""
    qs = res.get("questions", [])
    every = strategy_labels(res)
    labels = [lab for lab in every if lab in strategies] if strategies is not None else every
    headers = ["#", "question", "category", "evidence", *labels]
    data = []
    for i, q in enumerate(qs, 1):
        cells = [_held_cell(q["strategies"].get(lab, {}).get(str(budget)), q["evidence"]) for lab in labels]
        data.append([str(i), q["question"], str(q["category"]), ", ".join(q["evidence"]), *cells])
    return {"headers": headers, "data": data}


def table_update(table: dict):
    """The per-question table with column widths that add up to its box (a phone's too): the question takes
    the most, each strategy's column an equal share of what is left; long words and headers wrap."""
    n = max(0, len(table["headers"]) - 4)
    share = f"{36 / n:.1f}%" if n else "0%"
    return gr.update(value=table, column_widths=["6%", "38%", "8%", "12%", *[share] * n], wrap=True)


def context_html(res: dict, i: int, budget: int, turns: dict) -> str:
    """Each strategy's packed context for question i at `budget`: the evidence it held and missed,
    then its lines, those carrying evidence marked."""
    qs = res.get("questions", [])
    if not 0 <= i < len(qs):
        return ""
    q = qs[i]
    ev_items = "".join(
        f"<li><b>{_e(t)}</b> {_e(' '.join(turns.get((q['conversation'], t), ('', '(not in the file)'))))}</li>"
        for t in q["evidence"]
    )
    parts = [
        f'<div class="mc-why" id="eval-context-view"><h4>Question {i + 1}: {_e(q["question"])}</h4>'
        f"<div>category {q['category']} · budget {budget} tokens · evidence turns:</div><ul>{ev_items}</ul>"
    ]
    for label, per in q["strategies"].items():
        cell = per.get(str(budget))
        if cell is None:
            continue
        held = set(cell.get("held", []))
        missed = [t for t in q["evidence"] if t not in held]
        lines = cell.get("context")
        body = (
            "".join(
                (f'<div style="background:#fff3b0"><b>[{_e(", ".join(ids))}]</b> {_e(text)}</div>')
                if ids
                else f"<div>{_e(text)}</div>"
                for text, ids in lines
            )
            if lines is not None
            else '<div class="mc-muted">(this JSON has no contexts: run with --contexts)</div>'
        )
        parts.append(
            f'<details class="eval-ctx" data-strategy="{_e(label)}"><summary><b>{_e(label)}</b>: recall '
            f"{cell['recall']:.4f} · held {_e(', '.join(sorted(held)) or 'none')} · missed "
            f"{_e(', '.join(missed) or 'none')}</summary>"
            f'<div class="mc-raw" style="max-height:320px;overflow:auto">{body}</div></details>'
        )
    return "".join(parts) + "</div>"


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
