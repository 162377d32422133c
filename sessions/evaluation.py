"""Evaluate memory designs on a LoCoMo-format file or on the user's own history and questions.

A run is the evaluation API's run (`memory.evaluation.agent_run.run`, which
`python -m bench locomo --path agent` calls too), not a copy: every choice the page offers is a
`RunSpec` field, and the result is the JSON the command writes (with `--contexts`).

* Scratch data only: the benchmark closes the sessions into memory in a temporary folder of its
  own; the user's memory, sessions and settings are read (their transcript, for "my history") and
  never written.
* In the background: one run per user (its own lane of the user's work, sessions/work.py, so the
  chat and memory builds go on), on a worker pool of its own at a lower CPU priority, like memory builds. The
  last run of each user is kept (in this process), so a reload shows it running or finished.
* Bad input (not LoCoMo, no question with evidence, bad budgets or turn ids) is refused with a
  message before anything starts.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from memory.evaluation import agent_run
from memory.evaluation.conversations import Conversation, load_samples
from memory.evaluation.scoring import CATEGORY_NAMES as SCORED_NAMES
from memory.evaluation.spec import AGENT_METHODS, DEFAULT_RETRIEVERS, MIN_BUDGET, SUMMARISERS, RunSpec
from memory.files import atomic_write_json, scratch_dir
from memory.settings import Settings

from .db import UserError
from .session_room import SessionRoom
from .settings import Limits
from .transfer import MAX_FILE_BYTES
from .users import UserKey, check_user_id, own_key
from .work import BuildPool, Progress, Progressing

log = logging.getLogger(__name__)

MAX_BUDGET = 32000  # the settings' highest budget
MAX_BUDGETS = 8
MAX_CONVERSATIONS = 10
MAX_MY_QUESTIONS = 50
MAX_QUESTION_CHARS = 500
CATEGORY_NAMES = {int(c): name for c, name in SCORED_NAMES.items()}  # by LoCoMo's integer category
MY_HISTORY = "my-history"
_TURN_ID = re.compile(r"D(\d+):(\d+)")


@dataclass(kw_only=True)
class EvalRun(Progressing):
    """One user's run: its progress while it runs, then the benchmark's JSON (or what went wrong)."""

    source: str  # what was evaluated, for people
    spec: RunSpec
    text: str = "Waiting to start…"
    done: bool = False
    result: dict | None = None
    error: str | None = None
    path: Path | None = None  # the JSON, for download
    turns: dict = field(default_factory=dict)  # (conversation, turn id) -> (speaker, text), to show evidence
    forgotten: bool = False  # the user chose Forget me: keep nothing of this run


@dataclass
class EvalRequest:
    """A checked request: the conversations to evaluate and the run's choices."""

    convs: list[Conversation]
    spec: RunSpec
    source: str


# --- checking what the page sends ------------------------------------------------------------------


def parse_budgets(text) -> list[int]:
    """ "250, 500,1000" -> [250, 500, 1000]; UserError for anything else."""
    parts = [p for p in re.split(r"[,\s;]+", str(text or "").strip()) if p]
    if not parts:
        raise UserError("Token budgets: give at least one, e.g. 250,500,1000,2000.")
    try:
        budgets = [int(p) for p in parts]
    except ValueError:
        raise UserError(f"Token budgets must be whole numbers separated by commas, not {text!r}.") from None
    bad = [b for b in budgets if not MIN_BUDGET <= b <= MAX_BUDGET]
    if bad:
        raise UserError(
            f"Token budgets must lie between {MIN_BUDGET} and {MAX_BUDGET} tokens (not {', '.join(map(str, bad))})."
        )
    budgets = sorted(set(budgets))
    if len(budgets) > MAX_BUDGETS:
        raise UserError(f"At most {MAX_BUDGETS} token budgets per run.")
    return budgets


def make_spec(methods, retrievers, budgets_text, summarisers, llm_configured: bool) -> RunSpec:
    """The run the page asks for, as the benchmark's RunSpec (with contexts: the page shows them)."""
    spec = RunSpec(
        methods=[m for m in AGENT_METHODS if m in (methods or [])],
        retrievers=[r for r in DEFAULT_RETRIEVERS if r in (retrievers or [])],
        budgets=parse_budgets(budgets_text),
        summarisers=[s for s in SUMMARISERS if s in (summarisers or [])],
        contexts=True,
    )
    if not spec.methods:
        raise UserError("Choose at least one memory strategy to evaluate.")
    if not spec.retrievers:
        raise UserError("Choose at least one retriever.")
    if not spec.summarisers:
        raise UserError("Choose at least one way to build memory (offline needs no LLM).")
    problems = spec.problems(llm_configured)
    if problems:
        raise UserError("Cannot run: " + "; ".join(problems) + ".")
    return spec


