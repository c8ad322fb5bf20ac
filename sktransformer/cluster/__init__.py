"""K-means as a transformer: the circuit, its fast evaluation, and the estimators."""

from ._circuit import KMeansCircuit
from ._kmeans import TransformerKMeans

__all__ = ["KMeansCircuit", "TransformerKMeans"]
