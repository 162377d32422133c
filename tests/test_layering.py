"""The product never imports the benchmarks: memory/, sessions/, ui/ and app.py do not import `bench`
(what the evaluation tab shares with it lives in memory/evaluation/; docs/architecture.md)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ["memory", "sessions", "ui", "app.py"]


def _is_bench(name: str) -> bool:
    return name == "bench" or name.startswith("bench.")


def bench_imports(source: str) -> list[str]:
    """The imports of `bench` in `source` (import, from-import, importlib.import_module / __import__ of a
    literal name), as "line: module"."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                found.append((node.lineno, node.args[0].value))
    return [f"{line}: {name}" for line, name in found if _is_bench(name)]


def product_files() -> list[Path]:
    files = []
    for part in PRODUCT:
        path = ROOT / part
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return files


def test_the_check_sees_every_form_of_import():
    src = (
        "import bench\nimport bench.teafarm as t\nfrom bench import qa\nfrom bench.secom.learn import main\n"
        "import importlib\nimportlib.import_module('bench.locomo_recall')\n__import__('bench')\n"
    )
    assert len(bench_imports(src)) == 6
    assert bench_imports("import benchmarks\nfrom memory.evaluation import teafarm\nfrom . import bench\n") == []


def test_the_product_never_imports_bench():
    files = product_files()
    assert len(files) > 50 and ROOT / "app.py" in files and ROOT / "ui" / "evaluation.py" in files
    offending = {
        str(f.relative_to(ROOT)): hits for f in files if (hits := bench_imports(f.read_text(encoding="utf-8")))
    }
    assert offending == {}
