"""Profiles the leader creates itself at start-up, from a file (``shoal run --bootstrap-profiles``).

Why: Helm cannot create a SchedulingProfile in the same release that creates its CRD — a
post-install hook raced the new CRD into discovery (``no matches for kind "SchedulingProfile"``)
and re-created the profiles on every upgrade, which changed their ``creationTimestamp`` (the oldest
profile claiming a schedulerName wins). So, as kube-scheduler takes its profiles from a config file,
the chart renders a file and the leader makes the API agree with it, without fighting anyone:

* no profile of that name → create it, labelled ``app.kubernetes.io/managed-by: shoal`` and
  annotated ``shoal.dev/bootstrap-hash`` with the hash of the file's spec;
* one with the same hash → leave it alone, so ``kubectl edit`` survives restarts and fail-overs;
* one with another (or no) hash → overwrite it (a merge patch of the spec and the new hash) only
  if it carries the managed-by label; a profile someone made by hand is never touched;
* an entry whose spec is invalid is logged and skipped; a file that cannot be read or parsed is
  logged, and the operator goes on with the profiles in the API.

The file is a YAML list of ``{name: ..., spec: {...}}``. The pure parts (load, hash, decide) are
separate from the calls, so the decisions are tested without a server.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import yaml

from shoal.core.framework.profile import PluginEntry, PluginSet, ProfileError, validate_profile
from shoal.kube.rest import message_of
from shoal.kube.wire import PROFILE_GROUP, PROFILE_VERSION, PROFILES

log = logging.getLogger("shoal.bootstrap")

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "shoal"
HASH_ANNOTATION = "shoal.dev/bootstrap-hash"
#: decisions per profile when the object changed between our read and our write (HTTP 409)
ATTEMPTS = 3


class BootstrapError(ValueError):
    """The bootstrap file cannot be read or is not a list of ``{name, spec}``."""


@dataclass(frozen=True)
class BootstrapProfile:
    name: str
    spec: dict[str, Any]


class Action(Enum):
    CREATE = "create"
    PATCH = "patch"
    UNCHANGED = "unchanged"  # same hash: the object (edited or not) is left alone
    FOREIGN = "foreign"  # not ours (no managed-by label): never touched
    INVALID = "invalid"  # the file's spec is invalid: skipped
    FAILED = "failed"  # the API refused or could not be reached: tried again at the next leadership


@dataclass(frozen=True)
class Plan:
    name: str
    action: Action
    #: CREATE: the object to POST; PATCH: the merge patch; otherwise None
    body: dict[str, Any] | None = None
    message: str = ""
    #: the hash of the file's spec (empty when invalid or failed)
    hash: str = ""


def parse_bootstrap_profiles(text: str, source: str = "bootstrap file") -> list[BootstrapProfile]:
    """The entries of a bootstrap file; raises BootstrapError naming the first thing wrong."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise BootstrapError(f"{source}: not YAML: {exc}") from None
    if data is None:
        return []
    if not isinstance(data, list):
        raise BootstrapError(f"{source}: expected a list of {{name, spec}}, got {type(data).__name__}")
    out: list[BootstrapProfile] = []
    seen: set[str] = set()
    for i, item in enumerate(data):
        where = f"{source}[{i}]"
        if not isinstance(item, dict):
            raise BootstrapError(f"{where}: expected a mapping with name and spec")
        name = item.get("name")
        spec = item.get("spec")
        if not isinstance(name, str) or not name:
            raise BootstrapError(f"{where}.name: a non-empty string is required")
        if not isinstance(spec, dict):
            raise BootstrapError(f"{where}.spec: a mapping is required")
        if name in seen:
            raise BootstrapError(f"{where}.name: {name!r} is listed twice")
        seen.add(name)
        out.append(BootstrapProfile(name, spec))
    return out


def load_bootstrap_profiles(path: str | Path) -> list[BootstrapProfile]:
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise BootstrapError(f"cannot read {path}: {exc}") from None
    return parse_bootstrap_profiles(text, str(path))


