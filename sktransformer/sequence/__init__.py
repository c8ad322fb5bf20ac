"""Sequence models: linear attention whose kernel is made of particles, an encoder built
from it, and the estimator that trains it (phase A particles, phase B the rest)."""

from ._classifier import ParticleAttentionClassifier
from ._encoder import SequenceEncoder
from ._linear import KernelAttention, kernel_attention, positive_features

__all__ = ["KernelAttention", "ParticleAttentionClassifier", "SequenceEncoder",
           "kernel_attention", "positive_features"]
