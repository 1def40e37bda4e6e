"""Debian's Chromium for the fleet page's browser test and benchmark, started as this machine needs.

Headless as root needs ``--no-sandbox``; the network is closed, so Chromium's background
connections (component updates, sync, QUIC probes) are turned off — they would be refused, many at
a time. Playwright drives it through ``executable_path``; it never downloads a browser.
"""

from __future__ import annotations

from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_installed() -> bool:
    return CHROMIUM.exists()