def conversations_from_file(data: bytes | str, only: str = "") -> list[Conversation]:
    """The conversations of an uploaded LoCoMo-format file (`only`: comma-separated sample ids)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    if len(data) > MAX_FILE_BYTES:
        raise UserError(f"The file is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB.")
    try:
        obj = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise UserError(f"The file is not valid JSON ({type(e).__name__}); nothing was run.") from None
    wanted = [x.strip() for x in (only or "").split(",") if x.strip()]
    try:
        convs = load_samples(obj, wanted or None)
    except LookupError as e:
        raise UserError(f"The file holds {e.args[0]}; check the conversation ids.") from None
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise UserError(
            "The file is not in LoCoMo's format (a list of samples, each with a 'conversation' of "
            f"session_N turn lists and a 'qa' list): {e}"
        ) from None
    if len(convs) > MAX_CONVERSATIONS:
        raise UserError(
            f"The file holds {len(convs)} conversations; evaluate at most {MAX_CONVERSATIONS} at once "
            "(name them in the conversation ids field)."
        )
    if not any(c.sessions for c in convs):
        raise UserError("The file has no session with turns.")
    if not any(c.questions for c in convs):
        raise UserError(
            "The file has no question to evaluate: each needs evidence turn ids (adversarial "
            "category-5 questions are skipped, as the benchmark does)."
        )
    return convs


# --- the user's own history ----------------------------------------------------------------------


def my_turns(sessions: SessionRoom, key: UserKey) -> list[dict]:
    """The user's sessions in time order as LoCoMo sessions: [{"date", "turns": [(id, speaker, text)]}].
    Turn ids are LoCoMo's form, D<session>:<turn>, both counted from 1 over sessions with turns."""
    key = own_key(key)
    out: list[dict] = []
    for s in sessions.in_order(key):
        rows = [m for m in sessions.messages(key, s.session_id) if m.status == "ok" and (m.text or "").strip()]
        if not rows:
            continue
        n = len(out) + 1
        turns = [(f"D{n}:{i}", m.speaker or m.role, m.text) for i, m in enumerate(rows, 1)]
        out.append({"date": s.date, "turns": turns})
    return out


def my_turn_rows(sessions: SessionRoom, key: UserKey, max_chars: int = 160) -> list[list[str]]:
    """[turn id, date, speaker, text] per turn, for the page's "your turns" table."""
    rows = []
    for s in my_turns(sessions, key):
        for tid, speaker, text in s["turns"]:
            short = " ".join(text.split())
            rows.append([tid, s["date"], speaker, short if len(short) <= max_chars else short[: max_chars - 1] + "…"])
    return rows


def _question_rows(rows) -> list[tuple[str, str, str]]:
    """The page's question table as (question, turn ids, category) strings, empty rows dropped."""
    if rows is None:
        return []
    if hasattr(rows, "values") and hasattr(rows, "columns"):  # a pandas DataFrame
        rows = rows.values.tolist()
    out = []
    for r in rows:
        cells = [("" if c is None or (isinstance(c, float) and c != c) else str(c)).strip() for c in list(r)[:3]]
        cells += [""] * (3 - len(cells))
        if any(cells):
            out.append((cells[0], cells[1], cells[2]))
    return out


def my_history_sample(room: SessionRoom, key: UserKey, rows) -> dict:
    """The user's history and questions as one LoCoMo sample (the format the benchmark reads)."""
    sessions = my_turns(room, key)
    if not sessions:
        raise UserError("Your history is empty: chat or import a conversation first.")
    known = {tid for s in sessions for tid, _, _ in s["turns"]}
    questions = _question_rows(rows)
    if not questions:
        raise UserError("Write at least one question, with the turn ids that answer it (e.g. D1:3).")
    if len(questions) > MAX_MY_QUESTIONS:
        raise UserError(f"At most {MAX_MY_QUESTIONS} questions per run.")
    qa = []
    for i, (question, ids, cat) in enumerate(questions, 1):
        qa.append(_checked_question(i, question, ids, cat, known))
    conv: dict = {}
    speakers = list(dict.fromkeys(sp for s in sessions for _, sp, _ in s["turns"]))
    conv["speaker_a"], conv["speaker_b"] = [*speakers, "", ""][:2]
    for n, s in enumerate(sessions, 1):
        conv[f"session_{n}_date_time"] = s["date"]
        conv[f"session_{n}"] = [{"speaker": sp, "dia_id": tid, "text": text} for tid, sp, text in s["turns"]]
    return {"sample_id": MY_HISTORY, "conversation": conv, "qa": qa}


