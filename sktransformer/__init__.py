"""scikit-learn estimators whose algorithms are transformer attention circuits."""

from .cluster import KMeansCircuit, TransformerKMeans

__version__ = "0.1.0.dev0"

__all__ = ["KMeansCircuit", "TransformerKMeans", "__version__"]
