"""Objects as Kubeflow Trainer v2, JobSet and Kueue write them, for the integration tests.

Facts from each project's source (names, keys, values), not their code:

* **JobSet** (``jobset.x-k8s.io/v1alpha2``): a ReplicatedJob's Jobs are named
  ``<jobset>-<replicatedJob>-<index>``; the controller puts ``jobset.sigs.k8s.io/jobset-name``,
  ``replicatedjob-name``, ``replicatedjob-replicas``, ``job-index``, ``job-key`` (SHA-1 of
  ``<namespace>/<job name>``, hex), ``restart-attempt`` and ``job-global-index`` on the Job and its
  pod template, as labels and as annotations; ``alpha.jobset.sigs.k8s.io/exclusive-topology`` (a node
  label key) only as an annotation. Its pod webhook gives the leader (completion index 0) a required
  pod affinity to its own job key and a required anti-affinity to every other job key, both on the
  exclusive topology key with an empty ``namespaceSelector``; followers are admitted only once the
  leader is bound, with a ``nodeSelector`` on the leader's domain.
* **Job controller**: an Indexed Job's pod is ``<job>-<index>-<random>``, owned by the Job
  (controller, blockOwnerDeletion), labelled ``batch.kubernetes.io/controller-uid``,
  ``batch.kubernetes.io/job-name`` (and the legacy ``controller-uid`` / ``job-name``) and
  ``batch.kubernetes.io/job-completion-index`` (also an annotation), hostname ``<job>-<index>``,
  subdomain the JobSet's name.
* **Kubeflow Trainer v2** (CoScheduling runtime plugin): a TrainJob's PodGroup
  (``scheduling.x-k8s.io/v1alpha1``) is named as the TrainJob, owned by it (controller), with
  ``minMember`` the sum of the pod sets' counts, ``minResources`` their summed requests and
  ``scheduleTimeoutSeconds`` from the runtime's ``podGroupPolicy.coscheduling`` ("0 means the
  default"); the pods carry ``scheduling.x-k8s.io/pod-group: <trainjob>``; the JobSet has the
  TrainJob's name and its ``node`` ReplicatedJob template the label
  ``trainer.kubeflow.org/trainjob-ancestor-step: trainer``.
* **Kueue** (pod integration): a managed pod is created with the scheduling gate
  ``kueue.x-k8s.io/admission``, the ``kueue.x-k8s.io/managed`` label and finalizer,
  ``kueue.x-k8s.io/queue-name`` and ``kueue.x-k8s.io/podset`` labels; on admission Kueue adds its
  ResourceFlavor's node labels to ``nodeSelector`` (and its tolerations) and removes the gate. With
  Topology Aware Scheduling the pod also carries ``kueue.x-k8s.io/topology`` (gate),
  ``kueue.x-k8s.io/tas: "true"`` and a ``podset-required-topology`` / ``podset-preferred-topology``
  annotation; Kueue's TopologyUngater lifts the gate and copies the assigned domain's node labels
  (down to the lowest level of the Topology) into ``nodeSelector``.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from typing import Any

from shoal.testing.objects import make_pod

JSON = dict[str, Any]

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_KEY = "jobset.sigs.k8s.io/job-key"
EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"

TRAINER_API = "trainer.kubeflow.org/v1alpha1"
ANCESTOR_STEP = "trainer.kubeflow.org/trainjob-ancestor-step"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"

KUEUE_ADMISSION_GATE = "kueue.x-k8s.io/admission"
KUEUE_TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
KUEUE_REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"


def job_key(namespace: str, job_name: str) -> str:
    """JobSet's ``job-key``: SHA-1 of ``<namespace>/<job name>``, in hex."""
    return hashlib.sha1(f"{namespace}/{job_name}".encode()).hexdigest()


def owner(api_version: str, kind: str, name: str, uid: str) -> JSON:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def jobset_meta(
    namespace: str, jobset: str, rjob: str, replicas: int, index: int, exclusive: str | None = None
) -> tuple[dict[str, str], dict[str, str]]:
    """The labels and annotations the JobSet controller puts on a child Job and its pods."""
    job_name = f"{jobset}-{rjob}-{index}"
    common = {
        JOBSET_NAME: jobset,
        REPLICATED_JOB: rjob,
        "jobset.sigs.k8s.io/replicatedjob-replicas": str(replicas),
        "jobset.sigs.k8s.io/job-index": str(index),
        JOB_KEY: job_key(namespace, job_name),
        "jobset.sigs.k8s.io/restart-attempt": "0",
        "jobset.sigs.k8s.io/job-global-index": str(index),
    }
    annotations = dict(common)
    if exclusive:
        annotations[EXCLUSIVE] = exclusive
    return common, annotations


def make_job(
    namespace: str,
    jobset: str,
    rjob: str,
    replicas: int,
    index: int,
    *,
    pods: int,
    exclusive: str | None = None,
    jobset_uid: str | None = None,
    template_labels: Mapping[str, str] | None = None,
) -> JSON:
    """A JobSet's child Job (Indexed, suspended: no Job controller runs in the tests), owned by the
    JobSet; the API server fills in its selector and controller-uid labels."""
    labels, annotations = jobset_meta(namespace, jobset, rjob, replicas, index, exclusive)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"{jobset}-{rjob}-{index}",
            "namespace": namespace,
            "labels": {**labels, **(template_labels or {})},
            "annotations": annotations,
            "ownerReferences": [owner(JOBSET_API, "JobSet", jobset, jobset_uid or str(uuid.uuid4()))],
        },
        "spec": {
            "completionMode": "Indexed",
            "completions": pods,
            "parallelism": pods,
            "suspend": True,
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": labels, "annotations": annotations},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "node", "image": "registry.k8s.io/pause:3.10"}],
                },
            },
        },
    }


