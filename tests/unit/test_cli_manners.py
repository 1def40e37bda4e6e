"""CLI manners (issue 16 part 7): ``shoal --version``; ``shoal explain``'s flags and documents, and
one line, no traceback, for what is not shoal's fault (explain and simulate)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import yaml

from shoal.cli import build_parser, main
from shoal.explain_cli import ExplainError, emit, kubeconfig_path, pod_ref
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import make_node, make_pod
from shoal.views.explanation import explanation_doc

UNREACHABLE = (
    "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
    "users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
    "current-context: x\n"
)


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
        pytest.param(UNREACHABLE, "cannot reach the API server", id="unreachable"),
    ],
)
def test_explain_with_a_bad_kubeconfig_or_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, words: str
) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(text)
    assert words in _explain_fails(capsys, "--kubeconfig", str(path))


def test_explain_without_a_kubeconfig_in_a_fresh_process(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path / "empty"), "KUBECONFIG": str(tmp_path / "missing")}
    out = subprocess.run(
        [sys.executable, "-m", "shoal.cli", "explain", "x/y"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert out.returncode == 1 and out.stdout == ""
    assert (
        out.stderr
        == f"shoal: error: no kubeconfig at {tmp_path / 'missing'} (use --kubeconfig or $KUBECONFIG)\n"
    )


def test_pod_reference_forms() -> None:
    assert pod_ref("ns/p", None) == ("ns", "p")
    assert pod_ref("ns/p", "ns") == ("ns", "p")
    assert pod_ref("p", "team") == ("team", "p")
    assert pod_ref("p", None) == ("default", "p")
    for bad, namespace in (("a/b/c", None), ("/p", None), ("ns/", None), ("a/p", "b")):
        with pytest.raises(ExplainError):
            pod_ref(bad, namespace)


def test_explain_flags_parse() -> None:
    args = build_parser().parse_args(["explain", "p", "-n", "team", "-o", "json", "--context", "kind-a"])
    assert (args.pod, args.namespace, args.output, args.context) == ("p", "team", "json", "kind-a")
    assert build_parser().parse_args(["explain", "team/p"]).output == "text"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["explain", "p", "-o", "wide"])


def test_a_context_the_kubeconfig_lacks_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(UNREACHABLE)
    err = _explain_fails(capsys, "--kubeconfig", str(path), "--context", "nope")
    assert err == f"shoal: error: kubeconfig {path} has no context 'nope' (it has x)\n"


def test_a_namespace_that_disagrees_with_the_reference_is_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _explain_fails(capsys, "-n", "other")
    assert err == "shoal: error: 'default/p' names namespace 'default', -n says 'other'\n"


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    out = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out += _subparsers(sub)
    return out


def test_help_texts_have_no_markup() -> None:
    parsers = _subparsers(build_parser())
    assert {p.prog for p in parsers} >= {
        "shoal explain",
        "shoal simulate",
        "shoal run",
        "shoal profiles from-config",
    }
    for parser in parsers:
        text = parser.format_help()
        for mark in ("`", "**", "``", "]("):
            assert mark not in text, (parser.prog, mark)


def _explained(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    s = Simulation(InMemoryCluster(objects), [])
    pod = next(p for p in s.scheduler.cache.pods.values() if p.name == name)
    return explanation_doc(s.scheduler, pod, s.scheduler.explain(pod))


def test_explain_document_holds_what_the_text_prints(capsys: pytest.CaptureFixture[str]) -> None:
    taint = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}
    doc = _explained(
        [make_node("free", gpus=8), make_node("tainted", gpus=8, taints=[taint]), make_pod("p", gpus=1)], "p"
    )
    assert list(doc) == ["pod", "schedulerName", "node", "message", "gang", "preemption", "claims", "nodes"]
    assert (doc["pod"], doc["schedulerName"], doc["node"]) == ("default/p", "gpu-scheduler", "free")
    fits, rejected = doc["nodes"]
    assert (fits["name"], fits["result"], fits["score"] > 0) == ("free", "fits", True)
    assert fits["scores"]["TaintToleration"] == 100 and fits["costs"] == {}  # per plugin, before weights
    notes = rejected.pop("notes")  # per-node details: where GPUMemory read the node's GPU memory
    assert notes["GPUMemory"].startswith("GPU memory from ") and fits["notes"].keys() == {"GPUMemory"}
    rejected["notes"] = notes
    assert {k: v for k, v in rejected.items() if k != "notes"} == {
        "name": "tainted",
        "result": "rejected",
        "plugin": "TaintToleration",
        "reasons": ["node(s) had untolerated taint(s)"],
    }
    assert json.loads(json.dumps(doc)) == doc  # plain data: -o json and -o yaml print it as is
    emit(doc, "yaml")
    assert yaml.safe_load(capsys.readouterr().out) == doc
    emit(doc, "text")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"pod default/p (schedulerName gpu-scheduler): {doc['message']}"
    assert out[1].split() == ["NODE", "RESULT", "DETAILS"]
    assert out[2].startswith("free") and f"fits, score {fits['score']}" in out[2]
    assert out[3].split()[:4] == ["tainted", "rejected", "by", "TaintToleration"]


def test_explain_document_of_a_pod_no_node_fits_says_what_preemption_would_do() -> None:
    doc = _explained([make_node("n1", gpus=1), make_pod("big", gpus=4)], "big")
    assert doc["node"] is None and doc["message"].startswith("0/1 nodes are available")
    assert doc["preemption"] is not None and doc["preemption"]["node"] is None
    assert doc["nodes"][0]["plugin"] == "NodeResourcesFit"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        pytest.param("a: [\n", "not YAML (", id="not-yaml"),
        pytest.param("- 1\n", "not a Kubernetes object", id="not-objects"),
        pytest.param("kind: SchedulingProfile\nspec: 5\n", "must be a mapping", id="bad-profile"),
    ],
)
def test_simulate_input_errors_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, words: str
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump(make_node("n1")))
    assert main(["simulate", "--cluster", str(cluster), "--profile", str(bad)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and err.startswith("shoal: error: ")
    assert words in err and str(bad) in err
    assert main(["simulate", "--cluster", str(tmp_path / "nope.yaml")]) == 2
    assert (
        capsys.readouterr().err
        == f"shoal: error: cannot read {tmp_path / 'nope.yaml'}: No such file or directory\n"
    )


def test_explain_text_says_why_a_never_preempting_pod_preempts_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    polite = make_pod("polite", cpu="2", memory=None, priority=100)
    polite["spec"]["preemptionPolicy"] = "Never"
    low = make_pod("low", cpu="2", memory=None, priority=0, node_name="n1")
    doc = _explained([make_node("n1", cpu="2"), low, polite], "polite")
    assert doc["preemption"] == {
        "node": None,
        "victims": [],
        "message": "preemption: not eligible due to preemptionPolicy=Never.",
    }
    emit(doc, "text")
    assert "\npreemption: not eligible due to preemptionPolicy=Never.\n" in capsys.readouterr().out
