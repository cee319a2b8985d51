"""The shape of the house (docs/design.md §9): arrows one way, rooms of a readable size.

These tests read the package's source with :mod:`ast`; they import nothing of it, so they are
fast and they see imports inside functions too.
"""

from __future__ import annotations

import ast
import importlib
import pathlib
import warnings

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "mgkflow"

#: Limits the layout keeps (docstrings included).
MAX_CLASS_LINES = 450
MAX_FUNCTION_LINES = 150

#: Old module paths that stay importable as deprecated aliases, and where they point.
MOVED = {
    "mgkflow.cpu_solver": "mgkflow.backends.exact",
    "mgkflow.cpu_engine": "mgkflow.backends.cpu",
    "mgkflow.gradient": "mgkflow.evaluation.gradient",
    "mgkflow.io_chem": "mgkflow.io.rdkit",
    "mgkflow.io_pdb": "mgkflow.io.pdb",
    "mgkflow.gpu.compact": "mgkflow.gpu.solvers.compact",
    "mgkflow.gpu.wide": "mgkflow.gpu.solvers.wide",
    "mgkflow.gram.bench": "mgkflow.bench.gram",
    "mgkflow.bench.fuzz": "mgkflow.fuzz",
}


def _modules() -> dict[str, pathlib.Path]:
    mods = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts).removesuffix(".__init__")
        mods[name] = path
    return mods


def _trees() -> dict[str, tuple[pathlib.Path, ast.Module]]:
    return {name: (path, ast.parse(path.read_text(), str(path))) for name, path in _modules().items()}


def _is_alias(tree: ast.Module) -> bool:
    """A deprecated alias module: its body only puts another module in ``sys.modules``."""
    return any(
        isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "sys.modules[__name__]"
        for node in ast.walk(tree)
    )


def import_graph() -> dict[str, set[str]]:
    """Module -> modules of mgkflow it imports, anywhere in its body (functions included).

    ``from pkg import sub`` is an edge to ``pkg.sub`` when that is a module; ``from pkg import
    name`` of a name defined in the package's ``__init__`` is an edge to ``pkg`` itself.
    Deprecated alias modules are left out (nothing inside the package may import them).
    """
    trees = _trees()
    mods = set(trees)
    edges: dict[str, set[str]] = {}
    for name, (path, tree) in trees.items():
        if _is_alias(tree):
            continue
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        out = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names if a.name in mods)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                if not base.startswith("mgkflow"):
                    continue
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    out.add(sub if sub in mods else base)
        out.discard(name)
        edges[name] = {m for m in out if m in mods}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle():
    found = cycles(import_graph())
    assert not found, "modules that import each other, directly or around a circle: " + "; ".join(
        " <-> ".join(c) for c in found
    )


def test_cycle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def _sizes(kind: type) -> list[tuple[int, str]]:
    rows = []
    for path, tree in _trees().values():
        for node in ast.walk(tree):
            if isinstance(node, kind):
                rows.append((node.end_lineno - node.lineno + 1, f"{path.relative_to(ROOT.parent)}:{node.name}"))
    return sorted(rows, reverse=True)


def test_no_class_over_the_limit():
    big = [f"{where} ({n} lines)" for n, where in _sizes(ast.ClassDef) if n > MAX_CLASS_LINES]
    assert not big, f"classes over {MAX_CLASS_LINES} lines: {big}"


def test_no_function_over_the_limit():
    rows = _sizes(ast.FunctionDef) + _sizes(ast.AsyncFunctionDef)
    big = [f"{where} ({n} lines)" for n, where in rows if n > MAX_FUNCTION_LINES]
    assert not big, f"functions over {MAX_FUNCTION_LINES} lines: {big}"


def test_nothing_inside_imports_a_deprecated_path():
    old = set(MOVED)
    users = {m: sorted(e & old) for m, e in import_graph().items() if e & old}
    assert not users, f"modules importing deprecated paths: {users}"


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_paths_warn_and_point_to_the_new_module(old):
    import sys

    sys.modules.pop(old, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mod = importlib.import_module(old)
    assert mod is importlib.import_module(MOVED[old])
    assert any(issubclass(w.category, DeprecationWarning) and MOVED[old] in str(w.message) for w in caught)


def test_every_alias_module_is_listed():
    aliases = {name for name, (_path, tree) in _trees().items() if _is_alias(tree)}
    assert aliases == set(MOVED)
