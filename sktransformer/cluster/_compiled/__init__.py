"""The clustering family's compiled CPU loops (numba), behind the torch layers' API.

``run_lloyd`` runs a whole hard k-means fit (every layer) in one compiled call where the
points allow it (:func:`lloyd_available`), with Hamerly's bounds where :func:`use_bounds`
says; ``kmeans_plusplus`` seeds it, ``swap_trials``
finds the center swaps to try after it, ``assign`` labels points and
``log_likelihoods`` scores them under the fitted mixture. The torch layers
serve everything else (GPU tensors, soft and variant updates) and are the reference the
loop is tested against.

The torch layers' own compiled passes are here too: the members' row sums
(``index_add_rows``, ``RowAdder``), trimming's pass, robust k-means' sparsemax sums and
k-medoids' nearest members.
"""

from ._engine import (
    assign,
    kmeans_plusplus,
    lloyd_available,
    log_likelihoods,
    mean_and_mean_variance,
    run_lloyd,
    summary,
    swap_trials,
    use_bounds,
)
from ._nearest import nearest_members, nearest_members_available
from ._scatter import (
    COMPILED_MIN_ELEMENTS,
    RowAdder,
    compiled_available,
    index_add_rows,
    use_compiled,
)
from ._sparsemax import sparsemax_sums, sparsemax_sums_available
from ._trim import trim_pass, trim_pass_available

__all__ = ["assign", "COMPILED_MIN_ELEMENTS", "compiled_available", "index_add_rows",
           "kmeans_plusplus", "lloyd_available", "log_likelihoods",
           "mean_and_mean_variance",
           "nearest_members",
           "nearest_members_available", "RowAdder", "run_lloyd", "sparsemax_sums",
           "sparsemax_sums_available", "summary", "swap_trials", "trim_pass",
           "trim_pass_available",
           "use_bounds", "use_compiled"]
