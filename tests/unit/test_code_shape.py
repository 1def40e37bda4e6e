"""The structure issue's limits, kept: product modules stay small enough to read whole.

Product code is operator/ (the ``shoal`` package) and plugins/; ``shoal.testing`` (builders and
launchers for tests) is test tooling and is left out, as tests are.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 500, 60


def product_modules() -> list[Path]:
    files = [*(ROOT / "operator").rglob("*.py"), *(ROOT / "plugins").rglob("*.py")]
    return sorted(p for p in files if "testing" not in p.relative_to(ROOT).parts)


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


def test_the_runtime_needs_no_type_ignore() -> None:
    for name in ("runtime.py", "invoker.py", "pernode.py", "placement.py", "cycle.py"):
        assert "type: ignore" not in (ROOT / "operator" / "core" / name).read_text(), name
