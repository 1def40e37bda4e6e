"""``shoal explain``: why a pod is (not) placed, per node and plugin, on a fresh snapshot.

It primes a scheduler as the operator primes its cache (same informer, kinds and profile
ownership), builds only the profile the pod names, and asks it for a what-if placement; nothing
is queued, bound or written. Output: text (the default), or ``-o json|yaml``, the same facts as a
document (:func:`explanation_doc`, its keys documented in docs/explain.md).

What is not shoal's fault (no kubeconfig, a bad context, an unreachable or refusing API server, a
missing namespace or pod) is one line on stderr and exit code 1, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from shoal.views.explanation import explanation_doc

if TYPE_CHECKING:
    from shoal.core.scheduling.scheduler import Scheduler
    from shoal.core.state.objects import PodInfo
    from shoal.kube.informer import Informer
    from shoal.kube.rest import RawClient
    from shoal.operator_app.profiles import Profiles

#: seconds for the first requests (namespace, pod): an unreachable server fails fast
PROBE_TIMEOUT = 10.0


class ExplainError(Exception):
    """One line for the user: what went wrong, not where in shoal."""


def kubeconfig_path(given: str | None) -> Path:
    """The kubeconfig ``explain`` reads: ``--kubeconfig``, else the first of ``$KUBECONFIG``, else
    ``~/.kube/config`` (kubectl's order)."""
    if given:
        return Path(given)
    env = os.environ.get("KUBECONFIG", "")
    first = next((p for p in env.split(os.pathsep) if p), "")
    return Path(first) if first else Path.home() / ".kube" / "config"


def pod_ref(given: str, namespace: str | None) -> tuple[str, str]:
    """(namespace, name) from ``NAMESPACE/POD``, or ``POD`` with ``-n`` (default: ``default``)."""
    ns, slash, name = given.partition("/")
    if not slash:
        return namespace or "default", given
    if not ns or not name or "/" in name:
        raise ExplainError(f"{given!r} is not NAMESPACE/POD")
    if namespace is not None and namespace != ns:
        raise ExplainError(f"{given!r} names namespace {ns!r}, -n says {namespace!r}")
    return ns, name


def one_line(exc: BaseException) -> str:
    """An exception's text on one line (YAML and aiohttp errors span several)."""
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def check_context(path: Path, context: str | None) -> None:
    """``--context`` names a context of the kubeconfig (a clearer line than the client's)."""
    if context is None:
        return
    try:
        loaded = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ExplainError(f"kubeconfig {path} is not YAML") from exc
    contexts = loaded.get("contexts") if isinstance(loaded, dict) else None
    names = [str(c.get("name")) for c in contexts or () if isinstance(c, dict)]
    if context not in names:
        has = f"it has {', '.join(names)}" if names else "it has none"
        raise ExplainError(f"kubeconfig {path} has no context {context!r} ({has})")


async def _probe(raw: RawClient, namespace: str, name: str) -> None:
    """The namespace and the pod exist (quickly: a dead server fails here, not after a listing)."""
    from shoal.kube.rest import message_of

    for path, what in (
        (f"/api/v1/namespaces/{namespace}", f"namespace {namespace!r}"),
        (f"/api/v1/namespaces/{namespace}/pods/{name}", f"pod {namespace}/{name}"),
    ):
        code, body = await raw.request("GET", path, timeout=PROBE_TIMEOUT)
        if code == 404:
            raise ExplainError(f"{what} not found")
        if code >= 300:
            raise ExplainError(f"the API server refused GET {path}: HTTP {code} {message_of(body)[:200]}")


async def _snapshot(
    raw: RawClient, sched: Scheduler, namespace: str, name: str
) -> tuple[Profiles, PodInfo | None]:
    """Prime ``sched`` as the operator primes its cache, queueing nothing. Returns the profiles
    seen and the pod (None if it went away meanwhile)."""
    from shoal.kube.informer import Event, Informer
    from shoal.kube.kinds import KIND_PODS, KIND_PROFILES, ProfileObject
    from shoal.operator_app.profiles import Profiles

    profiles = Profiles(sched, sched.registry, sched.defaults)
    found: list[PodInfo] = []

    async def on_profile(event: Event[ProfileObject]) -> None:
        profiles.observe(event)

    async def on_pod(event: Event[PodInfo]) -> None:
        sched.cache.upsert_pod(event.obj)
        if event.obj.namespace == namespace and event.obj.name == name:
            found.append(event.obj)

    informer = Informer()
    informer.watch(KIND_PROFILES, on_profile)
    _watch_cluster(informer, sched)
    informer.watch(KIND_PODS, on_pod)
    await informer.prime(raw)
    return profiles, found[-1] if found else None


def _watch_cluster(informer: Informer, sched: Scheduler) -> None:
    """The kinds between profiles and pods, in the operator's priming order, into ``sched``."""
    from shoal.core.state.hierarchy import CompositeGroupInfo
    from shoal.core.state.objects import NodeSpec, PodGroupInfo
    from shoal.core.state.spreadselectors import SelectorOwner
    from shoal.kube.informer import Event
    from shoal.kube.kinds import (
        KIND_COMPOSITE_PODGROUPS,
        KIND_NAMESPACES,
        KIND_NODES,
        POD_GROUP_KINDS,
        SPREAD_SELECTOR_KINDS,
        STORE_KINDS,
        NamespaceInfo,
    )

    async def on_group(event: Event[PodGroupInfo]) -> None:
        sched.on_pod_group(event.obj)

    async def on_composite(event: Event[CompositeGroupInfo]) -> None:
        sched.on_composite(event.obj)

    async def on_node(event: Event[NodeSpec]) -> None:
        sched.on_node(event.obj)

    async def on_namespace(event: Event[NamespaceInfo]) -> None:
        sched.on_namespace(event.obj.name, event.obj.labels)

    async def on_stored(event: Event[Any]) -> None:
        sched.on_object(event.obj)

    async def on_spread_selector(event: Event[SelectorOwner]) -> None:
        sched.cache.spread_selectors.upsert(event.obj)

    informer.watch(KIND_COMPOSITE_PODGROUPS, on_composite)
    for group_kind in POD_GROUP_KINDS:  # scheduler-plugins' and native PodGroups
        informer.watch(group_kind, on_group)
    informer.watch(KIND_NAMESPACES, on_namespace)
    informer.watch(KIND_NODES, on_node)
    for kind in STORE_KINDS:
        informer.watch(kind, on_stored)
    for selector_kind in SPREAD_SELECTOR_KINDS.values():
        informer.watch(selector_kind, on_spread_selector)


def print_text(doc: dict[str, Any]) -> None:
    """The document as ``shoal explain`` has always printed it."""
    print(f"pod {doc['pod']} (schedulerName {doc['schedulerName']}): {doc['message']}")
    for line in doc["gang"]:
        print(line)
    pre = doc["preemption"]
    if pre is not None:
        print(
            f"would preempt {', '.join(pre['victims'])} on {pre['node']}" if pre["node"] else pre["message"]
        )
    for line in doc["claims"]:
        print(line)
    rows = [("NODE", "RESULT", "DETAILS")]
    for n in doc["nodes"]:
        notes = "; ".join(f"[{p}: {note}]" for p, note in n["notes"].items())
        if n["result"] == "fits":
            details = " ".join(f"{p}={v}" for p, v in n["scores"].items())
            costs = " ".join(f"{p}.cost={c:g}" for p, c in n["costs"].items())
            rows.append((n["name"], f"fits, score {n['score']}", f"{details} {costs} {notes}".strip()))
        else:
            reasons = ", ".join(n["reasons"])
            rows.append((n["name"], f"rejected by {n['plugin']}", f"{reasons} {notes}".strip()))
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    for r in rows:
        print(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]}".rstrip())


