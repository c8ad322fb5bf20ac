"""Coulomb particle kernels: the energy, the dynamics, the estimators."""

import math
import pickle

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.datasets import load_iris, make_classification, make_moons
from sklearn.linear_model import LogisticRegression, RidgeClassifier
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline

from sktransformer.attention import FEATURE_MAPS, features, initial_particles
from sktransformer.kernels import (
    ImportanceSampledRFF,
    ParticleKernelClassifier,
    ParticleKernelSampler,
)
from sktransformer.kernels._hamiltonian import alignment, hamiltonian, target_codes
from sktransformer.kernels._importance import chi_square_tilt
from sktransformer.kernels._langevin import project_to_ball
from sktransformer.utils import DeviceWarning


def _problem(n=60, d=3, N=8, n_classes=2, kernel="rff", seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    y = torch.randint(0, n_classes, (n,), generator=g)
    W, b = initial_particles(kernel, N, d, gamma=0.5, generator=g)
    return X, target_codes(y, n_classes), W, b


# -- the energy -----------------------------------------------------------------------------

@pytest.mark.parametrize("kernel", FEATURE_MAPS)
@pytest.mark.parametrize("kind", ["uncentered", "centered", "normalized"])
@pytest.mark.parametrize("s", [0.0, 1.0, 2.5])
def test_gradient_of_h_matches_finite_differences(kernel, kind, s):
    X, Y, W, b = _problem(kernel=kernel, n_classes=3)

    def H(W):
        Phi = features(kernel, X, W, b)
        return hamiltonian(Phi, Y, W, repulsion=0.3, s=s, eps=0.1, kind=kind)[0]

    W = W.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(H(W), W)
    h = 1e-6
    numeric = torch.zeros_like(W)
    with torch.no_grad():
        for idx in np.ndindex(*W.shape):
            e = torch.zeros_like(W)
            e[idx] = h
            numeric[idx] = (H(W + e) - H(W - e)) / (2 * h)
    torch.testing.assert_close(grad, numeric, rtol=1e-5, atol=1e-8)


def test_alignment_by_features_equals_the_kernel_matrix_definition():
    X, Y, W, b = _problem(n_classes=2)
    Phi = features("rff", X, W, b)
    K, n = Phi @ Phi.T, len(X)
    T = Y @ Y.T
    assert float(alignment(Phi, Y, "uncentered")) == pytest.approx(float((K * T).sum()) / n**2)
    H = torch.eye(n, dtype=K.dtype) - 1.0 / n
    Kc, Tc = H @ K @ H, H @ T @ H
    assert float(alignment(Phi, Y, "centered")) == pytest.approx(float((Kc * Tc).sum()) / n**2)
    cosine = float((Kc * Tc).sum() / (Kc.norm() * Tc.norm()))
    assert float(alignment(Phi, Y, "normalized")) == pytest.approx(cosine)
    # binary codes: Y Y^T is y y^T / 2 with y = +-1
    y = torch.where(Y[:, 0] > 0, 1.0, -1.0).double()
    torch.testing.assert_close(T, torch.outer(y, y) / 2)


def test_rff_features_approximate_the_rbf_kernel():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(20, 3, generator=g, dtype=torch.float64)
    W, b = initial_particles("rff", 20000, 3, gamma=0.5, generator=g)
    Phi = features("rff", X, W, b)
    exact = torch.exp(-0.5 * torch.cdist(X, X).square())
    torch.testing.assert_close(Phi @ Phi.T, exact, atol=0.03, rtol=0)


def test_projection_onto_the_ball():
    W = torch.tensor([[3.0, 4.0], [0.3, 0.4]])
    torch.testing.assert_close(project_to_ball(W, 1.0), torch.tensor([[0.6, 0.8], [0.3, 0.4]]))


# -- the dynamics --------------------------------------------------------------------------

def test_without_repulsion_or_noise_the_alignment_climbs_monotonically():
    X, y = make_moons(300, noise=0.2, random_state=0)
    sampler = ParticleKernelSampler(16, gamma=1.0, learn_bandwidth=False, repulsion=0.0,
                                    beta=math.inf, n_iter=100, step_size=0.2, random_state=0,
                                    device="cpu").fit(X, y)
    a = np.array(sampler.history_["alignment"])
    assert np.all(np.diff(a) >= -1e-12)
    assert a[-1] > 1.5 * a[0]
    np.testing.assert_allclose(sampler.history_["hamiltonian"], -a)


def test_repulsion_keeps_the_particles_apart():
    X, y = make_moons(300, noise=0.2, random_state=0)
    common = dict(gamma=1.0, learn_bandwidth=False, n_iter=300, step_size=0.5,
                  random_state=0, device="cpu")
    free = ParticleKernelSampler(16, repulsion=0.0, **common).fit(X, y)
    held = ParticleKernelSampler(16, repulsion=1.0, eps=1e-2, **common).fit(X, y)
    start = held.history_["min_distance"][0]
    assert min(free.history_["min_distance"]) < 0.1 * start  # alignment alone collapses them
    assert min(held.history_["min_distance"]) > 0.3 * start
    assert held.history_["repulsion"][-1] < free.history_["repulsion"][-1]


def test_langevin_noise_radius_and_minibatches():
    X, y = make_moons(200, noise=0.2, random_state=1)
    noisy = ParticleKernelSampler(8, beta=10.0, radius=2.0, batch_size=50, n_iter=50,
                                  n_iter_no_change=None, random_state=0, device="cpu").fit(X, y)
    # the ball is in the particles' own units: w / (sqrt(2 gamma) scale), up to float32
    # rounding (the dynamics of "rff" run in float32)
    units = math.sqrt(2 * noisy.gamma_) * noisy.scale_
    assert np.linalg.norm(noisy.particles_ / units, axis=1).max() <= 2.0 * (1 + 1e-6)
    again = ParticleKernelSampler(8, beta=10.0, radius=2.0, batch_size=50, n_iter=50,
                                  n_iter_no_change=None, random_state=0, device="cpu").fit(X, y)
    np.testing.assert_array_equal(noisy.particles_, again.particles_)
    assert len(noisy.history_["alignment"]) == 51


def test_early_stopping_ends_where_the_best_is_n_iter_no_change_old():
    X, y = make_moons(300, noise=0.3, random_state=0)
    full = ParticleKernelSampler(16, n_iter=100, n_iter_no_change=None, random_state=0,
                                 device="cpu").fit(X, y)
    early = ParticleKernelSampler(16, n_iter=100, n_iter_no_change=20, random_state=0,
                                  device="cpu").fit(X, y)
    stop = early.history_["validation_step"][-1]
    assert stop < 100 and stop - early.best_iter_ == 20
    assert len(early.history_["alignment"]) == stop + 1
    assert len(full.history_["alignment"]) == 101
    # the same run up to the stop, and the same particles kept
    np.testing.assert_allclose(early.history_["alignment"],
                               full.history_["alignment"][:stop + 1])
    assert full.best_iter_ == early.best_iter_
    np.testing.assert_allclose(early.particles_, full.particles_)


def test_n_iter_zero_is_rbfsampler_like():
    X, y = make_moons(100, random_state=0)
    s = ParticleKernelSampler(4000, gamma=0.7, n_iter=0, learn_bandwidth=False,
                              random_state=0, device="cpu")
    Z = s.fit_transform(X, y)
    exact = np.exp(-0.7 * ((X[:, None] - X[None]) ** 2).sum(-1))
    assert np.abs(Z @ Z.T - exact).max() < 0.1


# -- the estimators ------------------------------------------------------------------------

@pytest.mark.parametrize("kernel", FEATURE_MAPS)
def test_learned_features_beat_fixed_ones_at_a_small_budget(kernel):
    X, y = make_classification(400, n_features=8, n_informative=4, flip_y=0.05,
                               random_state=0)
    X = (X - X.mean(0)) / X.std(0)
    alignment_kind = "normalized" if kernel in ("favor+", "softmax") else "centered"
    learned = ParticleKernelClassifier(16, kernel=kernel, gamma=0.1, alignment=alignment_kind,
                                       random_state=0, device="cpu")
    fixed = clone(learned).set_params(n_iter=0)
    a = cross_val_score(learned, X, y, cv=3).mean()
    b = cross_val_score(fixed, X, y, cv=3).mean()
    assert a > b


def test_classifier_api_multiclass_and_other_estimators():
    X, y = load_iris(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    clf = ParticleKernelClassifier(32, gamma=0.5, random_state=0, device="cpu").fit(X, y)
    assert list(clf.classes_) == [0, 1, 2]
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(1), 1)
    np.testing.assert_array_equal(proba.argmax(1), clf.predict(X))
    assert clf.decision_function(X).shape == (150, 3)
    assert clf.score(X, y) > 0.9
    ridge = ParticleKernelClassifier(32, estimator=RidgeClassifier(), random_state=0,
                                     device="cpu").fit(X, y)
    assert not hasattr(ridge, "predict_proba")
    assert ridge.decision_function(X).shape == (150, 3)
    named = ParticleKernelClassifier(8, random_state=0, device="cpu").fit(
        X, np.array(["setosa", "versicolor", "virginica"])[y])
    assert set(named.predict(X)) <= {"setosa", "versicolor", "virginica"}


def test_grid_search_over_budget_repulsion_and_beta():
    X, y = make_moons(200, noise=0.2, random_state=0)
    search = GridSearchCV(ParticleKernelClassifier(n_iter=30, random_state=0, device="cpu"),
                          {"n_components": [8, 16], "repulsion": [0.0, 0.5],
                           "beta": [math.inf, 100.0]}, cv=2).fit(X, y)
    assert set(search.best_params_) == {"n_components", "repulsion", "beta"}
    pipe = make_pipeline(ParticleKernelSampler(16, random_state=0, device="cpu"),
                         LogisticRegression())
    assert pipe.fit(X, y).score(X, y) > 0.8


@pytest.mark.parametrize("cls", [ParticleKernelSampler, ParticleKernelClassifier,
                                 ImportanceSampledRFF])
def test_bad_input_is_a_clear_error(cls):
    X, y = make_moons(50, random_state=0)
    with pytest.raises(ValueError, match="number of classes has to be greater than one"):
        cls(4).fit(X, np.zeros(50))
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        cls(4).fit(bad, y)
    est = cls(4, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="X has 3 features"):
        (est.predict if hasattr(est, "predict") else est.transform)(np.ones((2, 3)))
    with pytest.raises(ValueError, match="Unknown label type"):
        cls(4).fit(X, np.linspace(0, 1, 50))


def test_cossin_needs_an_even_budget_and_pickles_with_numpy_state(monkeypatch):
    X, y = make_moons(80, random_state=0)
    with pytest.raises(ValueError, match="must be even"):
        ParticleKernelSampler(5, kernel="rff_cossin").fit(X, y)
    s = ParticleKernelSampler(6, kernel="rff_cossin", random_state=0, device="cpu").fit(X, y)
    assert s.transform(X).shape == (80, 6) and s.particles_.shape == (3, 2)
    for name, value in vars(s).items():
        assert not isinstance(value, torch.Tensor), name
    s.set_params(device="cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    loaded = pickle.loads(pickle.dumps(s))
    with pytest.warns(DeviceWarning):
        np.testing.assert_array_equal(loaded.transform(X), s.set_params(
            device="cpu").transform(X))


def test_chi_square_tilt():
    v = torch.tensor([0.1, 0.5, 0.2, 3.0, 0.0], dtype=torch.float64)
    for rho in (0.0, 0.1, 1.0):
        q = chi_square_tilt(v, rho)
        assert float(q.sum()) == pytest.approx(1.0) and (q >= 0).all()
        divergence = float(5 * (q - 0.2).square().sum())
        assert divergence == pytest.approx(rho, abs=1e-6)
    assert int(chi_square_tilt(v, 100.0).argmax()) == 3
    assert float(chi_square_tilt(v, 100.0).max()) == pytest.approx(1.0)


def test_importance_sampling_tilts_toward_aligned_candidates():
    X, y = make_moons(300, noise=0.2, random_state=0)
    flat = ImportanceSampledRFF(16, gamma=1.0, rho=0.0, random_state=0).fit(X, y)
    np.testing.assert_allclose(flat.weights_, 1 / 160)
    tilted = ImportanceSampledRFF(16, gamma=1.0, rho=5.0, random_state=0).fit(X, y)
    assert tilted.weights_.max() > 5 / 160
    assert tilted.transform(X).shape == (300, 16)
    # what the tilt buys: sampled features better aligned with the labels (on average over
    # draws; whether that helps the classifier is for benchmarks/bench_particle_kernel.py)
    Y = target_codes(torch.as_tensor(y), 2)

    def mean_alignment(rho):
        return np.mean([float(alignment(torch.from_numpy(
            ImportanceSampledRFF(16, gamma=1.0, rho=rho, random_state=s).fit_transform(X, y)),
            Y, "uncentered")) for s in range(5)])

    assert mean_alignment(5.0) > 1.5 * mean_alignment(0.0)


def test_orthogonal_rows_are_uniform_directions():
    """Orthogonal random features are unbiased: E[exp(w.x - |x|^2/2)] = 1 for Gaussian-norm
    rows in uniform directions. Q of a QR needs the signs of R's diagonal for that; without
    them the mean stayed 7% off however many rows were drawn."""
    from sktransformer.attention import orthogonal_gaussian

    g = torch.Generator().manual_seed(0)
    W = orthogonal_gaussian(1 << 16, 8, generator=g)
    x = torch.full((8,), 0.4, dtype=torch.float64)
    mean = torch.exp(W @ x - 0.5 * x.square().sum()).mean()
    assert abs(float(mean) - 1.0) < 0.01
    torch.testing.assert_close(W.T @ W / len(W), torch.eye(8, dtype=torch.float64),
                               atol=0.02, rtol=0)


# -- closed-form gradients, defaults, held-out selection --------------------------------------

@pytest.mark.parametrize("kernel", FEATURE_MAPS)
@pytest.mark.parametrize("kind", ["uncentered", "centered", "normalized"])
@pytest.mark.parametrize("s", [0.0, 1.0])
def test_closed_form_potential_matches_autograd_of_the_hamiltonian(kernel, kind, s):
    from sktransformer.attention import favor_offset
    from sktransformer.kernels._hamiltonian import potential, riesz_energy

    X, Y, U, b = _problem(kernel=kernel, n_classes=3)
    scale = 0.7
    offset = favor_offset(X, U * scale) if kernel == "favor+" else 0.0
    U = U.clone().requires_grad_(True)
    a = alignment(features(kernel, X, U * scale, b, offset=offset), Y, kind)
    h = -a + 0.3 * riesz_energy(U, s, 0.1)  # the repulsion in the particles' own units
    (expected,) = torch.autograd.grad(h, U)
    H, A, E, grad = potential(kernel, X, U.detach(), b, Y, scale=scale, offset=offset,
                              repulsion=0.3, s=s, eps=0.1, kind=kind)
    assert float(H) == pytest.approx(float(h.detach()), rel=1e-10)
    torch.testing.assert_close(grad, expected, rtol=1e-8, atol=1e-12)


def test_gamma_scale_is_scikit_learns():
    X, y = make_moons(120, random_state=0)
    X = X * 7.0
    for est in (ParticleKernelSampler(8, n_iter=0, random_state=0, device="cpu"),
                ImportanceSampledRFF(8, random_state=0)):
        assert est.fit(X, y).gamma_ == pytest.approx(1.0 / (2 * X.var()))


def test_fit_without_labels_draws_rbfsamplers_fixed_features():
    X, _ = make_moons(100, random_state=0)
    sampler = ParticleKernelSampler(4000, random_state=0, device="cpu").fit(X)
    assert not hasattr(sampler, "classes_") and sampler.history_ == {}
    Z = sampler.transform(X)
    exact = np.exp(-sampler.gamma_ * ((X[:, None] - X[None]) ** 2).sum(-1))
    assert np.abs(Z @ Z.T - exact).max() < 0.1
    pipe = make_pipeline(ParticleKernelSampler(16, random_state=0, device="cpu"))
    assert pipe.fit_transform(X).shape == (100, 16)  # an unsupervised pipeline works


def test_float32_stays_float32():
    X, y = make_moons(150, noise=0.2, random_state=0)
    X32 = X.astype(np.float32)
    sampler = ParticleKernelSampler(16, random_state=0, device="cpu").fit(X32, y)
    assert sampler.particles_.dtype == np.float32
    assert sampler.transform(X32).dtype == np.float32
    clf = ParticleKernelClassifier(16, random_state=0, device="cpu").fit(X32, y)
    assert clf.predict_proba(X32).shape == (150, 2) and clf.score(X32, y) > 0.85


@pytest.mark.parametrize("factor", [0.01, 100.0])
def test_the_learned_bandwidth_recovers_from_a_gamma_100x_off(factor):
    X, y = make_classification(400, n_features=10, n_informative=5, random_state=0)
    X = (X - X.mean(0)) / X.std(0)
    good = ParticleKernelClassifier(32, random_state=0, device="cpu")
    bad = clone(good).set_params(gamma=factor / 10)
    stuck = clone(bad).set_params(learn_bandwidth=False)
    scores = [cross_val_score(m, X, y, cv=3).mean() for m in (good, bad, stuck)]
    assert scores[1] > scores[0] - 0.02
    assert scores[2] < scores[1] - (0.05 if factor > 1 else 0.01)
    fitted = clone(bad).fit(X, y).sampler_
    assert (fitted.scale_ > 4) if factor < 1 else (fitted.scale_ < 0.25)


def test_the_dynamics_never_see_the_validation_rows(monkeypatch):
    from sktransformer.kernels import _particles

    X, y = make_moons(200, noise=0.2, random_state=0)
    val = np.arange(0, 200, 5)
    split = (np.setdiff1d(np.arange(200), val), val)
    monkeypatch.setattr(_particles, "validation_split", lambda *args: split)
    sampler = ParticleKernelSampler(8, gamma=1.0, learn_bandwidth=False, random_state=0,
                                    device="cpu")
    a = clone(sampler).fit(X, y)
    X2 = X.copy()
    X2[val] = np.random.default_rng(0).normal(size=(len(val), 2)) * 5
    b = clone(sampler).fit(X2, y)
    np.testing.assert_allclose(a.history_["alignment"], b.history_["alignment"])
    assert a.history_["validation_error"] != b.history_["validation_error"]


def test_the_classifier_picks_C_on_held_out_rows_and_checks_Cs():
    X, y = make_moons(200, noise=0.3, random_state=0)
    clf = ParticleKernelClassifier(16, Cs=[0.01, 1.0, 100.0], random_state=0,
                                   device="cpu").fit(X, y)
    assert clf.C_ in (0.01, 1.0, 100.0) and clf.estimator_.C == clf.C_
    assert ParticleKernelClassifier(16, Cs=[3.0], random_state=0,
                                    device="cpu").fit(X, y).estimator_.C == 3.0
    with pytest.raises(ValueError, match="Cs must be positive finite numbers"):
        ParticleKernelClassifier(16, Cs=[1.0, -1.0]).fit(X, y)


def _path_losses(Z, y, train, val, Cs):
    """Every C's validation log loss, each fitted from scratch (the reference)."""
    losses = []
    for C in Cs:
        model = LogisticRegression(C=C, solver="newton-cg", max_iter=1000)
        proba = model.fit(Z[train], y[train]).predict_proba(Z[val])
        losses.append(-np.log(np.clip(proba[np.arange(len(val)), y[val]], 1e-15, 1)).mean())
    return np.array(losses)


@pytest.mark.parametrize("seed", range(6))
def test_the_C_search_finds_the_grids_best_on_a_one_dipped_path(seed):
    from sktransformer.kernels._selection import choose_C, refit_from

    X, y = make_classification(300, 20, n_informative=6, n_classes=2 + seed % 2,
                               flip_y=0.05 * seed, random_state=seed)
    train, val = np.arange(240), np.arange(240, 300)
    Cs = (0.001, 0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)
    reference = _path_losses(X, y, train, val, Cs)
    C, losses, start = choose_C(LogisticRegression(solver="newton-cg", max_iter=1000), X, y,
                                train, val, Cs)
    fitted = ~np.isnan(losses)
    assert fitted.sum() < len(Cs)  # the walk stops before the grid's end
    # the losses it saw are the reference's (up to the warm starts' tolerance)
    np.testing.assert_allclose(np.array(losses)[fitted], reference[fitted], rtol=1e-3)
    dips = np.sum(np.diff(np.sign(np.diff(reference))) > 0)
    if dips <= 1:  # one-dipped (or monotone): the whole grid's best (a flat end's tie
        # within the solver's tolerance may go to the smaller C)
        assert reference[Cs.index(C)] <= reference.min() * (1 + 1e-4)
    # the refit from the chosen fit's solution is the cold refit, up to the solver's tol
    warm = refit_from(LogisticRegression(C=C, solver="newton-cg", max_iter=1000), X, y, start)
    cold = LogisticRegression(C=C, solver="newton-cg", max_iter=1000).fit(X, y)
    assert not warm.warm_start
    np.testing.assert_allclose(warm.predict_proba(X), cold.predict_proba(X), atol=1e-3)


def test_ridge_validation_error_stacked_equals_each_and_the_normal_equations():
    from sktransformer.kernels._selection import PENALTIES, ridge_validation_error

    g = torch.Generator().manual_seed(0)
    Phi = torch.rand(3, 80, 12, generator=g, dtype=torch.float64)
    Y = torch.randn(80, 2, generator=g, dtype=torch.float64)
    train, val = slice(0, 60), slice(60, 80)
    stacked = ridge_validation_error(Phi[:, train], Y[train], Phi[:, val], Y[val])
    for s, error in enumerate(stacked):
        assert error == pytest.approx(ridge_validation_error(Phi[s, train], Y[train],
                                                             Phi[s, val], Y[val]))
        A, B = Phi[s, train].numpy(), Y[train].numpy()
        mean, y_mean = A.mean(0), B.mean(0)
        best = np.inf
        for lam in PENALTIES:
            coef = np.linalg.solve((A - mean).T @ (A - mean) + lam * 60 * np.eye(12),
                                   (A - mean).T @ (B - y_mean))
            pred = (Phi[s, val].numpy() - mean) @ coef + y_mean
            best = min(best, ((pred - Y[val].numpy()) ** 2).sum(1).mean())
        assert error == pytest.approx(best, rel=1e-6)
    bad = Phi[0].clone()
    bad[0, 0] = math.nan
    assert ridge_validation_error(bad[train], Y[train], bad[val], Y[val]) == math.inf


def test_rff_learns_the_same_on_shifted_and_scaled_data():
    # the dynamics run on centered rows at unit spread, in float32, and the phases move
    # back by the shift: data moved and scaled by a power of two is learned exactly alike
    X, y = make_moons(400, noise=0.25, random_state=0)
    a = ParticleKernelClassifier(32, random_state=0, device="cpu").fit(X, y)
    moved = X * 2.0**-10 + 3.0
    b = ParticleKernelClassifier(32, random_state=0, device="cpu").fit(moved, y)
    assert a.sampler_.particles_.dtype == b.sampler_.particles_.dtype == np.float64
    np.testing.assert_allclose(a.history_["alignment"], b.history_["alignment"])
    np.testing.assert_allclose(b.sampler_.particles_ * 2.0**-10, a.sampler_.particles_,
                               rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(b.sampler_.transform(moved), a.sampler_.transform(X),
                               atol=1e-6)
    # far from the origin the shift's rounding moves the (sensitive) trajectory, not
    # the quality: features finite, the same predictions almost everywhere
    far = X + 1e6
    c = ParticleKernelClassifier(32, random_state=0, device="cpu").fit(far, y)
    assert np.all(np.isfinite(c.sampler_.transform(far)))
    assert (a.predict(X) == c.predict(far)).mean() > 0.95 and c.score(far, y) > 0.9


def test_defaults_beat_rbfsampler_on_breast_cancer():
    from sklearn.datasets import load_breast_cancer
    from sklearn.kernel_approximation import RBFSampler
    from sklearn.preprocessing import StandardScaler

    X, y = load_breast_cancer(return_X_y=True)
    ours = make_pipeline(StandardScaler(), ParticleKernelClassifier(random_state=0,
                                                                    device="cpu"))
    theirs = make_pipeline(StandardScaler(), RBFSampler(gamma="scale", random_state=0),
                           LogisticRegression(max_iter=1000))
    assert (cross_val_score(ours, X, y, cv=3).mean() >
            cross_val_score(theirs, X, y, cv=3).mean() + 0.01)


def test_importance_scores_are_chunked(monkeypatch):
    from sktransformer.kernels import _importance

    X, y = make_moons(300, noise=0.2, random_state=0)
    whole = ImportanceSampledRFF(16, random_state=0).fit(X, y)
    monkeypatch.setattr(_importance, "chunk_rows", lambda n, columns: 7)
    chunked = ImportanceSampledRFF(16, random_state=0).fit(X, y)
    np.testing.assert_allclose(chunked.weights_, whole.weights_, rtol=1e-10)
    np.testing.assert_array_equal(chunked.particles_, whole.particles_)


def test_float32_and_float64_data_start_from_the_same_particles():
    from sktransformer import ParticleKernelSampler

    X, y = load_iris(return_X_y=True)
    fits = [ParticleKernelSampler(n_components=16, random_state=0, n_iter=20)
            .fit(X.astype(dtype), y) for dtype in (np.float64, np.float32)]
    # the same draws; the dynamics then see X rounded to float32 (they were 2.9 apart)
    assert np.abs(fits[0].particles_ - fits[1].particles_.astype(np.float64)).max() < 0.1
    start = [ParticleKernelSampler(n_components=16, random_state=0, n_iter=0)
             .fit(X.astype(dtype), y) for dtype in (np.float64, np.float32)]
    np.testing.assert_allclose(start[0].particles_, start[1].particles_, rtol=1e-6, atol=1e-6)
