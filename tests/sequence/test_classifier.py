"""SequenceAttentionClassifier: phases A and B, inputs, and the conventions."""

import numpy as np
import pytest
import torch

from sktransformer import SequenceAttentionClassifier
from sktransformer.datasets import make_order_task, make_parity_task


def _clf(**kw):
    params = dict(max_epochs=25, n_iter=30, random_state=0, device="cpu")
    params.update(kw)
    return SequenceAttentionClassifier(**params)


@pytest.mark.parametrize("attention, features", [("kernel", "learned"), ("kernel", "fixed"),
                                                 ("softmax", "learned")])
def test_it_learns_a_task_that_needs_attention(attention, features):
    """Token 1 before token 2: at chance for any bag of tokens."""
    X, y = make_order_task(1200, length=16, random_state=0)
    Xt, yt = make_order_task(500, length=16, random_state=1)
    clf = _clf(attention=attention, features=features).fit(X, y)
    assert clf.score(Xt, yt) > 0.85
    assert len(clf.history_["val_loss"]) == clf.n_iter_
    seconds = np.asarray(clf.history_["seconds"])  # (wall clock since fit began)
    assert len(seconds) == clf.n_iter_ and (np.diff(seconds) > 0).all() and seconds[0] > 0


def test_positions_are_fixed_unit_sinusoids_and_norms_and_biases_not_decayed():
    from sktransformer.sequence._classifier import _decay_groups
    from sktransformer.sequence._encoder import sinusoidal_positions

    table = sinusoidal_positions(40, 7)
    torch.testing.assert_close(table.norm(dim=1), torch.ones(40))
    # relative positions: the encodings' inner products depend on the offset only
    gram = table @ table.T
    torch.testing.assert_close(torch.diagonal(gram, 3)[:20], torch.diagonal(gram, 3)[1:21],
                               atol=0.05, rtol=0)
    X, y = make_order_task(300, length=12, random_state=0)
    clf = _clf(max_epochs=3).fit(X, y)
    torch.testing.assert_close(clf.model_.position.weight, sinusoidal_positions(12, 32))
    decayed, free = _decay_groups(clf.model_, 0.5)
    assert decayed["weight_decay"] == 0.5 and free["weight_decay"] == 0.0
    norms = {id(p) for m in clf.model_.modules() if isinstance(m, torch.nn.LayerNorm)
             for p in m.parameters()}
    assert norms and norms <= {id(p) for p in free["params"]}
    assert all(p.dim() >= 2 for p in decayed["params"])
    everything = {id(p) for g in (decayed, free) for p in g["params"]}
    assert id(clf.model_.position.weight) not in everything
    assert id(clf.model_.embed.weight) in {id(p) for p in decayed["params"]}


def test_early_stopping_waits_until_the_model_beats_the_class_frequencies():
    # labels independent of the tokens: the validation loss never leaves chance, so
    # the patience never starts and every epoch runs; a learnable task stops early
    X, y = make_order_task(400, length=12, random_state=0)
    noise = np.random.default_rng(0).integers(0, 2, len(y))
    stuck = _clf(max_epochs=12, n_iter_no_change=2, features="fixed").fit(X, noise)
    assert stuck.n_iter_ == 12
    learns = _clf(max_epochs=60, n_iter_no_change=2, features="fixed").fit(X, y)
    assert learns.n_iter_ < 60


def test_phase_a_raises_the_alignment_and_moves_only_the_learned_particles():
    X, y = make_order_task(600, length=16, random_state=0)
    learned = _clf(max_epochs=4, warmup_epochs=2).fit(X, y)
    fixed = _clf(max_epochs=4, warmup_epochs=2, features="fixed").fit(X, y)
    (history,) = learned.history_["phase_a"]
    assert history["alignment"][-1] > 1.2 * history["alignment"][0]
    assert fixed.history_["phase_a"] == []
    a = learned.model_.blocks[0].attention.particles
    b = fixed.model_.blocks[0].attention.particles
    assert not torch.allclose(a, b)
    # phase B never moves particles: after 1 or 4 epochs, the fixed ones are the same draw
    start = _clf(max_epochs=1, features="fixed").fit(X, y).model_.blocks[0].attention.particles
    torch.testing.assert_close(start, b)


