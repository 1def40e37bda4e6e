"""How the demo reads events: only those about pods (the API server writes some of its own into
``default``), each pod's latest by ``eventTime``, and when the workload has settled."""

from __future__ import annotations

from shoal.demo import outcomes, pod_of, settled
from shoal.testing.objects import POD_GROUP_LABEL


def test_only_events_about_pods_name_a_pod() -> None:
    ours = {
        "reason": "Scheduled",
        "regarding": {"kind": "Pod", "name": "notebook-00", "namespace": "default"},
    }
    # written by kube-apiserver's ServiceCIDR controller at start-up, sometimes: no object name
    apiserver = {
        "reason": "KubernetesDefaultServiceCIDRInconsistent",
        "regarding": {"kind": "ServiceCIDR", "apiVersion": "networking.k8s.io/v1"},
    }
    assert pod_of(ours) == "notebook-00"
    assert pod_of(apiserver) == ""
    assert pod_of({"reason": "x"}) == ""


def event(pod: str, reason: str, at: str, note: str = "") -> dict[str, object]:
    return {
        "reason": reason,
        "note": note or reason,
        "eventTime": f"2026-11-30T10:00:{at}.000000Z",
        "regarding": {"kind": "Pod", "name": pod},
    }


def pod(name: str, node: str | None = None, gang: str | None = None) -> dict[str, object]:
    labels = {POD_GROUP_LABEL: gang} if gang else {}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"schedulerName": "gpu-scheduler", "nodeName": node},
    }


def test_the_latest_outcome_is_by_event_time_not_by_listing_order() -> None:
    # written out of order (the reporter writes on several workers): the Scheduled is the latest
    events = [event("a", "Scheduled", "05"), event("a", "FailedScheduling", "01")]
    assert outcomes(events) == {"a": "Scheduled: Scheduled"}


def test_settled_waits_for_the_scheduled_event_of_a_bound_pod() -> None:
    bound = [pod("a", node="n1")]
    # bound, but the Scheduled event not written yet (its latest is an earlier failure)
    assert not settled(bound, [event("a", "FailedScheduling", "01")])
    assert settled(bound, [event("a", "FailedScheduling", "01"), event("a", "Scheduled", "02")])


def test_settled_waits_for_a_pending_gang_member_but_not_for_a_lone_failure() -> None:
    failed = event("x", "FailedScheduling", "01")
    assert settled([pod("x")], [failed])
    assert not settled([pod("x")], [])
    # a gang member reports FailedScheduling while it waits for the rest of its gang
    assert not settled([pod("x", gang="g")], [failed])
    # another scheduler's pods are not waited for
    other = {"metadata": {"name": "w"}, "spec": {"schedulerName": "default-scheduler"}}
    assert settled([other], [])
