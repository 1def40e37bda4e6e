"""The fleet page in a real browser (Debian's Chromium, driven by Playwright) against a real
control plane: ``shoal run --web`` serves it on the secure port behind the API server's
TokenReview and SubjectAccessReview, shows the nodes and gangs the API holds, and follows a pod
being bound; a viewer without a token is refused.

Skipped, saying why, only where Chromium is not installed (``apt-get install chromium``).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from shoal.plugins.registry import DEFAULT_PROFILE_SPEC
from shoal.testing.browser import CHROMIUM, CHROMIUM_ARGS, chromium_installed
from shoal.testing.cluster import OperatorProcess, create, create_many, list_all, wait_for
from shoal.testing.controlplane import ControlPlane
from shoal.testing.objects import make_node, make_pod, make_pod_group, make_profile
from tests.integration.conftest import wait_ready

pytestmark = pytest.mark.slow

RACK = "topology.shoal.dev/rack"


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    if not chromium_installed():
        pytest.skip(
            "Chromium is not installed (Debian: apt-get install chromium); the fleet page is untested"
        )
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        chromium = await pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            await chromium.close()


async def viewer_token(api: client.ApiClient, namespace: str) -> str:
    """A ServiceAccount allowed to ``get`` the page's paths (the chart's fleet-viewer rule), and
    a token of it."""
    core: Any = client.CoreV1Api(api)
    rbac: Any = client.RbacAuthorizationV1Api(api)
    name = f"fleet-viewer-{uuid.uuid4().hex[:6]}"
    await core.create_namespaced_service_account(namespace, {"metadata": {"name": "viewer"}})
    await rbac.create_cluster_role(
        {
            "metadata": {"name": name},
            "rules": [{"nonResourceURLs": ["/fleet", "/fleet/*"], "verbs": ["get"]}],
        }
    )
    await rbac.create_cluster_role_binding(
        {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": "viewer", "namespace": namespace}],
        }
    )
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    made = await core.create_namespaced_service_account_token("viewer", namespace, request)
    return str(made.status.token)


async def test_the_fleet_page_shows_the_cluster_and_follows_it_in_a_browser(
    clean: client.ApiClient, crds: ControlPlane, browser: Any, tmp_path: Path
) -> None:
    api = clean
    core: Any = client.CoreV1Api(api)
    ns = f"fleet-{uuid.uuid4().hex[:6]}"
    await create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    await create_many(api, [make_node(f"n{i}", gpus=8, zone="zone-a", rack=f"r{i // 2}") for i in range(4)])
    await create(api, make_profile("gpu-scheduler", DEFAULT_PROFILE_SPEC))
    group = make_pod_group(
        "pair", namespace=ns, min_member=2, annotations={"shoal.dev/topology-preferred": RACK}
    )
    pair = [make_pod(f"pair-{i}", namespace=ns, gpus=8, pod_group="pair") for i in range(2)]
    await create_many(api, [group, *pair, make_pod("huge", namespace=ns, gpus=16)])
    op = OperatorProcess(
        crds.kubeconfig, tmp_path / "shoal.log", lease_name=f"fleet-{uuid.uuid4().hex[:6]}", extra=["--web"]
    )
    with op:
        wait_ready(op)

        async def pair_bound() -> list[dict[str, Any]] | None:
            pods = await list_all(core.list_namespaced_pod, ns)
            bound = [
                p for p in pods if p["metadata"]["name"].startswith("pair") and p["spec"].get("nodeName")
            ]
            return bound if len(bound) == 2 else None

        await wait_for(pair_bound, 60, what="the gang of two bound")
        url = f"https://127.0.0.1:{op.secure_port}/fleet"

        anonymous = await browser.new_context(ignore_https_errors=True)
        page = await anonymous.new_page()
        refused = await page.goto(url)
        assert refused is not None and refused.status == 401
        await anonymous.close()

        token = await viewer_token(api, ns)
        context = await browser.new_context(
            ignore_https_errors=True, extra_http_headers={"Authorization": f"Bearer {token}"}
        )
        page = await context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        shown = await page.goto(url)
        assert shown is not None and shown.status == 200
        await page.wait_for_selector('.node[data-node="n3"]')
        assert await page.locator(".node").count() == 4
        assert await page.locator('.dom[data-level="topology.shoal.dev/rack"]').count() == 2
        gang = page.locator(f'tr[data-gang="{ns}/pair"]')
        assert "placed" in await gang.inner_text()
        assert await page.locator(f'li.pod[data-pod="{ns}/huge"]').count() == 1
        # the message of its last attempt at once; the per-node explanation asked for on click
        huge = page.locator(f'li.pod[data-pod="{ns}/huge"]')
        assert "Insufficient nvidia.com/gpu" in await huge.inner_text()
        await huge.click()
        await page.locator(".why table", has_text="Insufficient nvidia.com/gpu").wait_for()

        # the page follows the cluster: a pod created now is bound, and the page, polling the
        # scheduler's own cache, counts it (waits for that state, not for a time)
        await create(api, make_pod("late", namespace=ns, gpus=1))
        await page.wait_for_function(
            "() => document.querySelector('#summary [data-key=\"pods bound\"] b').textContent === '3'",
            timeout=60_000,
        )
        assert errors == []
        await context.close()