def _checked_question(i: int, question: str, ids: str, cat: str, known: set[str]) -> dict:
    where = f"Question {i}"
    if not question:
        raise UserError(f"{where}: the question is empty.")
    if len(question) > MAX_QUESTION_CHARS:
        raise UserError(f"{where}: at most {MAX_QUESTION_CHARS} characters.")
    rest = _TURN_ID.sub("", ids)
    evidence = [f"D{int(a)}:{int(b)}" for a, b in _TURN_ID.findall(ids)]
    if not evidence or re.sub(r"[\s,;]+", "", rest):
        raise UserError(
            f"{where}: give the turn ids that answer it as D<session>:<turn>, comma-separated "
            f"(e.g. D1:3, D2:5), not {ids!r}. “Show my turns” lists your turns with their ids."
        )
    unknown = [e for e in evidence if e not in known]
    if unknown:
        raise UserError(f"{where}: your history has no turn {', '.join(unknown)} (see “Show my turns”).")
    try:
        category = int(float(cat)) if cat else 4
    except ValueError:
        category = -1
    if category not in CATEGORY_NAMES:
        names = ", ".join(f"{k} {v}" for k, v in CATEGORY_NAMES.items())
        raise UserError(f"{where}: the category must be one of {names} (not {cat!r}).")
    return {"question": question, "answer": "", "evidence": list(dict.fromkeys(evidence)), "category": category}


# --- running -----------------------------------------------------------------------------------


class Evaluations:
    """Runs of the benchmark for the page, one per user, in the background (see the module docstring)."""

    def __init__(self, sessions: SessionRoom, settings: Settings, limits: Limits | None = None):
        self.sessions, self.settings = sessions, settings  # the user's history: read, never written
        lim = limits or sessions.limits
        self.pool = BuildPool(1, lim.build_nice)  # its own worker: memory builds never wait behind a run
        self.work = sessions.work  # the run holds the user's "evaluate" lane
        self._runs: dict[str, EvalRun] = {}  # the latest run of each user
        self._done: dict[str, EvalRun] = {}  # the latest run of each user that has results
        self._lock = threading.Lock()
        self._dir: Path | None = None  # made at the first finished run, removed at exit

    @property
    def llm_available(self) -> bool:
        """Whether the llm summariser can run: an endpoint or a model file is configured, not the bundled model."""
        return not self.settings.llm.is_bundled

    def request_file(self, data: bytes | str, only: str, methods, retrievers, budgets, summarisers, name: str):
        spec = make_spec(methods, retrievers, budgets, summarisers, self.llm_available)
        return EvalRequest(conversations_from_file(data, only), spec, name or "uploaded file")

    def request_history(self, key: UserKey, rows, methods, retrievers, budgets, summarisers) -> EvalRequest:
        spec = make_spec(methods, retrievers, budgets, summarisers, self.llm_available)
        if "reference" in spec.summarisers:
            raise UserError("The reference summariser needs LoCoMo's observation facts; use offline (or llm).")
        sample = my_history_sample(self.sessions, key, rows)
        return EvalRequest(load_samples([sample]), spec, "your history and questions")

    def get(self, user_id: str) -> EvalRun | None:
        with self._lock:
            return self._runs.get(user_id)

    def finished(self, user_id: str) -> EvalRun | None:
        """The user's latest run with results (shown while a newer one runs or after one failed)."""
        with self._lock:
            return self._done.get(user_id)

    def start(self, user_id: str, req: EvalRequest) -> EvalRun:
        """Start a run in the background; Busy when this user's previous run is still going."""
        user_id = check_user_id(user_id)
        run = EvalRun(source=req.source, spec=req.spec)
        run.turns = {
            (c.sample_id, t.turn_id): (t.speaker, t.text) for c in req.convs for s in c.sessions for t in s.turns
        }
        self.work.start(user_id, "evaluate", lambda w: self._run(user_id, run, req))
        with self._lock:
            self._runs[user_id] = run
        return run

    def forget(self, user_id: str) -> None:
        """Forget me: the user's runs (results and JSON files, which may quote their history) go too."""
        with self._lock:
            runs = [r for r in (self._runs.pop(user_id, None), self._done.pop(user_id, None)) if r is not None]
        for run in runs:
            run.forgotten = True
            if run.path is not None:
                shutil.rmtree(run.path.parent, ignore_errors=True)

    def _run(self, user_id: str, run: EvalRun, req: EvalRequest) -> None:
        try:
            result = self.pool.run(lambda p: self._bench(req, p), run.progress)
            with self._lock:
                if self._dir is None:
                    self._dir = scratch_dir("memory-eval-")
            folder = Path(tempfile.mkdtemp(prefix="run-", dir=self._dir))  # never named from user input
            run.path = atomic_write_json(folder / "locomo_evaluation.json", result)
            run.result = result
            run.progress(1.0, f"Done in {round(time.time() - run.started)} s.")
            with self._lock:
                if run.forgotten:  # Forget me while it ran
                    shutil.rmtree(folder, ignore_errors=True)
                    run.result, run.path = None, None
                else:
                    self._done[user_id] = run
        except UserError as e:
            run.error = str(e)
        except Exception as e:
            log.exception("evaluation failed")
            run.error = f"The evaluation failed ({type(e).__name__}: {e}). Nothing of yours was changed."
        finally:
            run.done = True

    def _bench(self, req: EvalRequest, progress: Progress) -> dict:
        return agent_run.run(req.convs, req.spec, settings=self.settings, data=req.source, report=progress)

    def shutdown(self) -> None:
        self.pool.shutdown()
