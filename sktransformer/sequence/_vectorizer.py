"""Text to padded sequences of token ids: what a sequence model reads in a Pipeline."""

from numbers import Integral

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
)
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.utils.validation import check_is_fitted

from ..utils import Interval, fit_context

PAD, UNKNOWN = 0, 1


class SequenceVectorizer(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Turn documents into padded sequences of token ids, in the order of their words.

    Tokens are found as :class:`~sklearn.feature_extraction.text.CountVectorizer` finds
    them (``lowercase``, ``token_pattern``); the ``max_features`` most frequent tokens of the
    training documents get the ids ``2, 3, ...`` (most frequent first), every other token
    the id ``1`` (unknown), and each document becomes its first ``max_length`` ids, padded
    with ``0`` (the ``pad_id`` of :class:`~sktransformer.SequenceAttentionClassifier`) to
    ``length_``: ``max_length``, or the longest training document where that is shorter (a
    large ``max_length`` costs nothing beyond the data).

    Parameters
    ----------
    max_features : int or None, default=5000
        Vocabulary size (``None``: every token seen in fit).
    max_length : int, default=64
        Most tokens kept of a document (longer documents are cut).
    lowercase : bool, default=True
    token_pattern : str, default=r"(?u)\\b\\w\\w+\\b"
        What a token is (CountVectorizer's default).

    Attributes
    ----------
    vocabulary_ : dict of str to int
        Token to id (ids from 2).
    length_ : int
        Length of the output sequences: ``max_length``, or the number of tokens of the
        longest training document where that is smaller.
    n_features_in_ : int
        1 (one document per sample).

    Examples
    --------
    >>> from sktransformer.sequence import SequenceVectorizer
    >>> docs = ["A fine, fine film.", "Dull film"]
    >>> vectorizer = SequenceVectorizer(max_features=2, max_length=5).fit(docs)
    >>> vectorizer.vocabulary_
    {'film': 2, 'fine': 3}
    >>> vectorizer.transform(docs + ["fine film fine film"])  # "dull" is unknown (1)
    array([[3, 3, 2],
           [1, 2, 0],
           [3, 2, 3]])
    """

    _parameter_constraints = {
        "max_features": [None, Interval(Integral, 1, None, closed="left")],
        "max_length": [Interval(Integral, 1, None, closed="left")],
        "lowercase": ["boolean"],
        "token_pattern": [str],
    }

    def __init__(self, *, max_features=5000, max_length=64, lowercase=True,
                 token_pattern=r"(?u)\b\w\w+\b"):
        self.max_features = max_features
        self.max_length = max_length
        self.lowercase = lowercase
        self.token_pattern = token_pattern

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.string = True
        return tags

    def _tokens(self, documents):
        if isinstance(documents, (str, bytes)):
            raise ValueError("Iterable over raw text documents expected, string object "
                             "received.")
        documents = list(documents)
        for i, doc in enumerate(documents):
            if not isinstance(doc, str):
                raise ValueError(f"Document {i} is a {type(doc).__name__}, not a str; "
                                 f"SequenceVectorizer reads raw text.")
        analyze = CountVectorizer(lowercase=self.lowercase,
                                  token_pattern=self.token_pattern).build_analyzer()
        return [analyze(doc) for doc in documents]

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Learn the vocabulary of the documents ``X`` (an iterable of str)."""
        tokens = self._tokens(X)
        if not tokens:
            raise ValueError("Found 0 documents; fit needs at least one.")
        counts = {}
        for doc in tokens:
            for token in doc:
                counts[token] = counts.get(token, 0) + 1
        # most frequent first; ties in alphabetical order, so the ids are deterministic
        ranked = sorted(counts, key=lambda t: (-counts[t], t))[:self.max_features]
        self.vocabulary_ = {token: i + 2 for i, token in enumerate(ranked)}
        self.n_features_in_ = 1
        self.length_ = max(1, min(self.max_length, max(len(doc) for doc in tokens)))
        self._n_features_out = self.length_
        return self

    def transform(self, X):
        """Padded id sequences, ndarray of shape ``(n_documents, length_)``, int64."""
        check_is_fitted(self)
        tokens = self._tokens(X)
        out = np.zeros((len(tokens), self.length_), dtype=np.int64)
        for i, doc in enumerate(tokens):
            ids = [self.vocabulary_.get(t, UNKNOWN) for t in doc[:self.length_]]
            out[i, :len(ids)] = ids
        return out
