"""docs/benchmarks.md is shared by the benchmark scripts: each owns one marked section."""

from __future__ import annotations

from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


def write_section(name: str, by: str, lines: list[str], *, first: bool = False, doc: Path = DOC) -> None:
    """Replace the section ``name`` (between its markers) or add it, at the top when ``first``."""
    begin, end = f"<!-- {name}:begin", f"<!-- {name}:end -->"
    section = "\n".join([f"{begin} (written by `{by}`) -->", *lines, end])
    text = doc.read_text() if doc.exists() else "# Benchmarks\n"
    if begin in text:
        text = text[: text.index(begin)] + section + text[text.index(end) + len(end) :]
    elif first:
        head, sep, rest = text.partition("\n\n")
        text = head + sep + section + "\n\n" + rest
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    doc.parent.mkdir(exist_ok=True)
    doc.write_text(text)
