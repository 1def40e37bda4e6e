"""ImageLocality: shoal's own tests (upstream's table: test_imagelocality_upstream.py)."""

from __future__ import annotations

from typing import Any

import numpy as np

from shoal.core.state.images import normalized_image
from shoal.core.state.objects import NodeSpec, PodInfo
from shoal.plugins.imagelocality import MB, ImageLocality, priority
from shoal.sim.cluster import InMemoryCluster, Simulation
from shoal.testing.objects import make_node, make_pod
from tests.unit.helpers import all_rows, cache_with, scores_by_name, state


def node_with(name: str, images: dict[str, int]) -> dict[str, Any]:
    obj = make_node(name)
    obj["status"]["images"] = [{"names": [n], "sizeBytes": size} for n, size in images.items()]
    return obj


def test_names_without_a_tag_get_latest() -> None:
    assert normalized_image("nginx") == "nginx:latest"
    assert normalized_image("localhost:5000/nginx") == "localhost:5000/nginx:latest"
    assert normalized_image("nginx:1.29") == "nginx:1.29"
    assert normalized_image("repo/app@sha256:abc") == "repo/app@sha256:abc"


def test_priority_clamps_to_thresholds() -> None:
    sums = np.array([0, 23 * MB, 1000 * MB, 5000 * MB], dtype=np.int64)
    assert priority(sums, 1).tolist() == [0, 0, 100, 100]


def test_the_node_with_the_larger_spread_scaled_image_wins_and_updates_follow() -> None:
    cache = cache_with(
        [
            node_with("big", {"gcr.io/250:latest": 250 * MB, "gcr.io/10:v1": 10 * MB}),
            node_with("small", {"gcr.io/40:latest": 40 * MB}),
            make_node("none"),
        ]
    )
    obj = make_pod("p")
    obj["spec"]["containers"] = [{"name": "a", "image": "gcr.io/250"}, {"name": "b", "image": "gcr.io/40"}]
    pod = PodInfo.from_dict(obj)
    plugin = ImageLocality()
    assert plugin.pre_score(state(), pod, all_rows(cache.table), cache.table).ok
    scores = scores_by_name(cache.table, plugin.score_nodes(state(), pod, cache.table, all_rows(cache.table)))
    # big: 250M x 1/3 = 83M -> 100 x (83M - 23M) / (2000M - 23M) = 3; small: 40M / 3 < 23M -> 0
    assert scores == {"big": 3, "small": 0, "none": 0}
    # the image leaves "big": the index follows the node's update
    cache.set_node(NodeSpec.from_dict(node_with("big", {})))
    assert "gcr.io/250:latest" not in cache.table.image_rows


def test_a_pod_without_images_is_skipped() -> None:
    cache = cache_with([make_node("n")])
    pod = PodInfo.from_dict(make_pod("p"))
    pod.images = ()
    assert ImageLocality().pre_score(state(), pod, all_rows(cache.table), cache.table).is_skip


def test_a_pod_whose_images_no_node_holds_is_skipped_and_would_have_scored_zero() -> None:
    cache = cache_with([node_with("a", {"gcr.io/other:latest": 500 * MB}), make_node("b")])
    obj = make_pod("p")
    obj["spec"]["containers"] = [{"name": "a", "image": "gcr.io/app:v2"}]
    pod = PodInfo.from_dict(obj)
    plugin = ImageLocality()
    rows = all_rows(cache.table)
    assert plugin.pre_score(state(), pod, rows, cache.table).is_skip
    # the skip is exact: what Score would have given is 0 everywhere
    assert plugin.score_nodes(state(), pod, cache.table, rows).tolist() == [0, 0]
    # once a node pulls the image, the pod is scored again
    cache.set_node(NodeSpec.from_dict(node_with("b", {"gcr.io/app:v2": 500 * MB})))
    assert plugin.pre_score(state(), pod, rows, cache.table).ok


async def test_the_default_profile_runs_the_skip() -> None:
    """ImageLocality is in the default preScore list: its skip only happens where PreScore runs."""
    obj = make_pod("p")
    obj["spec"]["containers"] = [{"name": "a", "image": "gcr.io/app:v2"}]
    held = make_pod("q")
    held["spec"]["containers"] = [{"name": "a", "image": "gcr.io/other:latest"}]
    sim = Simulation(
        InMemoryCluster([node_with("a", {"gcr.io/other:latest": 500 * MB}), make_node("b"), obj, held])
    )
    await sim.run()
    by_name = {p["metadata"]["name"]: uid for uid, p in sim.cluster.pods.items()}
    assert "ImageLocality" not in sim.last_scores[by_name["p"]][0][2]  # no node holds gcr.io/app:v2
    assert "ImageLocality" in sim.last_scores[by_name["q"]][0][2]  # node a holds it: scored