def emit(doc: dict[str, Any], output: str) -> None:
    if output == "json":
        print(json.dumps(doc, indent=2))
    elif output == "yaml":
        print(yaml.safe_dump(doc, sort_keys=False), end="")
    elif "nodes" in doc:
        print_text(doc)
    elif doc.get("boundTo"):
        print(f"pod {doc['pod']} is bound to {doc['boundTo']}")
    else:
        if doc.get("invalid"):
            print(f"note: SchedulingProfile {doc['profile']} is invalid: {doc['invalid']}")
        print(doc["message"])


async def _explain_async(args: argparse.Namespace, namespace: str, name: str) -> int:
    from kubernetes_asyncio import config

    from shoal.core.scheduling.scheduler import Scheduler
    from shoal.core.state.status import Status
    from shoal.kube.rest import RawClient
    from shoal.plugins.registry import DEFAULT_PLUGINS, load_registry

    class _NoBind:
        async def bind(self, pod: PodInfo, node: str) -> Status:
            return Status.error("explain never binds")

    api = await config.new_client_from_config(config_file=args.kubeconfig, context=args.context)
    try:
        raw = RawClient(api)
        await _probe(raw, namespace, name)
        sched = Scheduler(load_registry(), _NoBind(), defaults=DEFAULT_PLUGINS)
        profiles, target = await _snapshot(raw, sched, namespace, name)
        if target is None:
            raise ExplainError(f"pod {namespace}/{name} not found (or terminated)")
        doc: dict[str, Any] = {"pod": target.key, "schedulerName": target.scheduler_name}
        if target.bound:
            emit({**doc, "boundTo": target.node_name}, args.output)
            return 0
        # only the profile the pod uses: others' troubles are not this pod's
        error = profiles.apply(target.scheduler_name)
        owner = profiles.owner(target.scheduler_name)
        if error is not None and owner is not None:
            doc["message"] = (
                f"pod {target.key} has schedulerName {target.scheduler_name!r}, whose SchedulingProfile "
                f"{owner.name} is invalid now; shoal keeps scheduling it with the profile's last valid "
                "generation (see its status), which explain cannot reconstruct"
            )
            emit({**doc, "profile": owner.name, "invalid": str(error)}, args.output)
            return 1
        if target.scheduler_name not in sched.profiles:
            doc["message"] = (
                f"pod {target.key} has schedulerName {target.scheduler_name!r}, "
                "which no SchedulingProfile serves"
            )
            emit({**doc, "profile": None}, args.output)
            return 1
        result = sched.explain(target)
        full = explanation_doc(sched, target, result)
    finally:
        await api.close()
    emit({"pod": full.pop("pod"), "profile": owner.name if owner else None, **full}, args.output)
    return 0


