"""No import circles inside the product's packages: the modules of memory/ and sessions/ import each other
one way only, at import time, at run time (an import inside a function) and for types alike.

`python -m tests.test_no_import_cycles` prints, per package, its modules, the imports between them and
each circle (the edges of a circle marked t = top level, r = run time inside a function, y = types only),
and its floors: the longest chain of imports that load a module (top level or inside a function) from
the package down, the package counted as the first floor. An import for types only loads nothing and
makes no floor; the figure with them counted is printed beside it. ui/ has at most UI_FLOORS.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("memory", "sessions", "ui", "bench")
CHECKED = ("memory", "sessions", "ui")
STRENGTH = "try"  # an import at import time beats one at run time, which beats one for types only
LOADING = "tr"  # the imports that load a module: at import time, or at run time inside a function
UI_FLOORS = 6


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _type_only(tree: ast.Module) -> set[int]:
    """Ids of the import nodes under `if TYPE_CHECKING:`."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return out


def _in_functions(tree: ast.Module) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            out |= {id(n) for n in ast.walk(node) if n is not node}
    return out


def imports(name: str, path: Path, known: set[str]) -> dict[str, str]:
    """{imported module of `known`: kind} for module `name`; kind "t" (top level), "r" (run time, inside a
    function) or "y" (types only); the strongest kind wins when a module is imported twice."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typed, late = _type_only(tree), _in_functions(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: dict[str, str] = {}

    def add(target: str, node: ast.AST) -> None:
        while target and target not in known:
            target = target.rpartition(".")[0]  # `a.b.c` where c is a name in a.b
        if not target or target == name:
            return
        kind = "y" if id(node) in typed else "r" if id(node) in late else "t"
        if target not in found or STRENGTH.index(kind) < STRENGTH.index(found[target]):
            found[target] = kind

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                add(a.name, node)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for a in node.names:
                sub = f"{mod}.{a.name}"
                add(sub if sub in known else mod, node)
    return found


def graph() -> dict[str, dict[str, str]]:
    mods = _modules()
    known = set(mods)
    return {m: imports(m, p, known) for m, p in mods.items()}


def cycles(g: dict[str, dict[str, str]], package: str) -> list[list[str]]:
    """The strongly connected components of more than one module among `package`'s modules (Tarjan)."""
    nodes = [m for m in g if m == package or m.startswith(package + ".")]
    inside = set(nodes)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in inside:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            visit(v)
    return sorted(out)


def floors(g: dict[str, dict[str, str]], package: str, kinds: str = LOADING, start: str = "") -> list[str]:
    """The longest chain of imports of `kinds` among `package`'s modules, from `start` (the package itself,
    its __init__, the first floor; "*": from whichever module has the longest) down; the modules must
    import each other without a circle."""
    inside = {m for m in g if m == package or m.startswith(package + ".")}
    below: dict[str, list[str]] = {}

    def chain(m: str) -> list[str]:
        if m not in below:
            nexts = [chain(t) for t, k in g[m].items() if t in inside and k in kinds]
            below[m] = [m, *max(nexts, key=len, default=[])]
        return below[m]

    sys.setrecursionlimit(10000)
    if start == "*":
        return max((chain(m) for m in sorted(inside)), key=len)
    return chain(start or package)


def report(g: dict[str, dict[str, str]]) -> str:
    lines = []
    for pkg in PACKAGES:
        mods = [m for m in g if m == pkg or m.startswith(pkg + ".")]
        edges = sum(1 for m in mods for t in g[m] if t in mods)
        found = cycles(g, pkg)
        lines.append(f"{pkg}: {len(mods)} modules, {edges} imports between them, {len(found)} circle(s)")
        for comp in found:
            inner = ", ".join(f"{a}->{b} ({k})" for a in comp for b, k in g[a].items() if b in comp)
            lines.append(f"  {' <-> '.join(comp)}: {inner}")
        if not found:
            deepest, typed = floors(g, pkg), floors(g, pkg, STRENGTH)
            n = len(deepest)
            lines.append(f"  {n} floor{'s' * (n > 1)}: {' -> '.join(deepest)} ({len(typed)} with imports for types)")
            if len(deepest) == 1:  # the package's __init__ imports none of its modules
                longest = floors(g, pkg, start="*")
                lines.append(f"  the longest chain inside: {len(longest)} modules, {' -> '.join(longest)}")
    return "\n".join(lines)


def test_the_check_finds_a_circle_of_each_kind(tmp_path):
    g = {"p": {}, "p.a": {"p.b": "t"}, "p.b": {"p.a": "r"}, "p.c": {"p.d": "y"}, "p.d": {"p.c": "t"}, "p.e": {}}
    assert cycles(g, "p") == [["p.a", "p.b"], ["p.c", "p.d"]]
    src = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import b\ndef f():\n    from .c import x\n"
    (tmp_path / "a.py").write_text(src)
    assert imports("p.a", tmp_path / "a.py", {"p", "p.a", "p.b", "p.c"}) == {"p.b": "y", "p.c": "r"}


def test_floors_count_the_loading_imports_from_the_package_down():
    g = {"p": {"p.a": "t"}, "p.a": {"p.b": "r", "p.c": "t"}, "p.b": {"p.d": "y"}, "p.c": {}, "p.d": {}, "q": {}}
    assert floors(g, "p") == ["p", "p.a", "p.b"]  # p.b -> p.d is for types only
    assert floors(g, "p", STRENGTH) == ["p", "p.a", "p.b", "p.d"]
    assert floors(g, "q") == ["q"]
    assert floors(g, "p", start="*") == ["p", "p.a", "p.b"]


def test_memory_and_sessions_have_no_import_circles():
    g = graph()
    assert len(g) > 100 and "sessions.damage" in g and "memory.theanine.graph" in g
    assert {pkg: cycles(g, pkg) for pkg in CHECKED} == {pkg: [] for pkg in CHECKED}, report(g)


def test_ui_is_at_most_six_floors_deep():
    g = graph()
    deepest = floors(g, "ui")
    assert len(deepest) <= UI_FLOORS, " -> ".join(deepest)


if __name__ == "__main__":
    print(report(graph()))
