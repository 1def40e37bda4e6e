"""The secure metrics port (HTTPS, delegated authn/authz with a cache), the day-2 metrics and the
JSON log format. The API server's side is faked here; tests/integration/test_metrics_auth.py
runs the same path against the real one."""

from __future__ import annotations

import io
import json
import logging
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography import x509

from shoal.kube.delegated_auth import ACCESS_REVIEWS, TOKEN_REVIEWS, Decision, DelegatedAuth
from shoal.kube.reporter import KubeReporter
from shoal.operator_app import logformat
from shoal.operator_app.metrics import HealthServer, PromMetrics, attempts_label
from shoal.operator_app.secure_serving import auth_middleware, self_signed, server_context
from shoal.testing.objects import make_node, make_pod
from tests.unit.helpers import pod
from tests.unit.scheduling.test_gang import gang, sim
from tests.unit.scheduling.test_scheduler import approval_profile, approval_registry


class FakeApiServer:
    """Answers TokenReviews for ``users`` (token -> username) and SubjectAccessReviews for the
    (user, path, verb) in ``grants``; records what it was asked."""

    def __init__(self, users: dict[str, str], grants: set[tuple[str, str, str]]) -> None:
        self.users, self.grants = users, grants
        self.asked: list[tuple[str, dict[str, Any]]] = []
        self.down = False

    async def request(self, method: str, path: str, body: Any = None, **_: Any) -> tuple[int, Any]:
        assert method == "POST"
        self.asked.append((path, body))
        if self.down:
            raise aiohttp.ClientConnectionError("connection refused")
        spec = body["spec"]
        if path == TOKEN_REVIEWS:
            name = self.users.get(spec["token"])
            user = {"username": name, "uid": "u-1", "groups": ["system:authenticated"]}
            return 201, {
                "status": {"authenticated": True, "user": user} if name else {"authenticated": False}
            }
        assert path == ACCESS_REVIEWS
        attrs = spec["nonResourceAttributes"]
        allowed = (spec["user"], attrs["path"], attrs["verb"]) in self.grants
        return 201, {"status": {"allowed": allowed, "reason": "" if allowed else "no RBAC policy matched"}}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def auth_for(fake: FakeApiServer, clock: Clock | None = None) -> DelegatedAuth:
    return DelegatedAuth(fake, clock=clock or Clock())  # type: ignore[arg-type]


PROM = "system:serviceaccount:monitoring:prometheus"


async def test_delegated_auth_answers_401_403_200_and_sends_the_path_and_verb() -> None:
    fake = FakeApiServer(
        {"good": PROM, "nobody": "system:serviceaccount:x:nobody"}, {(PROM, "/metrics", "get")}
    )
    auth = auth_for(fake)
    assert await auth.check("bogus", "/metrics", "get") == Decision(401, "Unauthorized")
    denied = await auth.check("nobody", "/metrics", "get")
    assert denied.status == 403
    assert denied.reason == (
        'forbidden: User "system:serviceaccount:x:nobody" cannot get path "/metrics": no RBAC policy matched'
    )
    assert (await auth.check("good", "/metrics", "get")).allowed
    assert not (await auth.check("good", "/metrics", "post")).allowed  # the verb is checked too
    sar = next(body for path, body in fake.asked if path == ACCESS_REVIEWS)
    assert sar["spec"] == {
        "user": "system:serviceaccount:x:nobody",
        "groups": ["system:authenticated"],
        "uid": "u-1",
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
    }


async def test_answers_are_cached_for_ten_seconds_allowed_and_denied_alike() -> None:
    fake = FakeApiServer({"good": PROM}, {(PROM, "/metrics", "get")})
    clock = Clock()
    auth = auth_for(fake, clock)
    for token in ("good", "bogus"):
        await auth.check(token, "/metrics", "get")
    asked = len(fake.asked)
    assert asked == 3  # one TokenReview each, one SubjectAccessReview for the known user
    clock.now = 9.9
    for token in ("good", "bogus"):
        await auth.check(token, "/metrics", "get")
    assert len(fake.asked) == asked
    clock.now = 10.0  # expired: a revoked token or binding is noticed within 10 s
    fake.grants.clear()
    assert (await auth.check("good", "/metrics", "get")).status == 403
    assert len(fake.asked) == asked + 2


