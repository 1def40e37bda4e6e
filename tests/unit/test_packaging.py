"""The folders operator/ and plugins/ install as shoal and shoal.plugins, editable and as a wheel,
and the standard library's ``operator`` module is never shadowed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import cast

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, operator, pkgutil, importlib, sys
import shoal, shoal.plugins
mods = sorted(
    {m.name for m in pkgutil.walk_packages(shoal.__path__, "shoal.")}
    | {m.name for m in pkgutil.walk_packages(shoal.plugins.__path__, "shoal.plugins.")}
)
for m in mods:
    importlib.import_module(m)
print(json.dumps({
    "shoal": shoal.__file__,
    "plugins": shoal.plugins.__file__,
    "operator_ok": operator.itemgetter(1)([0, 7]) == 7 and operator.__name__ == "operator",
    "operator_file": getattr(operator, "__file__", "builtin"),
    "modules": mods,
}))
"""


def source_modules() -> set[str]:
    out = set()
    for base, prefix in ((ROOT / "operator", "shoal"), (ROOT / "plugins", "shoal.plugins")):
        for path in base.rglob("*.py"):
            rel = path.relative_to(base).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            if base.name == "operator" and parts and parts[0] == "plugins":
                continue
            out.add(".".join([prefix, *parts]))
    return out - {"shoal", "shoal.plugins"}


def probe(env: dict[str, str]) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd="/",
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_editable_install_imports_from_the_checkout() -> None:
    result = probe({**os.environ, "PYTHONPATH": ""})
    assert result["shoal"] == str(ROOT / "operator" / "__init__.py")
    assert result["plugins"] == str(ROOT / "plugins" / "__init__.py")
    assert result["operator_ok"] is True
    assert not str(result["operator_file"]).startswith(str(ROOT))
    assert set(cast(list[str], result["modules"])) >= source_modules()


@pytest.mark.slow
def test_plain_wheel_install_imports(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(wheels),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("shoal-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "shoal/plugins/gpumemory.py" in names
    assert "shoal/py.typed" in names
    assert not any(n.startswith("operator/") for n in names)
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    result = probe({**os.environ, "PYTHONPATH": str(target)})
    assert str(result["shoal"]).startswith(str(target))
    assert str(result["plugins"]).startswith(str(target))
    assert result["operator_ok"] is True
    assert set(cast(list[str], result["modules"])) >= source_modules()
