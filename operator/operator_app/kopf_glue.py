"""kopf, configured to keep nothing on objects: event handlers only, stateless storages, login.

Why ``on.event`` rather than ``on.create/update/resume/delete``: the latter keep per-object
progress in annotations, written by every replica; event handlers are stateless and idempotent,
and only the leader writes status.
"""

from __future__ import annotations

import os
from typing import Any

import kopf


def configure(settings: kopf.OperatorSettings, watch_timeout: float) -> None:
    settings.persistence.diffbase_storage = StatelessDiffBase()
    settings.persistence.progress_storage = StatelessProgress()
    settings.posting.enabled = False  # kopf's own k8s-events; ours come from KubeReporter
    settings.watching.server_timeout = int(watch_timeout)  # the API wants an integer
    settings.watching.client_timeout = watch_timeout + 30
    settings.networking.request_timeout = 60


def login(kubeconfig: str | None, **kwargs: Any) -> kopf.ConnectionInfo | None:
    """kopf's credentials: the kubeconfig given, in-cluster, or $KUBECONFIG."""
    if kubeconfig:
        os.environ["KUBECONFIG"] = kubeconfig
        return kopf.login_with_kubeconfig(**kwargs)
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return kopf.login_with_service_account(**kwargs)
    return kopf.login_with_kubeconfig(**kwargs)


class StatelessDiffBase(kopf.DiffBaseStorage):
    """shoal has only event handlers: no object essence to build (kopf deep-copies every body for
    it otherwise) and nothing to store on objects."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


class StatelessProgress(kopf.ProgressStorage):
    """No handler progress is ever kept, in annotations or status."""

    def fetch(self, *, key: Any, body: kopf.Body) -> Any:
        return None

    def store(self, *, key: Any, record: Any, body: kopf.Body, patch: kopf.Patch) -> None:
        return None

    def purge(self, *, key: Any, body: kopf.Body, patch: kopf.Patch) -> None:
        return None

    def touch(self, *, body: kopf.Body, patch: kopf.Patch, value: str | None) -> None:
        return None

    def clear(self, *, essence: kopf.BodyEssence) -> kopf.BodyEssence:
        return essence
