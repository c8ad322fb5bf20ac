"""The default dynamics' compiled steps (kernels/_compiled.py) against the torch steps."""

import math

import numpy as np
import pytest
import torch
from sklearn.datasets import make_moons

from sktransformer.attention import initial_particles
from sktransformer.kernels import ParticleKernelSampler, _compiled, train_particles
from sktransformer.kernels._hamiltonian import target_codes

pytestmark = pytest.mark.skipif(_compiled._LOOPS.get() is None,
                                reason="numba's loops are not built here (the torch steps "
                                       "serve; nothing to compare)")


def _problem(dtype, n=120, d=5, N=16, n_classes=3, seed=0, spread=1.0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=torch.float64).to(dtype) * spread
    y = torch.randint(0, n_classes, (n,), generator=g)
    U, b = initial_particles("rff", N, d, gamma=0.5, generator=g, dtype=dtype)
    return X, target_codes(y, n_classes, dtype=dtype), U, b


def _both(monkeypatch, X, Y, U, b, **params):
    """The same run compiled and by torch: ``(U, history)`` of each."""
    runs = []
    for enabled in (True, False):
        monkeypatch.setattr(_compiled._LOOPS, "enabled", enabled)
        runs.append(train_particles("rff", X, Y, U, b, alignment="normalized",
                                    generator=torch.Generator().manual_seed(0), **params))
    return runs


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("params", [
    {},  # (the defaults: s = 1, repulsion 0.1, no ball)
    {"s": 0.0, "repulsion": 0.5, "radius": 1.5},
    {"s": 2.5, "eps": 0.1, "radius": 0.5, "step_size": 3.0},
    {"repulsion": 0.0, "scale": 2.0, "step_size": 0.5},
])
def test_the_compiled_steps_are_the_torch_steps(monkeypatch, dtype, params):
    X, Y, U, b = _problem(dtype)
    (ours, history), (theirs, expected) = _both(monkeypatch, X, Y, U, b, n_iter=30,
                                                **params)
    assert ours.dtype == dtype and ours.shape == U.shape
    rtol = 1e-4 if dtype == torch.float32 else 1e-9
    torch.testing.assert_close(ours, theirs, rtol=rtol, atol=rtol)
    assert history.keys() == expected.keys()
    for key in expected:
        assert len(history[key]) == len(expected[key]) == 31
        np.testing.assert_allclose(history[key], expected[key], rtol=rtol, atol=rtol)
    assert not torch.allclose(ours, U.to(ours.dtype))  # (the particles moved)


def test_validation_blocks_and_early_stopping_are_the_torch_ones(monkeypatch):
    """Blocks run between validations, which see the same particles and may end the run."""
    X, Y, U, b = _problem(torch.float64)
    seen = {True: [], False: []}
    for enabled in (True, False):
        monkeypatch.setattr(_compiled._LOOPS, "enabled", enabled)
        scale = [1.0]

        def validate(W, step, enabled=enabled):
            seen[enabled].append((step, W.clone()))
            scale[0] *= 1.5  # (a bandwidth moved by validation, read by the next block)
            return step == 14  # (stops there: the record ends at step 14)

        _, history = train_particles("rff", X, Y, U, b, scale=lambda: scale[0],
                                     alignment="normalized", n_iter=40, validate=validate,
                                     validate_every=7,
                                     generator=torch.Generator().manual_seed(0))
        assert len(history["alignment"]) == 15
    assert [s for s, _ in seen[True]] == [s for s, _ in seen[False]] == [0, 7, 14]
    for (_, ours), (_, theirs) in zip(seen[True], seen[False]):
        torch.testing.assert_close(ours, theirs, rtol=1e-9, atol=1e-9)


def test_far_arguments_take_the_librarys_reduction(monkeypatch):
    """Features of arguments beyond 2^20 (the polynomial's range reduction) come from the
    math library: still the torch steps'."""
    X, Y, U, b = _problem(torch.float64, spread=1e7)
    (ours, history), (theirs, expected) = _both(monkeypatch, X, Y, U, b, n_iter=3,
                                                step_size=1e-12)
    assert np.isfinite(history["alignment"]).all()
    np.testing.assert_allclose(history["alignment"], expected["alignment"], rtol=1e-7)


def test_the_compiled_steps_serve_the_full_batch_without_noise(monkeypatch):
    X, y = make_moons(200, noise=0.2, random_state=1)
    calls = []
    original = _compiled.rff_steps

    def spy(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr("sktransformer.kernels._langevin.rff_steps", spy)
    ParticleKernelSampler(8, n_iter=5, random_state=0, device="cpu").fit(X, y)
    assert calls  # (the defaults)
    calls.clear()
    for params in ({"beta": 10.0}, {"batch_size": 50}, {"alignment": "centered"},
                   {"kernel": "favor+"}):
        ParticleKernelSampler(8, n_iter=5, random_state=0, device="cpu",
                              **params).fit(X, y)
    assert not calls  # (noise and minibatches draw from torch's generator each step)
    assert math.isfinite(ParticleKernelSampler(8, n_iter=5, random_state=0,
                                               device="cpu").fit(X, y).scale_)


@pytest.mark.parametrize("spread", [1.0, 1e4, 1e7])
def test_the_compiled_features_are_cos_and_sin_to_the_dtypes_precision(spread):
    """The features' vectorized cos and sin (a reduction by pi / 2 and polynomials) to
    float64's precision, and the math library's beyond their range (``FAR``)."""
    from sktransformer.kernels import _loops

    rng = np.random.default_rng(0)
    # (eighths times small integers: every product and sum exact, whatever BLAS's order)
    X = np.round(rng.standard_normal((300, 4)) * spread * 8) / 8
    W, b = rng.integers(-3, 4, (32, 4)).astype(float), rng.integers(0, 50, 32) / 8
    Phi = np.empty((300, 32))
    sines = _loops.rff_features(X, W, b, Phi)
    z = X @ W.T + b
    assert (np.abs(z).max() > _loops.FAR) == (spread == 1e7)
    np.testing.assert_allclose(Phi, np.sqrt(2 / 32) * np.cos(z), rtol=0, atol=2e-16)
    np.testing.assert_allclose(sines, np.sin(z), rtol=0, atol=2e-16)