async def test_an_api_server_that_cannot_answer_is_not_cached() -> None:
    fake = FakeApiServer({"good": PROM}, {(PROM, "/metrics", "get")})
    auth = auth_for(fake)
    fake.down = True
    assert (await auth.check("good", "/metrics", "get")).status == 401
    fake.down = False
    assert (await auth.check("good", "/metrics", "get")).allowed
    await auth.authenticate("good")
    fake.down = True
    auth._access = type(auth._access)(10, 10, Clock())  # forget the cached access only
    assert (await auth.check("good", "/metrics", "get")).status == 500


async def _get(url: str, token: str | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as session, session.get(url, headers=headers, ssl=False) as resp:
        return resp.status, await resp.text()


async def test_the_secure_port_is_https_guards_metrics_and_always_allows_the_probes() -> None:
    fake = FakeApiServer({"good": PROM, "nobody": "someone"}, {(PROM, "/metrics", "get")})
    metrics = PromMetrics()
    server = HealthServer(
        metrics,
        lambda: True,
        host="127.0.0.1",
        port=0,
        tls=server_context(None, None, host="127.0.0.1"),
        middlewares=[auth_middleware(auth_for(fake))],
    )
    await server.start()
    base = f"https://127.0.0.1:{server.port}"
    try:
        assert (await _get(f"{base}/metrics"))[0] == 401
        assert (await _get(f"{base}/metrics", "bogus"))[0] == 401
        status, text = await _get(f"{base}/metrics", "nobody")
        assert status == 403 and 'cannot get path "/metrics"' in text
        status, text = await _get(f"{base}/metrics", "good")
        assert status == 200 and "scheduler_pending_pods" in text
        for path in ("/healthz", "/readyz", "/livez"):
            assert await _get(base + path) == (200, "ok")
        with pytest.raises(aiohttp.ClientError):  # no plain HTTP on the secure port
            await _get(f"http://127.0.0.1:{server.port}/healthz")
    finally:
        await server.stop()


def test_self_signed_certificate_names_localhost_and_the_bind_address(tmp_path: Path) -> None:
    cert_pem, key_pem = self_signed("10.1.2.3")
    cert = x509.load_pem_x509_certificate(cert_pem)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in san.get_values_for_type(x509.DNSName)
    assert {str(ip) for ip in san.get_values_for_type(x509.IPAddress)} == {"127.0.0.1", "10.1.2.3"}
    # a given pair is loaded as is; half a pair is refused
    (tmp_path / "tls.crt").write_bytes(cert_pem)
    (tmp_path / "tls.key").write_bytes(key_pem)
    ctx = server_context(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    with pytest.raises(ValueError, match="go together"):
        server_context(str(tmp_path / "tls.crt"), None)


def test_day_two_series_are_exposed() -> None:
    text = PromMetrics().render().decode()
    for name in (
        "process_resident_memory_bytes",
        "process_cpu_seconds_total",
        "python_gc_collections_total",
        "python_info",
        "shoal_events_dropped_total 0.0",
    ):
        assert name in text, name
    assert [attempts_label(n) for n in (1, 14, 15, 40)] == ["1", "14", "15+", "15+"]


def _sample(metrics: PromMetrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return float(value) if value is not None else 0.0


def test_hot_path_series_count_every_call_under_their_own_labels() -> None:
    """The labelled children are looked up once and reused: every call still lands in its series,
    and two registries (two operators in one process) never share one."""
    metrics, other = PromMetrics(), PromMetrics()
    for _ in range(3):
        metrics.attempt("scheduled", "gpu-scheduler", 0.01)
        metrics.extension_point("Filter", "Success", "gpu-scheduler", 0.001)
        metrics.plugin("NodeResourcesFit", "Filter", "Success", 0.0001)
    metrics.attempt("unschedulable", "gpu-scheduler", 0.02)
    other.attempt("scheduled", "gpu-scheduler", 0.01)
    assert (
        _sample(metrics, "scheduler_schedule_attempts_total", result="scheduled", profile="gpu-scheduler")
        == 3
    )
    assert (
        _sample(metrics, "scheduler_schedule_attempts_total", result="unschedulable", profile="gpu-scheduler")
        == 1
    )
    assert (
        _sample(other, "scheduler_schedule_attempts_total", result="scheduled", profile="gpu-scheduler") == 1
    )
    point = {"extension_point": "Filter", "status": "Success", "profile": "gpu-scheduler"}
    assert _sample(metrics, "scheduler_framework_extension_point_duration_seconds_count", **point) == 3
    plugin = {"plugin": "NodeResourcesFit", "extension_point": "Filter", "status": "Success"}
    assert _sample(metrics, "scheduler_plugin_execution_duration_seconds_count", **plugin) == 3
    assert (
        _sample(
            metrics,
            "scheduler_scheduling_attempt_duration_seconds_count",
            result="unschedulable",
            profile="gpu-scheduler",
        )
        == 1
    )


async def test_the_sli_is_observed_for_each_bound_pod_with_its_attempts() -> None:
    s = sim(
        [make_node("n1", cpu="2"), make_pod("a", cpu="1"), make_pod("b", cpu="1"), make_pod("c", cpu="1")]
    )
    metrics = PromMetrics()
    s.scheduler.metrics = metrics
    await s.run()
    assert _sample(metrics, "scheduler_pod_scheduling_sli_duration_seconds_count", attempts="1") == 2
    assert _sample(metrics, "scheduler_pod_scheduling_attempts_count") == 2  # c never fits: not observed
    assert 0 < _sample(metrics, "scheduler_pod_scheduling_sli_duration_seconds_sum", attempts="1") < 5


async def test_a_gang_timeout_is_counted_once_not_once_per_member() -> None:
    s = sim(
        [*[make_node(f"n{i}", gpus=8) for i in range(4)], *gang("g", 4)],
        profiles=[approval_profile()],
        registry=approval_registry(),
        max_backoff=0.01,
    )
    metrics = PromMetrics()
    s.scheduler.metrics = metrics
    await s.run()
    rounds = _sample(metrics, "scheduler_permit_wait_duration_seconds_count", result="rejected") / 4
    assert rounds >= 1
    assert _sample(metrics, "shoal_gang_timeouts_total", profile="gpu-scheduler") == rounds


async def test_dropped_reports_are_counted() -> None:
    class Api:
        class configuration:  # what RawClient reads
            host = "https://127.0.0.1:1"

    metrics = PromMetrics()
    reporter = KubeReporter(Api(), instance="t", max_pending=1, on_dropped=metrics.event_dropped)  # type: ignore[arg-type]
    for name in ("a", "b", "c"):  # not started: one write waits in the queue, the rest are dropped
        reporter.unschedulable(pod(name), "no", "gpu-scheduler")  # an event and a condition each
    assert reporter.dropped == 5
    assert _sample(metrics, "shoal_events_dropped_total") == 5


def test_json_logs_are_one_klog_shaped_object_per_line() -> None:
    out = io.StringIO()
    logformat.configure("json", stream=out)
    try:
        log = logging.getLogger("shoal.test")
        log.info("bound %s", "default/p", extra={"node": "n1", "settings": object()})
        log.debug("not shown without --verbose")
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            log.exception("binding failed")
    finally:
        logformat.configure("text")
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert isinstance(first["ts"], float) and first["ts"] > 1.7e9
    assert {k: first[k] for k in ("v", "msg", "logger", "node")} == {
        "v": 0,
        "msg": "bound default/p",
        "logger": "shoal.test",
        "node": "n1",
    }
    assert "level" not in first and "settings" not in first  # kopf's settings object stays out
    assert second["level"] == "error" and second["err"] == "RuntimeError: boom"
    assert "Traceback" in second["stacktrace"]
    with pytest.raises(ValueError, match="logging format"):
        logformat.configure("xml")
