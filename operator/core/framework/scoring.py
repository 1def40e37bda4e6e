"""Score helpers shared by plugins: kube-scheduler's ``helper.DefaultNormalizeScore`` and its
broken-linear scoring function (``helper.BuildBrokenLinearFunction``), with the utilization → score
shape that NodeResourcesFit's RequestedToCapacityRatio and VolumeBinding's storage-capacity scoring
take as args."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import numpy as np
from pydantic import Field

from shoal.core.framework.interfaces import MAX_NODE_SCORE, IntArray
from shoal.core.framework.profile import ArgsModel

#: a shape point's score is 0-10 (kube-scheduler's MaxCustomPriorityScore), scaled to 0-100
MAX_CUSTOM_SCORE = 10
#: utilization is a percentage
MAX_UTILIZATION = 100


def default_normalize(scores: IntArray, *, reverse: bool = False) -> IntArray:
    """Scale to 0..100 by the highest score; all zeros stay zeros (no division by zero).

    ``reverse``: a high raw score is bad (e.g. a count of intolerable taints).
    """
    if len(scores) == 0:
        return scores
    top = int(scores.max())
    if top <= 0:
        out = np.full(len(scores), MAX_NODE_SCORE if reverse else 0, dtype=np.int64)
        return out
    scaled: IntArray = (scores * MAX_NODE_SCORE) // top
    if reverse:
        scaled = MAX_NODE_SCORE - scaled
    return scaled.astype(np.int64, copy=False)


class ShapePoint(ArgsModel):
    """One point of a scoring shape (kube-scheduler's ``UtilizationShapePoint``)."""

    utilization: int = Field(ge=0, le=MAX_UTILIZATION)
    score: int = Field(ge=0, le=MAX_CUSTOM_SCORE)


def check_increasing(shape: Sequence[ShapePoint]) -> None:
    """``validateFunctionShape``'s order rule: utilizations strictly increase (ValueError if not)."""
    if any(b.utilization <= a.utilization for a, b in pairwise(shape)):
        raise ValueError("utilization values must be sorted in increasing order, without repeats")


def shape_points(shape: Sequence[ShapePoint]) -> list[tuple[int, int]]:
    """(utilization, score scaled to 0-100) per point, as kube-scheduler scales them."""
    return [(p.utilization, p.score * (MAX_NODE_SCORE // MAX_CUSTOM_SCORE)) for p in shape]


def broken_linear(points: Sequence[tuple[int, int]], utilization: IntArray) -> IntArray:
    """kube-scheduler's broken-linear function (``helper.BuildBrokenLinearFunction``) over
    utilizations, in integer arithmetic truncated toward zero as Go's."""
    out = np.full(len(utilization), points[-1][1], dtype=np.int64)
    done = np.zeros(len(utilization), dtype=bool)
    for i, (u, s) in enumerate(points):
        here = ~done & (utilization <= u)
        if i == 0:
            out[here] = s
        else:
            (u0, s0) = points[i - 1]
            num = (s - s0) * (utilization[here] - u0)
            out[here] = s0 + np.where(num >= 0, num // (u - u0), -((-num) // (u - u0)))
        done |= here
    return out


def class_mean_scores(
    points: Sequence[tuple[int, int]],
    at: Sequence[int],
    requested: Sequence[int],
    capacity: Sequence[int],
    n: int,
) -> IntArray:
    """VolumeBinding's storage-capacity scorer (``buildScorerFunction``) for ``n`` nodes at once.

    Entry ``i`` is one storage class on node ``at[i]``: the bytes its claims request and its
    volumes hold. A class scores ``points`` at its utilization (``requested x 100 // capacity``;
    100 when the capacity is 0 or short); a node scores Go's ``math.Round`` of the mean of its
    classes' scores (0 with none)."""
    # in Python integers: a few entries per pod, and sums of byte counts may pass int64
    utilization = np.array(
        [
            MAX_UTILIZATION if c <= 0 or r > c else r * MAX_UTILIZATION // c
            for r, c in zip(requested, capacity, strict=True)
        ],
        dtype=np.int64,
    )
    scores = broken_linear(points, utilization)
    where = np.asarray(at, dtype=np.int64)
    total = np.bincount(where, weights=scores, minlength=n).astype(np.int64)
    count = np.bincount(where, minlength=n).astype(np.int64)
    out: IntArray = np.zeros(n, dtype=np.int64)
    scored = count > 0
    # half away from zero, exactly: the scores are >= 0
    out[scored] = (2 * total[scored] + count[scored]) // (2 * count[scored])
    return out
