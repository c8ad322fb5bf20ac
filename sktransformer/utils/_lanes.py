"""Partial sums by lanes: atomic adds into few targets on a GPU, spread over more."""

import torch

# On a GPU the atomic adds into few rows (clusters) queue on the same addresses: row ``i``
# adds into partial row ``i % LANES`` of its target instead, summed after, from
# ``_LANES_MIN`` rows on and while the partial rows are fewer than the source's. On an
# H200: 10^6 values into 64 groups by scatter_add 61 against 270 us (float64), 69 against
# 293 (float32); the layer's index_add_ of 500,000 x 33 rows into 65, 0.11 against 0.20 ms
LANES = 32
_LANES_MIN = 1 << 15


def _contends(index, n_targets):
    n = len(index)
    return index.device.type == "cuda" and n >= _LANES_MIN and n_targets * LANES <= n


def spread(index, n_targets):
    """``LANES * index_i + i % LANES`` where the adds of ``index`` into ``n_targets`` targets
    would contend on a GPU (then the targets are ``n_targets * LANES`` partial ones, to sum
    by lanes), else None."""
    if not _contends(index, n_targets):
        return None
    lane = torch.arange(len(index), device=index.device).bitwise_and_(LANES - 1)
    return lane.add_(index, alpha=LANES)
