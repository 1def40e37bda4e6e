"""Score helpers shared by plugins (kube-scheduler's ``helper.DefaultNormalizeScore``)."""

from __future__ import annotations

import numpy as np

from shoal.core.interfaces import MAX_NODE_SCORE, IntArray


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
