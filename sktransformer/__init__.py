"""scikit-learn estimators whose algorithms are transformer attention circuits."""

from .cluster import (
    KMeansCircuit,
    RobustTransformerKMeans,
    SphericalTransformerKMeans,
    TransformerKMeans,
    TransformerKMedoids,
    TrimmedTransformerKMeans,
)
from .kernels import ImportanceSampledRFF, ParticleKernelClassifier, ParticleKernelSampler
from .neighbors import KNNAttentionRegressor
from .sequence import (  # noqa: F401 (ParticleAttentionClassifier: the former name)
    ParticleAttentionClassifier,
    SequenceAttentionClassifier,
    SequenceVectorizer,
)

__version__ = "0.1.0.dev0"

__all__ = [
    "ImportanceSampledRFF",
    "KMeansCircuit",
    "KNNAttentionRegressor",
    "ParticleKernelClassifier",
    "ParticleKernelSampler",
    "RobustTransformerKMeans",
    "SequenceAttentionClassifier",
    "SequenceVectorizer",
    "SphericalTransformerKMeans",
    "TransformerKMeans",
    "TransformerKMedoids",
    "TrimmedTransformerKMeans",
    "__version__",
]
