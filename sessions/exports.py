"""Export files: private, temporary, one copy.

Each export is written once, as `<root>/<random token>/memory-export.json`: the folders 0700,
the file 0600 (only the app's OS user reads them). The page is handed that path and nobody else
learns it (the token is 192 random bits). A file is deleted shortly after its download, at the
latest `ttl_s` after it was written, at Forget me, and at the next start (exports are never
kept). The UI puts `root` inside Gradio's cache folder, so Gradio serves the file from there and
makes no second copy.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import threading
import time
from pathlib import Path

from memory.userspace import user_key

log = logging.getLogger(__name__)

FILE_NAME = "memory-export.json"
DEFAULT_TTL_S = 600.0  # an export not downloaded within 10 minutes is deleted
AFTER_DOWNLOAD_S = 60.0  # kept this long after the download started, so it can complete


class ExportFiles:
    def __init__(self, root: Path | str, ttl_s: float = DEFAULT_TTL_S, sweep_every_s: float | None = 30.0):
        self.root = Path(root)
        self.ttl_s = float(ttl_s)
        self._lock = threading.Lock()
        self._expiry: dict[Path, float] = {}  # folder -> when it is deleted
        self._owner: dict[Path, str] = {}  # folder -> user key
        self._sweep_every_s = sweep_every_s
        self._sweeper: threading.Thread | None = None
        self._clear_root()

    def _clear_root(self) -> None:
        """At start: no export outlives the process that wrote it."""
        if self.root.exists():
            shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True, mode=0o700, exist_ok=True)
        os.chmod(self.root, 0o700)

    def write(self, user_id: str, text: str) -> Path:
        """A new private file holding `text`; returns its path."""
        self.sweep()
        self.root.mkdir(parents=True, mode=0o700, exist_ok=True)
        folder = self.root / secrets.token_urlsafe(24)
        folder.mkdir(mode=0o700)
        path = folder / FILE_NAME
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        with self._lock:
            self._expiry[folder] = time.time() + self.ttl_s
            self._owner[folder] = user_key(user_id)
            if self._sweep_every_s and self._sweeper is None:  # from the first export on
                self._sweeper = threading.Thread(
                    target=self._sweep_loop, args=(self._sweep_every_s,), daemon=True, name="export-sweep"
                )
                self._sweeper.start()
        return path

    def downloaded(self, user_id: str, grace_s: float = AFTER_DOWNLOAD_S) -> None:
        """The user's download started: their export files go `grace_s` from now."""
        k, until = user_key(user_id), time.time() + grace_s
        with self._lock:
            for folder, owner in self._owner.items():
                if owner == k:
                    self._expiry[folder] = min(self._expiry[folder], until)
        self.sweep()

    def forget(self, user_id: str) -> int:
        """Delete every export file of the user now (Forget me); returns how many."""
        k = user_key(user_id)
        with self._lock:
            mine = [f for f, owner in self._owner.items() if owner == k]
        for folder in mine:
            self._delete(folder)
        return len(mine)

    def sweep(self) -> None:
        """Delete what has expired, and any folder under root this process did not write."""
        now = time.time()
        with self._lock:
            due = [f for f, t in self._expiry.items() if t <= now]
            known = set(self._expiry)
        for folder in due:
            self._delete(folder)
        try:
            strays = [p for p in self.root.iterdir() if p not in known]
        except FileNotFoundError:
            return
        for p in strays:  # e.g. written by an earlier process
            if p.is_dir() and p.stat().st_mtime < now - self.ttl_s:
                shutil.rmtree(p, ignore_errors=True)

    def _delete(self, folder: Path) -> None:
        shutil.rmtree(folder, ignore_errors=True)
        with self._lock:
            self._expiry.pop(folder, None)
            self._owner.pop(folder, None)

    def _sweep_loop(self, every_s: float) -> None:
        while True:
            time.sleep(every_s)
            try:
                self.sweep()
            except Exception:  # the sweeper must keep running
                log.exception("export sweep failed")