def test_seeded_and_the_global_generator_untouched():
    X, y = make_parity_task(300, length=10, random_state=0)
    state = torch.random.get_rng_state()
    a = _clf(max_epochs=3).fit(X, y).predict_proba(X)
    b = _clf(max_epochs=3).fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(a, b)
    assert torch.equal(state, torch.random.get_rng_state())
    np.testing.assert_allclose(a.sum(1), 1.0, rtol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
def test_float_sequences_and_causal_attention(causal):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 8, 3)).astype(np.float32)
    y = (X[:, :, 0].sum(1) > 0).astype(int)
    clf = _clf(causal=causal, n_layers=2).fit(X, y)
    assert clf.score(X, y) > 0.9
    assert clf.predict(X[:5]).shape == (5,)
    with pytest.raises(ValueError, match="not of the kind seen in fit"):
        clf.predict(X[:5, :, :2])


def test_bad_inputs_are_clear_errors_and_unseen_tokens_share_an_id():
    X, y = make_order_task(200, length=8, random_state=0)
    clf = _clf(max_epochs=2).fit(X, y)
    with pytest.raises(ValueError, match="non-negative"):
        clf.predict(-X)
    with pytest.raises(ValueError, match="not of the kind seen in fit"):
        clf.predict(X.astype(float))
    with pytest.raises(ValueError, match="NaN"):
        _clf().fit(np.full((20, 4), np.nan), np.arange(20) % 2)
    with pytest.raises(ValueError, match="1 class"):
        _clf().fit(X, np.zeros(len(X)))
    big = X.copy()
    big[big > 2] = 999  # ids never seen in training
    assert clf.predict_proba(big).shape == (len(X), 2)


def test_verbose_shows_the_phases_and_epochs(capsys):
    X, y = make_order_task(200, length=8, random_state=0)
    _clf(max_epochs=3, warmup_epochs=1, n_iter=5, verbose=1).fit(X, y)
    err = capsys.readouterr().err
    assert "phase A, block 0" in err and "epochs" in err


@pytest.mark.parametrize("gradient", ["exact", "sampled"])
def test_knn_attention_in_the_classifier(gradient):
    X, y = make_order_task(400, length=16, random_state=0)
    Xt, yt = make_order_task(200, length=16, random_state=1)
    # (360 training sequences: about 20 epochs at chance before the model starts)
    clf = _clf(attention="knn", n_neighbors=4, gradient=gradient, max_epochs=40)
    assert clf.fit(X, y).score(Xt, yt) > 0.85
    assert clf.history_["phase_a"] == []  # particles belong to the kernel attention
    again = _clf(attention="knn", n_neighbors=4, gradient=gradient, max_epochs=40).fit(X, y)
    np.testing.assert_array_equal(again.predict_proba(Xt), clf.predict_proba(Xt))


def test_the_former_name_warns_and_fits_the_same():
    import sktransformer
    from sktransformer import ParticleAttentionClassifier

    X, y = make_order_task(100, length=8, random_state=0)
    with pytest.warns(FutureWarning, match="renamed SequenceAttentionClassifier"):
        old = ParticleAttentionClassifier(max_epochs=2, n_iter=5, random_state=0,
                                          device="cpu")
    new = _clf(max_epochs=2, n_iter=5)
    assert isinstance(old, SequenceAttentionClassifier)
    assert old.get_params() == new.get_params()
    np.testing.assert_array_equal(old.fit(X, y).predict_proba(X),
                                  new.fit(X, y).predict_proba(X))
    assert "ParticleAttentionClassifier" not in sktransformer.__all__
