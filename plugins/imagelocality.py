"""ImageLocality (Score): prefer nodes that already hold the pod's images.

kube-scheduler's formula (pkg/scheduler/framework/plugins/imagelocality, release 1.37): for each
image the pod pulls (init containers, containers, image volumes; a reference without a tag gets
``:latest``), a node holding it under exactly that name adds size × (nodes holding it ÷ all nodes),
so an image every node has counts fully and a rare one little (no stampede onto one node). The sum
is clamped to [23 MiB, 1000 MiB × images] and mapped linearly onto 0–100. Names are compared as
the kubelet reports them: ``nginx`` does not match ``docker.io/library/nginx:latest``, as upstream.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from shoal.core.framework.cyclestate import CycleState
from shoal.core.framework.interfaces import MAX_NODE_SCORE, EventKind, EventRegistration, Handle, IntArray
from shoal.core.framework.profile import PluginEntry
from shoal.core.state.nodetable import NodeTable
from shoal.core.state.objects import PodInfo
from shoal.core.state.status import SUCCESS, Status

NAME = "ImageLocality"
MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


def priority(sum_scores: IntArray, image_count: int) -> IntArray:
    """The pure mapping of summed, spread-scaled image sizes onto 0–100."""
    high = MAX_CONTAINER_THRESHOLD * image_count
    clamped = np.clip(sum_scores, MIN_THRESHOLD, high)
    out: IntArray = (MAX_NODE_SCORE * (clamped - MIN_THRESHOLD)) // (high - MIN_THRESHOLD)
    return out


class ImageLocality:
    name = NAME

    def pre_score(self, state: CycleState, pod: PodInfo, rows: IntArray, table: NodeTable) -> Status:
        """Skip when no node holds any of the pod's images: every node's sum is then 0, which maps
        to 0 (below the 23 MiB floor), so scoring would only add zeros."""
        held = any(table.image_rows.get(image) for image in pod.images)
        return SUCCESS if held else Status.skip()

    def score_nodes(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: IntArray) -> IntArray:
        total_nodes = len(table)
        sums = np.zeros(table.n, dtype=np.int64)
        for image in pod.images:
            holders = table.image_rows.get(image)
            if not holders:
                continue
            scaled = int(float(table.image_sizes[image]) * (len(holders) / total_nodes))
            sums[list(holders)] += scaled
        out: IntArray = priority(sums[rows], len(pod.images))
        return out

    def events_to_register(self) -> Sequence[EventRegistration]:
        return (EventRegistration(EventKind.NODE_ADD | EventKind.NODE_UPDATE),)


def new(args: None, handle: Handle) -> ImageLocality:
    return ImageLocality()


ENTRY = PluginEntry(NAME, new, None, ImageLocality)
