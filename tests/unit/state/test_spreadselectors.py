"""core/state/spreadselectors.py: the selector of a pod's default topology spread constraints, as
kube-scheduler's ``helper.DefaultSelector`` builds it (release 1.37)."""

from __future__ import annotations

from typing import Any

from shoal.core.state.objects import PodInfo
from shoal.core.state.selectors import LabelRequirement
from shoal.core.state.spreadselectors import SelectorOwner, SpreadSelectors, controller_ref


def owner_ref(kind: str, name: str, api: str = "apps/v1", controller: bool | None = True) -> dict[str, Any]:
    ref: dict[str, Any] = {"apiVersion": api, "kind": kind, "name": name, "uid": f"uid-{name}"}
    if controller is not None:
        ref["controller"] = controller
    return ref


def obj(kind: str, name: str, selector: Any, namespace: str = "shop") -> dict[str, Any]:
    api = "v1" if kind in ("Service", "ReplicationController") else "apps/v1"
    spec = {} if selector is None else {"selector": selector}
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def store(*objects: dict[str, Any]) -> SpreadSelectors:
    out = SpreadSelectors()
    for o in objects:
        out.upsert(SelectorOwner.decode(o["kind"], o))
    return out


def test_the_controller_is_the_owner_reference_marked_controller() -> None:
    assert controller_ref({"ownerReferences": [owner_ref("ReplicaSet", "web-6d4")]}) == (
        "ReplicaSet",
        "web-6d4",
    )
    assert controller_ref({"ownerReferences": [owner_ref("StatefulSet", "pg")]}) == ("StatefulSet", "pg")
    assert controller_ref({"ownerReferences": [owner_ref("ReplicationController", "old", api="v1")]}) == (
        "ReplicationController",
        "old",
    )
    # owners whose selector default spreading does not read, or that are not the controller
    assert controller_ref({"ownerReferences": [owner_ref("Job", "train", api="batch/v1")]}) is None
    assert controller_ref({"ownerReferences": [owner_ref("ReplicaSet", "rs", controller=False)]}) is None
    assert controller_ref({"ownerReferences": [owner_ref("ReplicaSet", "rs", controller=None)]}) is None
    assert (
        controller_ref({"ownerReferences": [owner_ref("ReplicaSet", "rs", api="extensions/v1beta1")]}) is None
    )
    assert controller_ref({}) is None
    # the first controller decides, as apimachinery's GetControllerOf
    refs = [owner_ref("Job", "j", api="batch/v1"), owner_ref("ReplicaSet", "rs")]
    assert controller_ref({"ownerReferences": refs}) is None


def test_services_select_by_map_and_an_empty_map_selects_nothing() -> None:
    web = SelectorOwner.decode("Service", obj("Service", "web", {"app": "web"}))
    assert web.selects({"app": "web", "pod-template-hash": "6d4"}) and not web.selects({"app": "db"})
    headless = SelectorOwner.decode("Service", obj("Service", "external", None))
    assert not headless.selects({"app": "web"}) and not headless.selects({})


def test_replica_set_selector_requirements_and_an_invalid_one_adds_none() -> None:
    rs = SelectorOwner.decode(
        "ReplicaSet",
        obj(
            "ReplicaSet",
            "web-6d4",
            {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]},
        ),
    )
    assert rs.requirements == (
        LabelRequirement("app", "In", frozenset({"web"})),
        LabelRequirement("tier", "Exists"),
    )
    bad = SelectorOwner.decode("ReplicaSet", obj("ReplicaSet", "bad", {"matchExpressions": [{"key": "a"}]}))
    assert bad.requirements == ()


def pod_info(labels: dict[str, str], owner: dict[str, Any] | None = None, namespace: str = "shop") -> PodInfo:
    meta: dict[str, Any] = {"name": "p", "namespace": namespace, "labels": labels}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return PodInfo.from_dict({"metadata": meta, "spec": {}})


def selector_of(selectors: SpreadSelectors, pod: PodInfo) -> Any:
    return selectors.default_selector(pod.namespace, pod.labels, pod.controller)


def test_services_and_the_controller_merge_into_one_selector() -> None:
    selectors = store(
        obj("Service", "web", {"app": "web"}),
        obj("Service", "web-canary", {"app": "web", "track": "canary"}),  # does not select the pod
        obj("Service", "all", {"team": "shop"}),
        obj("ReplicaSet", "web-6d4", {"matchLabels": {"pod-template-hash": "6d4"}}),
    )
    pod = pod_info(
        {"app": "web", "team": "shop", "pod-template-hash": "6d4"}, owner_ref("ReplicaSet", "web-6d4")
    )
    selector = selector_of(selectors, pod)
    assert selector.requirements == (
        LabelRequirement("app", "In", frozenset({"web"})),
        LabelRequirement("team", "In", frozenset({"shop"})),
        LabelRequirement("pod-template-hash", "In", frozenset({"6d4"})),
    )
    assert selector.matches(pod.labels) and not selector.matches({"app": "web", "team": "shop"})


def test_a_replication_controller_adds_its_map() -> None:
    selectors = store(obj("ReplicationController", "old", {"app": "legacy", "v": "1"}))
    pod = pod_info({"app": "legacy", "v": "1"}, owner_ref("ReplicationController", "old", api="v1"))
    assert selector_of(selectors, pod).requirements == (
        LabelRequirement("app", "In", frozenset({"legacy"})),
        LabelRequirement("v", "In", frozenset({"1"})),
    )


def test_nothing_selects_the_pod_no_selector() -> None:
    selectors = store(
        obj("Service", "web", {"app": "web"}),
        obj("Service", "other-ns", {"app": "api"}, namespace="elsewhere"),
        obj("ReplicaSet", "web-6d4", {"matchLabels": {"app": "web"}}),
    )
    assert selector_of(selectors, pod_info({"app": "api"})) is None  # the Service is in another namespace
    # owned by a ReplicaSet the cache does not hold (not yet seen, or gone): services only
    pod = pod_info({"app": "api"}, owner_ref("ReplicaSet", "api-7f9"))
    assert selector_of(selectors, pod) is None
    empty_rs = store(obj("ReplicaSet", "any", {}))
    assert selector_of(empty_rs, pod_info({"app": "x"}, owner_ref("ReplicaSet", "any"))) is None


def test_remove_forgets_one_object() -> None:
    selectors = store(
        obj("Service", "web", {"app": "web"}), obj("ReplicaSet", "web", {"matchLabels": {"a": "b"}})
    )
    assert len(selectors) == 2
    selectors.remove("Service", "shop/web")
    selectors.remove("Service", "shop/unknown")
    assert len(selectors) == 1 and selectors.get("ReplicaSet", "shop", "web") is not None
    assert selector_of(selectors, pod_info({"app": "web"})) is None