def spec_hash(spec: Mapping[str, Any]) -> str:
    """A short, stable hash of a spec: key order and formatting do not change it."""
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def merge_patch(old: Any, new: Any) -> Any:
    """An RFC 7386 merge patch that turns ``old`` into ``new`` (keys only in ``old`` become null).

    Lists are replaced whole, as merge patch always does."""
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return new
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        if key not in old:
            patch[key] = value
        elif old[key] != value:
            patch[key] = merge_patch(old[key], value)
    return patch


def plan(
    profile: BootstrapProfile,
    existing: Mapping[str, Any] | None,
    registry: Mapping[str, PluginEntry],
    defaults: PluginSet | None = None,
) -> Plan:
    """What to do about one bootstrap entry, given the object of that name (None: absent)."""
    try:
        validate_profile(profile.spec, registry, defaults)
    except ProfileError as exc:
        return Plan(profile.name, Action.INVALID, message=str(exc))
    digest = spec_hash(profile.spec)
    if existing is None:
        body = {
            "apiVersion": f"{PROFILE_GROUP}/{PROFILE_VERSION}",
            "kind": "SchedulingProfile",
            "metadata": {
                "name": profile.name,
                "labels": {MANAGED_BY_LABEL: MANAGED_BY},
                "annotations": {HASH_ANNOTATION: digest},
            },
            "spec": profile.spec,
        }
        return Plan(profile.name, Action.CREATE, body, "absent", digest)
    meta = existing.get("metadata") or {}
    current = (meta.get("annotations") or {}).get(HASH_ANNOTATION)
    if current == digest:
        return Plan(profile.name, Action.UNCHANGED, message=f"hash {digest} unchanged", hash=digest)
    labels = meta.get("labels") or {}
    # profiles made by the chart's former post-install hook (shoal <= 0.1) are ours too: adopt them
    # (Helm's labels, shoal's chart name and version, and the hook annotation, all three)
    from_old_hook = (
        labels.get(MANAGED_BY_LABEL) == "Helm"
        and re.fullmatch(r"shoal-\d+\.\d+\.\d+\S*", str(labels.get("helm.sh/chart", ""))) is not None
        and "post-install" in str((meta.get("annotations") or {}).get("helm.sh/hook", ""))
    )
    if labels.get(MANAGED_BY_LABEL) != MANAGED_BY and not from_old_hook:
        return Plan(
            profile.name,
            Action.FOREIGN,
            message=f"it exists without the label {MANAGED_BY_LABEL}={MANAGED_BY} (made by hand?)",
            hash=digest,
        )
    patch_meta: dict[str, Any] = {"annotations": {HASH_ANNOTATION: digest}}
    if from_old_hook:
        patch_meta["labels"] = {MANAGED_BY_LABEL: MANAGED_BY}
    if meta.get("resourceVersion"):
        patch_meta["resourceVersion"] = meta["resourceVersion"]  # 409 if it changed since our read
    body = {"metadata": patch_meta, "spec": merge_patch(existing.get("spec") or {}, profile.spec)}
    reason = f"hash {current} -> {digest}" if current else f"no hash -> {digest}"
    return Plan(profile.name, Action.PATCH, body, reason, digest)


class Requester(Protocol):
    """What bootstrap needs of RawClient."""

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        timeout: float = 30.0,
    ) -> tuple[int, Any]: ...


#: what _apply asks of its caller: nothing more, decide again now, or try again after a delay
_DONE, _CONFLICT, _LATER = "done", "conflict", "later"


