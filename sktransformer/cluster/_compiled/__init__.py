"""The clustering family's compiled CPU loops (numba), behind the torch layers' API.

``run_lloyd`` runs a whole hard k-means fit (every layer) in one compiled call where the
points allow it (:func:`lloyd_available`); ``kmeans_plusplus`` seeds it, ``swap_trials``
finds the center swaps to try after it and ``assign`` labels points. The torch layers
serve everything else (GPU tensors, soft and variant updates) and are the reference the
loop is tested against.
"""

from ._engine import assign, kmeans_plusplus, lloyd_available, run_lloyd, swap_trials

__all__ = ["assign", "kmeans_plusplus", "lloyd_available", "run_lloyd", "swap_trials"]