def explain(args: argparse.Namespace) -> int:
    """Run ``shoal explain``; what is not shoal's fault is one line on stderr and exit code 1."""
    import aiohttp
    from kubernetes_asyncio.client.exceptions import ApiException
    from kubernetes_asyncio.config.config_exception import ConfigException

    from shoal.kube.listing import ListError

    try:
        namespace, name = pod_ref(args.pod, args.namespace)
        path = kubeconfig_path(args.kubeconfig)
        if not path.is_file():
            raise ExplainError(f"no kubeconfig at {path} (use --kubeconfig or $KUBECONFIG)")
        args.kubeconfig = str(path)
        check_context(path, args.context)
        try:
            return asyncio.run(_explain_async(args, namespace, name))
        except ConfigException as exc:
            raise ExplainError(f"kubeconfig {path}: {one_line(exc)}") from exc
        except yaml.YAMLError as exc:
            raise ExplainError(f"kubeconfig {path} is not YAML") from exc
        except TimeoutError as exc:
            raise ExplainError(f"cannot reach the API server: no answer in {PROBE_TIMEOUT:g} s") from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise ExplainError(f"cannot reach the API server: {one_line(exc)}") from exc
        except ApiException as exc:
            raise ExplainError(f"the API server refused: {exc.status} {exc.reason}") from exc
        except ListError as exc:
            raise ExplainError(f"the API server refused a listing: {one_line(exc)}") from exc
    except ExplainError as exc:
        print(f"shoal: error: {exc}", file=sys.stderr)
        return 1


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    exp = sub.add_parser(
        "explain",
        help="why a pod is (not) placed, per node and plugin",
        description="Why a pending pod is (not) placed: per node, the plugin that rejects it or its "
        "scores, on a fresh snapshot of the cluster. Changes nothing.",
    )
    exp.add_argument("pod", metavar="POD", help="NAMESPACE/POD, or POD with -n")
    exp.add_argument("-n", "--namespace", help="the pod's namespace (default: default)")
    exp.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
    exp.add_argument("--context", help="kubeconfig context (default: its current-context)")
    exp.add_argument(
        "-o",
        "--output",
        choices=("text", "json", "yaml"),
        default="text",
        help="text (default), or the same facts as a JSON or YAML document",
    )
    exp.set_defaults(func=explain)
