"""``shoal run --logging-format=text|json``: the log lines, as Kubernetes components write them.

``json`` writes one JSON object per line, shaped as klog's JSON format: ``ts`` (seconds since the
epoch, a float), ``v`` (the verbosity: 0, or 4 for debug lines), ``msg``, then key-values — the
logger's name (``logger``), a ``level`` for warnings and errors, whatever the call passed as
``extra={...}`` (kopf's object reference as ``object``), and ``err`` (with ``stacktrace``) when an
exception is logged.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any, TextIO

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

#: a LogRecord's own attributes (everything else on a record came from ``extra``), and kopf's
#: private extras (its settings object, its posting flag)
_RECORD_FIELDS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message",
    "asctime",
    "settings",
    "k8s_skip",
}
#: extras renamed: kopf's object reference, as klog's ``object``
_RENAMED = {"k8s_ref": "object"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": round(record.created, 6),
            "v": 4 if record.levelno < logging.INFO else 0,
            "msg": record.getMessage(),
            "logger": record.name,
        }
        if record.levelno >= logging.WARNING:
            entry["level"] = record.levelname.lower()
        for key, value in vars(record).items():
            key = _RENAMED.get(key, key)
            if key not in _RECORD_FIELDS and key not in entry:
                entry[key] = value
        if record.exc_info and record.exc_info[1] is not None:
            entry["err"] = f"{type(record.exc_info[1]).__name__}: {record.exc_info[1]}"
            entry["stacktrace"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False, separators=(",", ":"))


def configure(fmt: str = "text", *, verbose: bool = False, stream: TextIO | None = None) -> None:
    """Set the root logger's handler (replacing any) for ``fmt``; kopf says only warnings unless
    ``verbose``."""
    if fmt not in FORMATS:
        raise ValueError(f"logging format {fmt!r}: expected one of {', '.join(FORMATS)}")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    logging.getLogger("kopf").setLevel(logging.DEBUG if verbose else logging.WARNING)