async def bootstrap_profiles(
    raw: Requester,
    path: str | Path,
    registry: Mapping[str, PluginEntry],
    defaults: PluginSet | None = None,
    *,
    leading: Callable[[], bool] = lambda: True,
    timeout: float = 10.0,
    backoff: tuple[float, float] = (1.0, 30.0),
) -> list[Plan]:
    """Make the API agree with the bootstrap file; returns the plan carried out for each entry.

    Never raises for a bad file, a refused call or a lost connection: those are logged, and the
    operator schedules with the profiles the API has. What may pass is retried with ``backoff``
    (first, longest delay) for as long as this replica leads: the API unreachable, 429 (a CRD
    just created answers "storage is (re)initializing"), 5xx, and 404 on create (the CRD is not
    served yet). What will not pass (403, 422) is logged once. Stops once ``leading()`` is False.
    """
    try:
        profiles = load_bootstrap_profiles(path)
    except BootstrapError as exc:
        log.error("bootstrap profiles not applied: %s", exc)
        return []
    collection = PROFILES.path()
    done: list[Plan] = []
    for profile in profiles:
        conflicts = 0
        delay = backoff[0]
        while True:
            if not leading():
                log.info("no longer the leader: bootstrap profiles stopped")
                return done
            try:
                step, outcome = await _apply(raw, collection, profile, registry, defaults, timeout)
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                step, outcome = Plan(profile.name, Action.FAILED, message=str(exc) or repr(exc)), _LATER
            if outcome == _CONFLICT:
                conflicts += 1
                if conflicts < ATTEMPTS:
                    continue
                log.error(
                    "bootstrap profile %s: changed by someone else %d times; left as is",
                    profile.name,
                    conflicts,
                )
                step = Plan(profile.name, Action.FAILED, message="conflicts")
            elif outcome == _LATER:
                log.warning(
                    "bootstrap profile %s: %s; trying again in %.0f s", profile.name, step.message, delay
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, backoff[1])
                continue
            done.append(step)
            break
    return done


def _transient(code: int) -> bool:
    return code == 429 or code >= 500


async def _apply(
    raw: Requester,
    collection: str,
    profile: BootstrapProfile,
    registry: Mapping[str, PluginEntry],
    defaults: PluginSet | None,
    timeout: float,
) -> tuple[Plan, str]:
    """Read, decide, write once."""
    code, reply = await raw.request("GET", f"{collection}/{profile.name}", timeout=timeout)
    if code == 404:
        existing = None
    elif code == 200 and isinstance(reply, dict):
        existing = reply
    else:
        failed = Plan(profile.name, Action.FAILED, message=f"read: HTTP {code} {message_of(reply)[:200]}")
        if _transient(code):
            return failed, _LATER
        log.error("bootstrap profile %s: %s", profile.name, failed.message)
        return failed, _DONE
    step = plan(profile, existing, registry, defaults)
    if step.action is Action.INVALID:
        log.error("bootstrap profile %s is invalid, skipped: %s", profile.name, step.message)
        return step, _DONE
    if step.action is Action.FOREIGN:
        log.warning("bootstrap profile %s not applied: %s", profile.name, step.message)
        return step, _DONE
    if step.action is Action.UNCHANGED:
        log.info("bootstrap profile %s: %s, left as is", profile.name, step.message)
        return step, _DONE
    if step.action is Action.CREATE:
        code, reply = await raw.request("POST", collection, step.body, timeout=timeout)
    else:
        code, reply = await raw.request(
            "PATCH",
            f"{collection}/{profile.name}",
            step.body,
            content_type="application/merge-patch+json",
            timeout=timeout,
        )
    if code == 409:  # created by another replica, or edited since we read it: look again
        log.info("bootstrap profile %s: %s met a conflict, reading it again", profile.name, step.action.value)
        return step, _CONFLICT
    if code >= 300:
        failed = Plan(
            profile.name,
            Action.FAILED,
            message=f"{step.action.value}: HTTP {code} {message_of(reply)[:200]}",
        )
        if _transient(code) or (code == 404 and step.action is Action.CREATE):
            return failed, _LATER
        log.error("bootstrap profile %s: %s", profile.name, failed.message)
        return failed, _DONE
    verb = "created" if step.action is Action.CREATE else "updated"
    log.info("bootstrap profile %s %s (%s)", profile.name, verb, step.message)
    return step, _DONE
