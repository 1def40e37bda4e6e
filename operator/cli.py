"""Command line: shoal run | simulate | explain | crds."""


def main() -> int:
    raise SystemExit("not yet")
