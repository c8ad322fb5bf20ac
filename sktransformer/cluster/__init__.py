"""K-means as a transformer: the circuit, its fast evaluation, and the estimators.

One loop (``_lloyd.run_layers``, driven by ``_base.BaseCircuitClustering``); each
estimator is a choice of center-update block (``_updates.py``).
"""

from ._base import neg_inertia_scorer
from ._circuit import KMeansCircuit
from ._kmeans import TransformerKMeans
from ._kmedoids import TransformerKMedoids
from ._learned import LearnedKMeansLayer, kmeans_objective, lloyd_step
from ._robust import RobustTransformerKMeans
from ._spherical import SphericalTransformerKMeans
from ._train import LayerTrainer
from ._trimmed import TrimmedTransformerKMeans

__all__ = [
    "KMeansCircuit",
    "LayerTrainer",
    "LearnedKMeansLayer",
    "RobustTransformerKMeans",
    "SphericalTransformerKMeans",
    "TransformerKMeans",
    "TransformerKMedoids",
    "TrimmedTransformerKMeans",
    "kmeans_objective",
    "lloyd_step",
    "neg_inertia_scorer",
]
