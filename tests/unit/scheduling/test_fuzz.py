"""Property-based fuzzing of the core: no input crashes validation or a scheduling cycle."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shoal.core.framework.interfaces import POINTS
from shoal.core.framework.profile import ProfileError, validate_profile
from shoal.core.state.objects import NodeSpec, parse_gpu_memory
from shoal.plugins.registry import DEFAULT_PLUGINS, load_registry
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.invariants import gpu_memory_budgets
from shoal.testing.objects import make_node, make_pod

REGISTRY = load_registry(third_party=False)

NAMES = [*REGISTRY, "Nope", "", "gpumemory"]

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(allow_nan=True), st.text(max_size=20)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
plugin_ref = st.fixed_dictionaries(
    {"name": st.sampled_from(NAMES)},
    optional={"weight": st.one_of(st.integers(-5, 200), st.text(max_size=3), st.none())},
)
profile_specs = st.fixed_dictionaries(
    {},
    optional={
        "schedulerName": st.one_of(
            st.sampled_from(["gpu-scheduler", "a", "Bad_Name", ""]), st.text(max_size=70)
        ),
        "percentageOfNodesToScore": st.one_of(st.integers(-10, 200), st.text(max_size=3)),
        "plugins": st.one_of(
            st.dictionaries(
                st.sampled_from([*POINTS, "bogus"]), st.lists(plugin_ref, max_size=5), max_size=5
            ),
            json_values,
        ),
        "pluginConfig": st.one_of(
            st.lists(
                st.fixed_dictionaries({"name": st.sampled_from(NAMES), "args": json_values}), max_size=4
            ),
            json_values,
        ),
    },
)


@settings(max_examples=400, deadline=None)
@given(profile_specs)
def test_profile_validation_never_crashes(spec: dict[str, Any]) -> None:
    errors: list[tuple[str, str]] = []
    try:
        validated = validate_profile(spec, REGISTRY, DEFAULT_PLUGINS)
    except ProfileError as exc:  # the only exception allowed out, and it names fields
        errors = exc.errors
    if errors:
        assert all(path.startswith(("spec", "default plugins")) and message for path, message in errors)
    else:
        assert len(validated.points["queueSort"]) == 1
        assert validated.points["bind"]


label_values = st.one_of(
    st.sampled_from(["40", "40Gi", "-5", "abc", "1e3", "nan", "inf", "0", "", " 12 ", "1_000", "0x10"]),
    st.text(max_size=12),
    st.floats(allow_nan=True).map(str),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    node_labels=st.lists(label_values, min_size=1, max_size=4),
    pod_annotations=st.lists(label_values, min_size=1, max_size=4),
    cpu=st.sampled_from(["100m", "1", "lots", "-1", "1e9", "0.0001"]),
)
def test_cycles_never_crash_on_odd_labels_and_annotations(
    node_labels: list[str], pod_annotations: list[str], cpu: str
) -> None:
    nodes = [
        make_node(f"n{i}", gpus=4, gpu_memory_free_gb=v, gfd_labels=i % 2 == 0)
        for i, v in enumerate(node_labels)
    ]
    pods = [make_pod(f"p{i}", cpu=cpu, gpus=1, gpu_memory_gb=v) for i, v in enumerate(pod_annotations)]
    sim = Simulation(InMemoryCluster([*nodes, *pods]), initial_backoff=0.01, max_backoff=0.02)
    outcomes = asyncio.run(sim.run())
    assert len(outcomes) == len(pods)  # every pod got a verdict: placed, or a reason
    for outcome in outcomes.values():
        assert outcome.node is not None or outcome.message


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    gfd=st.lists(
        st.tuples(
            st.one_of(label_values, st.sampled_from(["81920", "40960", "16384"])),  # MiB per GPU
            st.one_of(label_values, st.sampled_from(["1", "4", "8"])),  # GPU count
        ),
        min_size=1,
        max_size=4,
    ),
    free_label=st.one_of(st.none(), label_values),
    pod_annotations=st.lists(
        st.one_of(label_values, st.sampled_from(["10", "80", "0.5"])), min_size=1, max_size=4
    ),
)
def test_cycles_never_crash_on_odd_gfd_labels(
    gfd: list[tuple[str, str]], free_label: str | None, pod_annotations: list[str]
) -> None:
    # GFD's per-GPU MiB and GPU count are what GPUMemory falls back to without gpu-memory-free-gb;
    # the first node may carry the label too, so both sources meet in one table
    nodes = [
        make_node(
            f"n{i}",
            gpus=4,
            labels={"nvidia.com/gpu.memory": memory, "nvidia.com/gpu.count": count},
            gpu_memory_free_gb=free_label if i == 0 else None,
        )
        for i, (memory, count) in enumerate(gfd)
    ]
    pods = [make_pod(f"p{i}", gpus=1, gpu_memory_gb=v) for i, v in enumerate(pod_annotations)]
    sim = Simulation(InMemoryCluster([*nodes, *pods]), initial_backoff=0.01, max_backoff=0.02)
    outcomes = asyncio.run(sim.run())
    assert len(outcomes) == len(pods)  # every pod got a verdict: placed, or a reason
    for outcome in outcomes.values():
        assert outcome.node is not None or outcome.message
    # and what was placed fits the budget the invariant checker reads (GPUMemory's own rule)
    budgets = gpu_memory_budgets({n["metadata"]["name"]: NodeSpec.from_dict(n) for n in nodes})
    asked = {f"default/p{i}": parse_gpu_memory(v)[0] for i, v in enumerate(pod_annotations)}
    used: dict[str, float] = {}
    for outcome in outcomes.values():
        gb = asked[outcome.pod]
        if outcome.node is not None and gb:
            assert outcome.node in budgets, f"{outcome.pod} placed on {outcome.node} of unknown GPU memory"
            used[outcome.node] = used.get(outcome.node, 0.0) + gb
    for node, gb in used.items():
        assert gb <= budgets[node][0] + 1e-9, (node, gb, budgets[node])
