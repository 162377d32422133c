"""Long jobs of the page (memory builds) in a background thread, one per user, polled by a gr.Timer.

A build can take minutes. Run inside a Gradio event it would hold a worker and
cover every output with a progress overlay; here the event only starts it and
returns, the chat and the other panels stay usable, and a timer (active only
while a job runs) shows one progress bar. A reload finds the running job by the
user id and shows its progress at once. The job itself (what is built) is the
session service's; this module only runs and reports it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


@dataclass
class Job:
    kind: str  # what is running, for people ("Building memory")
    started: float = field(default_factory=time.time)
    fraction: float = 0.0
    text: str = ""
    done: bool = False
    result: Any = None
    error: BaseException | None = None

    def progress(self, fraction: float, text: str) -> None:
        self.fraction, self.text = max(self.fraction, min(1.0, max(0.0, float(fraction)))), text

    def eta(self) -> float | None:
        """Seconds left, from the pace so far (None until there is a pace)."""
        elapsed = time.time() - self.started
        if self.fraction < 0.02 or elapsed < 2:
            return None
        return elapsed * (1 - self.fraction) / self.fraction


class Jobs:
    def __init__(self):
        self._lock = threading.Lock()
        self._jobs: dict[str, Job] = {}

    def get(self, user_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(user_id)

    def running(self, user_id: str) -> Job | None:
        job = self.get(user_id)
        return job if job is not None and not job.done else None

    def start(self, user_id: str, kind: str, fn: Callable[[Callable[[float, str], None]], Any]) -> Job | None:
        """Run fn(progress) in a thread; None when this user already has a job running."""
        with self._lock:
            old = self._jobs.get(user_id)
            if old is not None and not old.done:
                return None
            job = self._jobs[user_id] = Job(kind)

        def run() -> None:
            try:
                job.result = fn(job.progress)
            except BaseException as e:
                log.exception("background job failed")
                job.error = e
            finally:
                job.done = True

        threading.Thread(target=run, name=f"job-{kind}", daemon=True).start()
        return job

    def take_finished(self, user_id: str) -> Job | None:
        """The user's finished job, removed (its result is shown once)."""
        with self._lock:
            job = self._jobs.get(user_id)
            if job is None or not job.done:
                return None
            return self._jobs.pop(user_id)
