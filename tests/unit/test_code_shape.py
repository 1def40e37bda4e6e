"""The layout issue's rules, kept (docs/architecture.md): modules sized by cohesion, no import cycle,
no logic in an ``__init__.py``, a core that names no plugin.

Product code is operator/ (the ``shoal`` package) and plugins/; ``shoal.testing`` (builders and
launchers for tests) is test tooling and is left out of the size alarm, not of the cycle check.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: a smoke alarm, not a target: a module is as long as its one concern needs
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 800, 80


def all_modules() -> dict[str, Path]:
    """Every module of the product by its dotted name (operator/ is ``shoal``, plugins/ ``shoal.plugins``)."""
    out: dict[str, Path] = {}
    for base, prefix in (("operator", ("shoal",)), ("plugins", ("shoal", "plugins"))):
        for path in (ROOT / base).rglob("*.py"):
            parts = [*prefix, *path.relative_to(ROOT / base).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def product_modules() -> list[Path]:
    return sorted(p for p in all_modules().values() if "testing" not in p.relative_to(ROOT).parts)


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every shoal module ``name`` imports, wherever the import stands: at the top, in a function,
    under ``if TYPE_CHECKING:`` or ``if __name__ == "__main__":`` (each closes a cycle as well)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            found.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names)
    resolved: set[str] = set()
    for target in found:
        while target not in modules and "." in target:
            target = target.rpartition(".")[0]
        if target in modules and target != name and target.startswith("shoal"):
            resolved.add(target)
    return resolved


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component: list[str] = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_counting_type_checking_and_main_blocks() -> None:
    modules = all_modules()
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    # a package's __init__ is imported with each of its modules: an edge module -> its package
    # closes no cycle unless the __init__ imports back, which the next test forbids
    assert cycles(graph) == []


def test_the_cycle_check_sees_a_cycle_closed_under_type_checking(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import shoal.b\n"
    )
    (tmp_path / "b.py").write_text("def f() -> None:\n    from shoal import a\n")
    modules = {"shoal.a": tmp_path / "a.py", "shoal.b": tmp_path / "b.py"}
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    assert cycles(graph) == [["shoal.a", "shoal.b"]]


def test_no_logic_in_an_init_module() -> None:
    """An ``__init__.py`` holds its package's docstring, nothing else: no code and no re-exports."""
    holding: list[str] = []
    inits = sorted((ROOT / "operator").rglob("__init__.py")) + sorted((ROOT / "plugins").rglob("__init__.py"))
    for path in inits:
        body = ast.parse(path.read_text()).body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]
        body = [n for n in body if not _is_dunder_constant(n)]  # __version__
        if body:
            holding.append(str(path.relative_to(ROOT)))
    assert holding == []


def _is_dunder_constant(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Assign)
        and all(isinstance(t, ast.Name) and t.id.startswith("__") for t in node.targets)
        and isinstance(node.value, ast.Constant)
    )


def plugin_names() -> set[str]:
    """The ``NAME`` every built-in plugin module declares."""
    names: set[str] = set()
    for path in (ROOT / "plugins").rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "NAME" for t in node.targets)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                names.add(node.value.value)
    return names


def strings_of(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """String constants that are not docstrings (prose may name a plugin; code may not)."""
    docstrings: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value


def test_the_core_names_no_plugin() -> None:
    """What the core must know about a plugin the plugin declares through the plugin contract."""
    names = plugin_names()
    assert {"NodeResourcesFit", "DynamicResources", "Coscheduling"} <= names
    word = re.compile(r"\b(" + "|".join(sorted(names)) + r")\b")
    named: list[str] = []
    for path in sorted((ROOT / "operator" / "core").rglob("*.py")):
        for lineno, text in strings_of(ast.parse(path.read_text())):
            if word.search(text):
                named.append(f"{path.relative_to(ROOT)}:{lineno} {text!r}")
    assert named == []


def test_no_product_module_or_function_too_long() -> None:
    too_long: list[str] = []
    for path in product_modules():
        text = path.read_text()
        if (n := len(text.splitlines())) > MAX_MODULE_LINES:
            too_long.append(f"{path.relative_to(ROOT)}: {n} lines")
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.end_lineno is None:
                continue
            if (length := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES:
                too_long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {length} lines")
    assert too_long == []


def test_the_framework_and_the_cycle_need_no_type_ignore() -> None:
    for folder in ("framework", "scheduling"):
        for path in sorted((ROOT / "operator" / "core" / folder).glob("*.py")):
            assert "type: ignore" not in path.read_text(), path.name
