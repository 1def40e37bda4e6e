"""CLI manners (issue 16 part 7): ``shoal --version``, and ``shoal explain`` failing with one line,
no traceback, for what is not shoal's fault."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from shoal.cli import kubeconfig_path, main


def test_version() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "shoal.cli", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout == f"shoal {version('shoal')}\n"


def test_kubeconfig_is_found_as_kubectl_finds_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    assert kubeconfig_path(None) == tmp_path / ".kube" / "config"
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'a'}:{tmp_path / 'b'}")
    assert kubeconfig_path(None) == tmp_path / "a"
    assert kubeconfig_path("/x") == Path("/x")


def _explain_fails(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["explain", "default/p", *args]) == 1
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("shoal: error: ")
    return err


def test_explain_without_a_kubeconfig(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    err = _explain_fails(capsys)
    assert (
        err == f"shoal: error: no kubeconfig at {tmp_path}/.kube/config (use --kubeconfig or $KUBECONFIG)\n"
    )


@pytest.mark.parametrize(
    ("text", "words"),
    [
        pytest.param("clusters: [\n", "is not YAML", id="not-yaml"),
        pytest.param("apiVersion: v1\nkind: Config\n", "current-context", id="no-context"),
        pytest.param(
            "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
            "users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
            "current-context: x\n",
            "cannot reach the API server",
            id="unreachable",
        ),
    ],
)
def test_explain_with_a_bad_kubeconfig_or_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, words: str
) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(text)
    assert words in _explain_fails(capsys, "--kubeconfig", str(path))
