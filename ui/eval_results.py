"""What a run of the "Evaluate memory designs" tab shows: its progress, the recall table and figures, the
per-question table with each packed context, and the measured answer and TeaFarm results kept in
docs/results (ui/evaluation.py lays the tab out and wires it)."""

from __future__ import annotations

import html
import json
import logging
import time
from pathlib import Path

import gradio as gr

from memory.evaluation.figures import bars_figure
from memory.evaluation.scoring import CATEGORY_NAMES as SCORED_NAMES
from memory.evaluation.teafarm import validity_of
from memory.settings import Options
from sessions.evaluation import CATEGORY_NAMES, EvalRun

from . import panels

log = logging.getLogger(__name__)
# What `python -m bench answers` measured (committed with the docs; shown read-only below the runner)
ANSWERS_TITLE = "Answer quality per strategy, as measured (LoCoMo answers through the reply path)"
MEASURED_ANSWERS = Path(__file__).resolve().parents[1] / "docs" / "results" / "answers.json"
# What `python -m bench teafarm` measured, with whether it is a valid TeaFarm score
TEAFARM_TITLE = "TeaFarm: false premises resisted, as measured"
MEASURED_TEAFARM = MEASURED_ANSWERS.with_name("teafarm.json")

INSTALLED = Options()  # the installed defaults the words name
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
    f"{INSTALLED.retriever}, THEANINE {INSTALLED.theanine_retriever}).</li></ul></details>"
)

TABLE_STRATEGIES = 3  # strategies side by side in the per-question table at first (it fits a phone)


def _e(x) -> str:
    return html.escape(str(x), quote=True)


def status_line(text: str, kind: str = "info") -> str:
    return panels.status_html(text, kind)


def progress_html(run: EvalRun) -> str:
    took = round(time.time() - run.started)
    note = (
        f"Running for {took // 60} min {took % 60:02d} s; the time left is the pace measured so far. It runs in "
        "the background on a scratch copy; you can keep chatting."
    )
    return panels.progress_html("eval-progress", f"Evaluating {run.source}", run.fraction, run.eta(), run.text, note)


def run_title(res: dict) -> str:
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


def _committed(path: Path, what: str) -> dict | None:
    """A committed result file as a dict, or None when it is absent or unreadable."""
    try:
        res = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        log.warning("%s unreadable (%s): %s", what, path, e)
        return None
    return res if isinstance(res, dict) else None


def measured_answers(path: Path = MEASURED_ANSWERS) -> dict | None:
    """The committed answer-quality results, or None when the file is absent or unreadable."""
    res = _committed(path, "measured answers")
    return res if res and isinstance(res.get("summary"), list) and res["summary"] else None


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
    res = _committed(path, "measured TeaFarm result")
    return res if res and isinstance(res.get("strategies"), dict) else None


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
