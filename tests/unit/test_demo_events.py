"""The demo reads events in the default namespace, where the API server writes some of its own."""

from __future__ import annotations

from shoal.demo import pod_of


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
