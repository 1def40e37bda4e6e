"""The fleet page: one self-contained HTML file (CSS, JavaScript and the document inlined).

``shoal simulate --html FILE`` writes it with the simulation's final state; ``shoal run --web``
serves it at ``/fleet`` with ``live`` set, and the page then polls ``/fleet/data.json``. Nothing
is fetched from the internet when it is viewed: no library, no font, no build step.
"""

from __future__ import annotations

import html
import json
from importlib import resources
from typing import Any

#: how often the live page asks for the document again (milliseconds)
POLL_MS = 2000


def _asset(name: str) -> str:
    return resources.files("shoal.views").joinpath(name).read_text(encoding="utf-8")


def embed_json(doc: Any) -> str:
    """``doc`` as JSON safe inside a ``<script>`` element: no ``</script>`` or ``<!--`` can end it
    early, whatever a node or pod name holds."""
    text = json.dumps(doc, separators=(",", ":"), sort_keys=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render(
    doc: Any, *, live: bool = False, source: str = "data.json", explain: str = "", poll_ms: int = POLL_MS
) -> str:
    """The page for ``doc`` (:func:`shoal.views.fleet.fleet_doc`); ``explain``: where the live page
    asks for a pending pod's explanation when it is clicked ("" offline: only those embedded)."""
    profile = doc.get("profile") if isinstance(doc, dict) else None
    title = "shoal fleet" + (f" · {profile}" if profile else "")
    attrs = (
        f'data-live="{1 if live else 0}" data-interval="{int(poll_ms)}" data-source="{html.escape(source)}"'
        f' data-explain="{html.escape(explain)}"'
    )
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>
{_asset("fleet.css")}
</style>
</head>
<body>
<div id="fleet" {attrs}>
<header>
  <h1>shoal fleet</h1>
  <div id="summary"></div>
  <div id="meta" class="meta"></div>
</header>
<main>
  <div>
    <section class="panel">
      <h2>Nodes by topology</h2>
      <div id="nodes"></div>
      <p class="legend">each square a node, filled by the share of its GPUs in use
        <i style="background:var(--free)"></i>free <i style="background:var(--used)"></i>used
        <i style="background:var(--none)"></i>no GPUs
        <i style="outline:2px dashed var(--warn)"></i>cordoned</p>
    </section>
    <section class="panel"><div id="node-detail"></div></section>
  </div>
  <div>
    <section class="panel"><h2>Gangs</h2><div id="gangs"></div></section>
    <section class="panel"><h2>Pending pods, and why</h2><div id="pending"></div></section>
  </div>
</main>
</div>
<script id="fleet-data" type="application/json">{embed_json(doc)}</script>
<script>
{_asset("fleet.js")}
</script>
</body>
</html>
"""