def job_pod(
    job: Mapping[str, Any],
    index: int,
    *,
    scheduler_name: str,
    gpus: int = 0,
    cpu: str = "1",
    extra_labels: Mapping[str, str] | None = None,
    **pod_args: Any,
) -> JSON:
    """Pod ``index`` of a created (JobSet child) Job, as the Job controller makes it."""
    meta = job["metadata"]
    job_name, job_uid = meta["name"], meta["uid"]
    tmpl = job["spec"]["template"]["metadata"]
    labels = {
        **(tmpl.get("labels") or {}),
        **(extra_labels or {}),
        "batch.kubernetes.io/controller-uid": job_uid,
        "controller-uid": job_uid,
        "batch.kubernetes.io/job-name": job_name,
        "job-name": job_name,
        COMPLETION_INDEX: str(index),
    }
    annotations = {**(tmpl.get("annotations") or {}), COMPLETION_INDEX: str(index)}
    suffix = uuid.uuid4().hex[:5]
    pod = make_pod(
        f"{job_name}-{index}-{suffix}",
        namespace=meta["namespace"],
        cpu=cpu,
        memory="1Gi",
        gpus=gpus,
        scheduler_name=scheduler_name,
        labels=labels,
        annotations=annotations,
        **pod_args,
    )
    pod["metadata"]["ownerReferences"] = [owner("batch/v1", "Job", job_name, job_uid)]
    pod["spec"].update(
        {
            "hostname": f"{job_name}-{index}",
            "subdomain": meta["labels"][JOBSET_NAME],
            "restartPolicy": "Never",
        }
    )
    return pod


def exclusive_affinity(pod: Mapping[str, Any]) -> JSON:
    """What JobSet's pod webhook injects into a leader pod for exclusive placement."""
    key = pod["metadata"]["labels"][JOB_KEY]
    topology = pod["metadata"]["annotations"][EXCLUSIVE]
    return {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {
                        "matchExpressions": [{"key": JOB_KEY, "operator": "In", "values": [key]}]
                    },
                    "topologyKey": topology,
                    "namespaceSelector": {},
                }
            ]
        },
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {"key": JOB_KEY, "operator": "Exists"},
                            {"key": JOB_KEY, "operator": "NotIn", "values": [key]},
                        ]
                    },
                    "topologyKey": topology,
                    "namespaceSelector": {},
                }
            ]
        },
    }


def trainjob_pod_group(
    namespace: str,
    trainjob: str,
    trainjob_uid: str,
    *,
    members: int,
    per_pod: Mapping[str, int],
    schedule_timeout_seconds: int = 0,
) -> JSON:
    """The PodGroup Trainer's CoScheduling plugin applies for a TrainJob."""
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {
            "name": trainjob,
            "namespace": namespace,
            "ownerReferences": [owner(TRAINER_API, "TrainJob", trainjob, trainjob_uid)],
        },
        "spec": {
            "minMember": members,
            "minResources": {k: str(v * members) for k, v in per_pod.items()},
            "scheduleTimeoutSeconds": schedule_timeout_seconds,
        },
    }


def kueue_pod(
    name: str,
    namespace: str,
    *,
    scheduler_name: str,
    queue: str = "team-a",
    podset: str = "main",
    topology: tuple[str, str] | None = None,
    **pod_args: Any,
) -> JSON:
    """A pod Kueue manages, as its pod webhook leaves it: gated until admission. ``topology``
    (annotation, level key) makes it a TAS pod: the topology gate too."""
    labels = {
        "kueue.x-k8s.io/managed": "true",
        "kueue.x-k8s.io/queue-name": queue,
        "kueue.x-k8s.io/podset": podset,
    }
    annotations: dict[str, str] = {}
    gates = [{"name": KUEUE_ADMISSION_GATE}]
    if topology is not None:
        annotations[topology[0]] = topology[1]
        labels["kueue.x-k8s.io/tas"] = "true"
        gates.append({"name": KUEUE_TOPOLOGY_GATE})
    pod = make_pod(
        name,
        namespace=namespace,
        scheduler_name=scheduler_name,
        labels=labels,
        annotations=annotations,
        **pod_args,
    )
    pod["metadata"]["finalizers"] = ["kueue.x-k8s.io/managed"]
    pod["spec"]["schedulingGates"] = gates
    return pod


def kueue_admit(
    pod: Mapping[str, Any],
    node_labels: Mapping[str, str],
    *,
    gates: tuple[str, ...] = (KUEUE_ADMISSION_GATE,),
    tolerations: list[JSON] | None = None,
) -> JSON:
    """The merge patch Kueue sends when it admits (or topology-ungates) the pod: the listed gates
    removed, the flavor's (or domain's) node labels added to ``nodeSelector``, tolerations added."""
    left = [g for g in pod["spec"].get("schedulingGates") or () if g["name"] not in gates]
    spec: JSON = {
        "schedulingGates": left or None,
        "nodeSelector": {**(pod["spec"].get("nodeSelector") or {}), **node_labels},
    }
    if tolerations:
        spec["tolerations"] = [*(pod["spec"].get("tolerations") or ()), *tolerations]
    return {"spec": spec}
