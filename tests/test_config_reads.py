"""Configuration in one place: no product module reads the environment except the two configuration modules,
memory/settings.py (the memory library's variables and the reader) and sessions/settings.py (the app's).

The product is app.py, memory/, sessions/ and ui/. bench/ and tests/ are not checked: they are not the
product, and read variables for their own runs (the benchmark judge's key, a test server's port); what
they configure of the product they read through `Settings.from_env` / `AppSettings.from_env` too.
A write (`os.environ.setdefault(...)` in app.py's entry point) is not a read; tests/test_settings.py keeps
writes out of the libraries.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("app.py", "memory", "sessions", "ui")
CONFIG_MODULES = {"memory/settings.py", "sessions/settings.py"}
_WRITES = {"setdefault", "update", "pop", "clear", "__setitem__", "__delitem__"}


def env_reads(source: str) -> list[str]:
    """Every read of the environment in `source`, as "line: what": `os.environ` used other than as the target
    of a write (`.get`, `[...]`, `in`, `dict(os.environ)`, ...), `os.getenv`/`os.getenvb`, `os.environb`, and
    `environ`/`getenv` imported from os (then every use of the imported name)."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    imported: set[str] = set()
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "os":
            for a in node.names:
                if a.name in ("environ", "environb", "getenv", "getenvb"):
                    imported.add(a.asname or a.name)
                    found.append(f"{node.lineno}: from os import {a.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os":
            if node.attr in ("getenv", "getenvb", "environb"):
                found.append(f"{node.lineno}: os.{node.attr}")
            elif node.attr == "environ" and not _is_write(node, parents):
                found.append(f"{node.lineno}: {ast.unparse(parents.get(node, node))}")
        elif isinstance(node, ast.Name) and node.id in imported and not _is_write(node, parents):
            found.append(f"{node.lineno}: {node.id}")
    return found


def _is_write(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    up = parents.get(node)
    if isinstance(up, ast.Attribute) and up.attr in _WRITES and isinstance(parents.get(up), ast.Call):
        return True
    return isinstance(up, ast.Subscript) and isinstance(up.ctx, (ast.Store, ast.Del))


def product_files() -> list[Path]:
    return sorted(
        p for part in PRODUCT for p in ((ROOT / part).rglob("*.py") if (ROOT / part).is_dir() else [ROOT / part])
    )


def test_the_check_sees_every_form_of_read():
    src = (
        "import os\nfrom os import environ, getenv as g\n"
        "a = os.environ.get('A')\nb = os.environ['B']\nc = 'C' in os.environ\nd = dict(os.environ)\n"
        "e = os.getenv('E')\nf = environ.get('F')\nh = g('H')\ni = os.environb\n"
    )
    lines = [int(r.split(":")[0]) for r in env_reads(src)]
    assert lines == [2, 2, 3, 4, 5, 6, 7, 8, 9, 10] or sorted(lines) == [2, 2, 3, 4, 5, 6, 7, 8, 9, 10], env_reads(src)
    writes = "import os\nos.environ.setdefault('A', '1')\nos.environ['B'] = '2'\ndel os.environ['C']\n"
    assert env_reads(writes) == []
    assert env_reads("settings = Settings.from_env(env)\nx = env.get('A')\n") == []  # a mapping passed in


def test_only_the_configuration_modules_read_the_environment():
    files = product_files()
    assert len(files) > 100 and ROOT / "app.py" in files and ROOT / "ui" / "graph_view.py" in files
    reads = {str(f.relative_to(ROOT)): env_reads(f.read_text(encoding="utf-8")) for f in files}
    assert {f for f in CONFIG_MODULES if reads[f]} == CONFIG_MODULES  # the check sees the reads that are there
    assert {f: r for f, r in reads.items() if r and f not in CONFIG_MODULES} == {}
