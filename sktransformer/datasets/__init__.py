"""Task generators: distributions of clustering problems to train and evaluate circuits on."""

from ._gmm import make_gmm_tasks

__all__ = ["make_gmm_tasks"]
