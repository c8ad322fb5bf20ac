"""Robust k-means: the center update is sparsemax attention over the members."""

from numbers import Real

from ..utils import Interval
from ._base import COMMON_CONSTRAINTS, BaseCircuitClustering
from ._updates import Sparsemax


class RobustTransformerKMeans(BaseCircuitClustering):
    """K-means whose center update is sparsemax attention: far members weigh exactly 0.

    The assignment block is Lloyd's. In the center update, center ``j`` attends to its
    members with sparsemax weights ``p = sparsemax(-beta ||x_i - c_j||^2 / sqrt(d))``
    (Martins & Astudillo, 2016) and moves to ``sum_i p_i x_i``: a convex combination of
    the members in which those far from the current center get weight exactly zero, so a
    few outliers cannot drag the center (the paper's robust k-means). As ``beta -> 0`` the
    weights become uniform and this is Lloyd's algorithm; large ``beta`` puts all the weight
    on the members nearest the current center.

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters.
    beta : float, default=0.01
        Inverse temperature of the sparsemax, in units of 1 / squared distance (the paper's
        default). Sparsemax is not scale-free: with ``m`` members, a member is cut off when
        its squared distance exceeds the cluster's typical one by about
        ``sqrt(d) / (beta m)``, so standardize the data and raise ``beta`` with the size of
        the clusters for a stronger effect.
    init : {"k-means++", "random"}, callable or array-like of shape (n_clusters, n_features), \
default="k-means++"
        Initial centers.
    n_init : "auto" or int, default="auto"
        Number of initializations; the lowest inertia wins.
    max_iter : int, default=300
        Maximum number of layers.
    tol : float, default=1e-4
        Relative tolerance on the total squared center shift (scaled by the mean feature
        variance). There is no strict convergence: the update depends on distances, not
        only on labels.
    device : {"auto", "cpu", "cuda", "cuda:N"} or torch.device, default="auto"
        Where the circuit runs; ``"auto"`` uses CUDA when present.
    random_state : int, RandomState instance or None, default=None
        Seeds a local ``torch.Generator`` for the initialization.
    verbose : int, default=0
        1 and more: scikit-learn's messages (the end of the initialization, the
        inertia after each layer, the reason for stopping; logged to the
        "sktransformer" logger, printed to stdout when logging is not configured)
        and a progress bar over the layers (stderr).
    batch_size : int or None, default=None
        Points per chunk (memory only, not the result).

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features)
    labels_ : ndarray of shape (n_samples,)
    inertia_ : float
        Sum of squared distances to the closest center (weighted).
    n_iter_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)

    See Also
    --------
    TrimmedTransformerKMeans : Drops the farthest points instead of down-weighting them.

    Notes
    -----
    ``sample_weight`` counts repetitions, scikit-learn's convention (a weight of 2 is the
    row twice; tested). Sparsemax spreads a budget of 1 over the multiset of a cluster's
    members, so the cut-off depends on how many members there are: multiplying every weight
    by ``c`` is repeating every row ``c`` times, and moves the centers exactly as repeating
    the data would. The fit is therefore not invariant to a common scale of the weights
    (halving them moves the centers by about 5e-3 on standardized blobs); divide the
    weights by their mean for weights that only say what is relatively important.

    Examples
    --------
    >>> import numpy as np
    >>> from sktransformer import RobustTransformerKMeans
    >>> X = np.array([[0, 0], [0, 1], [1, 0], [1, 1], [9, 9], [9, 10], [10, 9], [40, 40]])
    >>> rkm = RobustTransformerKMeans(2, init=X[[0, 4]], device="cpu").fit(X)
    >>> rkm.cluster_centers_.round(2).tolist()  # k-means gives [17, 17] for the second
    [[0.5, 0.5], [9.33, 9.33]]
    """

    _parameter_constraints = {
        **COMMON_CONSTRAINTS,
        "beta": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(self, n_clusters=8, *, beta=0.01, init="k-means++", n_init="auto",
                 max_iter=300, tol=1e-4, device="auto", random_state=None, verbose=0,
                 batch_size=None):
        self.n_clusters = n_clusters
        self.beta = beta
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        self.batch_size = batch_size

    def _make_update(self, indices, generator):
        return Sparsemax(self.n_clusters, self.beta)
