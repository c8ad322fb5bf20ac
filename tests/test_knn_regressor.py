"""KNNAttentionRegressor: kNN attention over the training set with a learned projection."""

import pickle

import numpy as np
import pytest
import torch
from sklearn.datasets import make_friedman1
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.neighbors import KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sktransformer import KNNAttentionRegressor


def test_identity_projection_is_softmax_weighted_knn_on_standardized_data():
    X, y = make_friedman1(200, random_state=0)
    reg = KNNAttentionRegressor(5, temperature=0.5, max_iter=0, device="cpu").fit(X, y)
    Xs = (X - X.mean(0)) / X.std(0)
    Xq = Xs[:7] + 0.05
    d2 = ((Xq[:, None] - Xs[None]) ** 2).sum(-1)
    top = np.argsort(d2, 1)[:, :5]
    w = np.exp(-np.take_along_axis(d2, top, 1) / 0.5)
    w /= w.sum(1, keepdims=True)
    expected = (w * y[top]).sum(1)
    got = reg.predict(Xq * X.std(0) + X.mean(0))
    np.testing.assert_allclose(got, expected, rtol=1e-8)


def test_learned_projection_beats_distance_weighted_knn_on_friedman1():
    X, y = make_friedman1(400, random_state=0)
    cv = KFold(5, shuffle=True, random_state=0)
    ours = cross_val_score(KNNAttentionRegressor(random_state=0, device="cpu"), X, y,
                           cv=cv).mean()
    knn = cross_val_score(make_pipeline(StandardScaler(), KNeighborsRegressor(
        16, weights="distance")), X, y, cv=cv).mean()
    assert ours > knn + 0.1


def test_training_lowers_the_leave_one_out_loss_and_is_seeded():
    X, y = make_friedman1(300, random_state=1)
    a = KNNAttentionRegressor(random_state=0, device="cpu").fit(X, y)
    b = KNNAttentionRegressor(random_state=0, device="cpu").fit(X, y)
    assert a.loss_curve_[-1] < 0.7 * a.loss_curve_[0]
    np.testing.assert_array_equal(a.projection_, b.projection_)


def test_exact_training_matches_a_hand_written_leave_one_out_loss():
    """The first step's loss is the top-k leave-one-out error at the identity projection."""
    X, y = make_friedman1(120, random_state=4)
    reg = KNNAttentionRegressor(6, temperature=2.0, max_iter=1, batch_size=None,
                                early_stopping=False, device="cpu").fit(X, y)
    Xs = (X - X.mean(0)) / X.std(0)
    ys = (y - y.mean()) / y.std()
    d2 = ((Xs[:, None] - Xs[None]) ** 2).sum(-1)
    np.fill_diagonal(d2, np.inf)
    top = np.argsort(d2, 1)[:, :6]
    w = np.exp(-np.take_along_axis(d2, top, 1) / 2.0)
    w /= w.sum(1, keepdims=True)
    loo = ((w * ys[top]).sum(1) - ys) ** 2
    np.testing.assert_allclose(reg.loss_curve_[0], loo.mean(), rtol=1e-10)


def test_early_stopping_keeps_the_best_projection_of_the_held_out_rows():
    # pure-noise targets: the held-out error falls at first (a shrinking projection
    # averages more neighbours), then rises as the projection overfits: learning stops
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 10)), rng.normal(size=300)
    reg = KNNAttentionRegressor(random_state=0, device="cpu").fit(X, y)
    curve, tol, wait = reg.validation_loss_curve_, reg.tol, reg.n_iter_no_change
    assert len(curve) == reg.n_iter_ + 1 and reg.n_iter_ < reg.max_iter
    assert reg.best_validation_loss_ == min(curve)
    # stopped after `wait` steps that each failed to beat the best before them by tol
    assert all(curve[i] > min(curve[:i]) - tol for i in range(len(curve) - wait, len(curve)))
    assert curve[-wait - 1] <= min(curve[:-wait - 1]) - tol
    # the projection kept is the best step's: the same fit stopped there gives it
    best = int(np.argmin(curve))
    assert 0 < best < reg.n_iter_
    stopped = KNNAttentionRegressor(random_state=0, max_iter=best, n_iter_no_change=1000,
                                    device="cpu").fit(X, y)
    np.testing.assert_array_equal(stopped.projection_, reg.projection_)
    assert reg._keys.shape == (300, 10)  # and it predicts from every training row
    # informative features: the held-out error falls well below the identity's
    X, y = make_friedman1(400, random_state=0)
    reg = KNNAttentionRegressor(random_state=0, device="cpu").fit(X, y)
    assert reg.best_validation_loss_ < 0.7 * reg.validation_loss_curve_[0]


