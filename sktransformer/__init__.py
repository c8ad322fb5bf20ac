"""scikit-learn estimators whose algorithms are transformer attention circuits."""

from .cluster import (
    KMeansCircuit,
    RobustTransformerKMeans,
    SphericalTransformerKMeans,
    TransformerKMeans,
    TransformerKMedoids,
    TrimmedTransformerKMeans,
)

__version__ = "0.1.0.dev0"

__all__ = [
    "KMeansCircuit",
    "RobustTransformerKMeans",
    "SphericalTransformerKMeans",
    "TransformerKMeans",
    "TransformerKMedoids",
    "TrimmedTransformerKMeans",
    "__version__",
]
