"""The registry: built-ins, $SHOAL_PLUGINS modules, duplicates refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.core.framework.profile import PluginEntry
from shoal.plugins.registry import BUILTIN, DEFAULT_PLUGINS_SPEC, RegistryError, build_registry, load_registry
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import make_node, make_pod


def test_builtins_are_registered_once() -> None:
    registry = load_registry(third_party=False)
    assert set(registry) == {e.name for e in BUILTIN}
    assert len(BUILTIN) == 24


def test_duplicate_name_is_an_error() -> None:
    twin = PluginEntry("GPUMemory", lambda a, h: None, None, None, "some package")  # type: ignore[arg-type,return-value]
    with pytest.raises(RegistryError, match=r"registered twice .*builtin and some package"):
        build_registry([*BUILTIN, twin])


async def test_plugin_module_from_env_is_used_by_a_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOAL_PLUGINS", "tests.unit.fixtures.extra_plugin")
    registry = load_registry()
    assert registry["OnlyEvenNodes"].source.startswith("$SHOAL_PLUGINS")
    profile = {"schedulerName": "gpu-scheduler", "plugins": {"filter": [{"name": "OnlyEvenNodes"}]}}
    nodes = [make_node(f"n{i}") for i in range(4)]
    sim = Simulation(
        InMemoryCluster([*nodes, *(make_pod(f"p{i}") for i in range(6))]), [profile], registry=registry
    )
    await sim.run()
    assert {v for v in sim.placements().values()} <= {"n0", "n2"}


@pytest.mark.parametrize(
    ("module", "words"),
    [
        pytest.param("no.such.module", "ModuleNotFoundError", id="missing"),
        pytest.param("tests.unit.helpers", "not a plugin", id="not-a-plugin"),
    ],
)
def test_bad_plugin_module_is_reported(monkeypatch: pytest.MonkeyPatch, module: str, words: str) -> None:
    monkeypatch.setenv("SHOAL_PLUGINS", module)
    with pytest.raises(RegistryError, match=words):
        load_registry()


def test_plugin_from_an_installed_distributions_entry_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # what `pip install shoal-even-nodes` leaves behind: a dist-info with a shoal.plugins entry point
    dist = tmp_path / "shoal_even_nodes-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: shoal-even-nodes\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[shoal.plugins]\nOnlyEvenNodes = tests.unit.fixtures.extra_plugin\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("SHOAL_PLUGINS", raising=False)
    registry = load_registry()
    assert registry["OnlyEvenNodes"].source.startswith("entry point OnlyEvenNodes")
    assert "OnlyEvenNodes" not in load_registry(third_party=False)


@pytest.mark.parametrize(
    ("point", "companion", "method"),
    [("filter", "preFilter", "pre_filter"), ("score", "preScore", "pre_score")],
)
def test_the_default_lists_run_every_default_plugins_pre_point(
    point: str, companion: str, method: str
) -> None:
    """A built-in at filter (score) with a PreFilter (PreScore) is in the default list of that point
    too: a pre-point left out never runs, and with it the skip or state the plugin has there."""
    registry = load_registry(third_party=False)
    listed = {ref["name"] for ref in DEFAULT_PLUGINS_SPEC[companion]}
    missing = [
        ref["name"]
        for ref in DEFAULT_PLUGINS_SPEC[point]
        if hasattr(registry[ref["name"]].plugin_class, method) and ref["name"] not in listed
    ]
    assert missing == []