def test_without_early_stopping_every_step_runs_on_every_row():
    X, y = make_friedman1(100, random_state=0)
    reg = KNNAttentionRegressor(max_iter=7, early_stopping=False, device="cpu").fit(X, y)
    assert reg.n_iter_ == 7 and reg.validation_loss_curve_ is None
    assert reg.best_validation_loss_ is None
    # two rows: nothing to hold out (two to learn from, one held out at least)
    tiny = KNNAttentionRegressor(max_iter=3, device="cpu").fit(X[:2], y[:2])
    assert tiny.n_iter_ == 3 and tiny.validation_loss_curve_ is None
    three = KNNAttentionRegressor(max_iter=3, device="cpu").fit(X[:3], y[:3])
    assert len(three.validation_loss_curve_) == three.n_iter_ + 1


def test_sampled_gradients_train_as_well_as_exact_ones():
    """Descent with the random-walk gradients gets close to the held-out R^2 of exact
    top-k gradients (same steps, same minibatches): 0.908 vs 0.924 here, from 0.666.
    They descend the full-softmax leave-one-out loss, while ``predict`` (truncated) and
    the exact gradients use the top-k one; the attention tests compare equal objectives."""
    X, y = make_friedman1(600, random_state=5)
    X_test, y_test = make_friedman1(300, random_state=6)
    scores = {}
    for gradient in ("exact", "sampled"):
        reg = KNNAttentionRegressor(gradient=gradient, max_iter=150, n_samples=64,
                                    random_state=0, device="cpu").fit(X, y)
        scores[gradient] = reg.score(X_test, y_test)
    start = KNNAttentionRegressor(max_iter=0, device="cpu").fit(X, y).score(X_test, y_test)
    assert scores["exact"] > start + 0.2
    assert scores["sampled"] > scores["exact"] - 0.03


@pytest.mark.parametrize("estimator", ["tail", "gumbel"])
def test_sampled_estimators_approach_the_truncated_prediction(estimator):
    X, y = make_friedman1(300, random_state=2)
    reg = KNNAttentionRegressor(random_state=0, device="cpu", max_iter=20).fit(X, y)
    exact = reg.predict(X[:30])
    sampled = reg.set_params(approximation=estimator, n_samples=512).predict(X[:30])
    assert np.abs(sampled - exact).mean() < 0.25 * np.abs(y - y.mean()).mean()


def test_multi_output_grid_search_and_cpu_pickle(monkeypatch):
    X, y = make_friedman1(200, random_state=3)
    Y = np.column_stack([y, -2 * y])
    reg = KNNAttentionRegressor(max_iter=10, random_state=0, device="cpu").fit(X, Y)
    pred = reg.predict(X[:5])
    assert pred.shape == (5, 2)
    np.testing.assert_allclose(pred[:, 1], -2 * pred[:, 0], rtol=1e-8)
    search = GridSearchCV(KNNAttentionRegressor(max_iter=5, device="cpu"),
                          {"n_neighbors": [4, 16], "temperature": [1.0, 4.0]}, cv=2).fit(X, y)
    assert set(search.best_params_) == {"n_neighbors", "temperature"}
    for name, value in vars(reg).items():
        assert not isinstance(value, torch.Tensor), name
    loaded = pickle.loads(pickle.dumps(reg))
    np.testing.assert_array_equal(loaded.predict(X[:5]), pred)


def test_bad_input():
    X, y = make_friedman1(50, random_state=0)
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        KNNAttentionRegressor(device="cpu").fit(bad, y)
    with pytest.raises(ValueError, match="leave-one-out needs at least 2 samples"):
        KNNAttentionRegressor(device="cpu").fit(X[:1], y[:1])
    reg = KNNAttentionRegressor(max_iter=2, device="cpu").fit(X, y)
    with pytest.raises(ValueError, match="X has 3 features"):
        reg.predict(X[:, :3])
