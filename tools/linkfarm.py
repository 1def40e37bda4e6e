"""Build .typecheck/shoal: the import package as installed (operator/ + plugins/ as shoal.plugins).

mypy and import-linter map file paths to module names, and the folder operator/ would be read as
the standard library's ``operator``. This farm of symlinks gives them the installed layout.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def main(root: Path, out: Path) -> None:
    pkg = out / "shoal"
    if out.exists():
        shutil.rmtree(out)
    pkg.mkdir(parents=True)
    for entry in (root / "operator").iterdir():
        if entry.name == "__pycache__":
            continue
        (pkg / entry.name).symlink_to(entry.resolve())
    (pkg / "plugins").symlink_to((root / "plugins").resolve())


if __name__ == "__main__":
    here = Path(__file__).resolve().parent.parent
    main(here, Path(sys.argv[1]) if len(sys.argv) > 1 else here / ".typecheck")
