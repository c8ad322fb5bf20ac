"""Sequence models: the attention block (linear attention whose kernel is made of
particles, kNN attention, or softmax attention), an encoder built from it, the estimator
that trains it (phase A particles, phase B the rest), and the step that turns text into
the token sequences it reads."""

from ._classifier import (  # noqa: F401 (ParticleAttentionClassifier: the former name)
    ParticleAttentionClassifier,
    SequenceAttentionClassifier,
)
from ._encoder import SequenceEncoder
from ._linear import KernelAttention
from ._vectorizer import SequenceVectorizer

__all__ = ["KernelAttention", "SequenceAttentionClassifier", "SequenceEncoder",
           "SequenceVectorizer"]
