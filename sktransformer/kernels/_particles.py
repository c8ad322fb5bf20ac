"""Coulomb particle kernels: random features learned by alignment plus repulsion."""

import math
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import (
    BaseEstimator,
    ClassifierMixin,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _fit_context,
    clone,
)
from sklearn.linear_model import LogisticRegression
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data
from tqdm.auto import tqdm

from ..utils import logs_verbosely, make_generator, resolve_device, to_numpy, to_tensor
from ._features import FEATURE_MAPS, favor_offset, features, initial_particles, n_particles
from ._hamiltonian import ALIGNMENTS, hamiltonian, target_codes
from ._langevin import langevin

_PARTICLE_PARAMS = {
    "n_components": [Interval(Integral, 1, None, closed="left")],
    "kernel": [StrOptions(set(FEATURE_MAPS))],
    "gamma": [Interval(Real, 0, None, closed="neither")],
    "alignment": [StrOptions(set(ALIGNMENTS))],
    "repulsion": [Interval(Real, 0, None, closed="left")],
    "s": [Interval(Real, 0, None, closed="left")],
    "eps": [Interval(Real, 0, None, closed="neither")],
    "n_iter": [Interval(Integral, 0, None, closed="left")],
    "step_size": [Interval(Real, 0, None, closed="neither")],
    "beta": [Interval(Real, 0, None, closed="right")],
    "radius": [StrOptions({"auto"}), None, Interval(Real, 0, None, closed="neither")],
    "batch_size": [None, Interval(Integral, 1, None, closed="left")],
    "device": [str, torch.device],
    "random_state": ["random_state"],
    "verbose": ["verbose"],
}

_PARAMS_DOC = """
    n_components : int, default=64
        Number of output features (``"rff_cossin"``: ``n_components / 2`` particles, each a
        cos/sin pair; the other maps: one particle per feature).
    kernel : {"rff", "rff_cossin", "favor+", "porf", "softmax"}, default="rff"
        The feature map ``phi(x; w)``: random Fourier features ``sqrt(2/N) cos(w.x + b)``
        (scikit-learn's ``RBFSampler``), the cos/sin pair, FAVOR+ positive features,
        PORF-softplus, or softmax features (see ``sktransformer.kernels._features``).
    gamma : float, default=1.0
        Initial RBF width for the Fourier maps: particles start as ``N(0, 2 gamma I)``,
        ``RBFSampler(gamma)``'s features. The positive maps start from orthogonal Gaussian
        rows and ignore it.
    alignment : {"uncentered", "centered", "normalized"}, default="centered"
        The kernel-target alignment climbed (normalized = centered and scale-free).
    repulsion : float, default=0.1
        Strength ``lambda`` of the Riesz repulsion between particles.
    s : float, default=1.0
        Riesz exponent (``0``: logarithmic; ``p - 2`` is Coulomb in dimension ``p``).
    eps : float, default=1e-3
        Softening of the repulsion at zero distance.
    n_iter : int, default=200
        Langevin steps (0 keeps the initial, RBFSampler-like particles).
    step_size : float, default=0.5
        ``eta``; the drift is ``eta N dH/dw_k`` (mean-field scaling, so it does not depend
        on ``n_components``).
    beta : float, default=inf
        Inverse temperature of the Langevin noise ``sqrt(2 eta / beta) xi``; ``inf`` is
        projected gradient descent.
    radius : "auto", float or None, default="auto"
        Radius ``R`` of the ball the particles are projected onto; ``"auto"`` is three times
        the root-mean-square norm of the initial particles, ``None`` no projection.
    batch_size : int or None, default=None
        Samples per Langevin step (a fresh minibatch each step); ``None``: all of them.
    device : {"auto", "cpu", "cuda", "cuda:N"} or torch.device, default="auto"
        Where the dynamics run; fitted state is numpy.
    random_state : int, RandomState instance or None, default=None
        Seeds a local ``torch.Generator`` (initial particles, minibatches, noise).
    verbose : int, default=0
        A progress bar over the Langevin steps."""

# Reconstructed choices: the full paper was not available; every choice above that is not
# in its abstract (the Hamiltonian's exact form, the mean-field step scaling, the positive
# feature maps' details) is a parameter with a sensible default.


def _validate_targets(y):
    check_classification_targets(y)
    classes, y_index = np.unique(y, return_inverse=True)
    if len(classes) < 2:
        raise ValueError(f"The number of classes has to be greater than one; got "
                         f"{len(classes)} class.")
    return classes, y_index


class ParticleKernelSampler(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    __doc__ = """Random features whose frequencies are particles learned from labels.

    A supervised drop-in for :class:`sklearn.kernel_approximation.RBFSampler` in a
    ``Pipeline``: ``fit(X, y)`` starts from RBFSampler's random features and moves the
    particles (the features' parameters ``w_k``) by projected Langevin dynamics on the
    Hamiltonian ``H = -A + lambda E_s``: ``A`` is the kernel-target alignment of the kernel
    ``K(x, x') = phi(x) . phi(x')`` with the labels, ``E_s`` a Riesz (Coulomb) repulsion that
    keeps the particles apart (Badiei Khuzani et al., 2026). ``transform`` returns the
    features of the learned particles.

    Parameters
    ----------""" + _PARAMS_DOC + """

    Attributes
    ----------
    particles_ : ndarray of shape (n_particles, `n_features_in_`)
    offsets_ : ndarray of shape (n_particles,)
        The phases ``b`` of ``"rff"`` (unused by the other maps).
    offset_ : float
        The exponent shift of ``"favor+"`` (0 for the other maps).
    history_ : dict of lists
        Per Langevin step: ``alignment``, ``repulsion``, ``hamiltonian``, ``min_distance``
        and ``mean_distance`` between particles (the last entry after the last step).
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)

    See Also
    --------
    ParticleKernelClassifier : These features and a linear model.
    sklearn.kernel_approximation.RBFSampler : The fixed random features (``n_iter=0``).

    Examples
    --------
    >>> from sklearn.datasets import make_moons
    >>> from sktransformer.kernels import ParticleKernelSampler
    >>> X, y = make_moons(200, noise=0.1, random_state=0)
    >>> sampler = ParticleKernelSampler(32, gamma=2.0, random_state=0, device="cpu")
    >>> Z = sampler.fit_transform(X, y)
    >>> Z.shape
    (200, 32)
    >>> sampler.history_["alignment"][-1] > sampler.history_["alignment"][0]
    True
    """

    _parameter_constraints = dict(_PARTICLE_PARAMS)

    def __init__(self, n_components=64, *, kernel="rff", gamma=1.0, alignment="centered",
                 repulsion=0.1, s=1.0, eps=1e-3, n_iter=200, step_size=0.5, beta=math.inf,
                 radius="auto", batch_size=None, device="auto", random_state=None,
                 verbose=0):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.alignment = alignment
        self.repulsion = repulsion
        self.s = s
        self.eps = eps
        self.n_iter = n_iter
        self.step_size = step_size
        self.beta = beta
        self.radius = radius
        self.batch_size = batch_size
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags

    @logs_verbosely
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Learn the particles from labeled data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Class labels (two or more classes).

        Returns
        -------
        self : ParticleKernelSampler
        """
        X, y = validate_data(self, X, y, dtype=[np.float64, np.float32])
        self.classes_, y_index = _validate_targets(y)
        n_particles_ = n_particles(self.kernel, self.n_components)
        device = resolve_device(self.device)
        generator = make_generator(self.random_state, device=device)
        Xt = to_tensor(X, device, dtype=torch.float64)
        Y = target_codes(torch.as_tensor(y_index, device=device), len(self.classes_))
        W, b = initial_particles(self.kernel, n_particles_, X.shape[1], gamma=self.gamma,
                                 generator=generator)
        W, b = W.to(device), b.to(device)
        radius = self.radius
        if radius == "auto":
            radius = 3.0 * float(W.square().sum(1).mean().sqrt())
        offset = favor_offset(Xt, W) if self.kernel == "favor+" else 0.0

        def energy(W, rows):
            Xb, Yb = (Xt, Y) if rows is None else (Xt[rows], Y[rows])
            Phi = features(self.kernel, Xb, W, b, offset=offset)
            return hamiltonian(Phi, Yb, W, repulsion=self.repulsion, s=self.s, eps=self.eps,
                               kind=self.alignment)

        with tqdm(total=self.n_iter, disable=not self.verbose,
                  desc="particles (Langevin)") as bar:
            W, self.history_ = langevin(energy, W, n_samples=len(X), n_iter=self.n_iter,
                                        step_size=self.step_size, beta=self.beta,
                                        radius=radius, batch_size=self.batch_size,
                                        generator=generator, progress=bar)
        if not torch.isfinite(W).all():
            raise FloatingPointError("The particles diverged (non-finite values); lower "
                                     "step_size or set a finite radius.")
        self.particles_ = to_numpy(W)
        self.offsets_ = to_numpy(b)
        self.offset_ = float(favor_offset(Xt, W)) if self.kernel == "favor+" else 0.0
        self._n_features_out = self.n_components
        return self

    def transform(self, X):
        """The features of the learned particles.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        Z : ndarray of shape (n_samples, n_components)
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        device = resolve_device(self.device, fallback=True)
        with torch.inference_mode():
            Z = features(self.kernel, to_tensor(X, device, dtype=torch.float64),
                         to_tensor(self.particles_, device), to_tensor(self.offsets_, device),
                         offset=self.offset_)
        return to_numpy(Z).astype(X.dtype, copy=False)


def _estimator_has(attr):
    def check(self):
        if hasattr(self, "estimator_"):
            return hasattr(self.estimator_, attr)
        return hasattr(self.estimator if self.estimator is not None else
                       LogisticRegression(), attr)
    return check


class ParticleKernelClassifier(ClassifierMixin, BaseEstimator):
    __doc__ = """A linear classifier on Coulomb-particle kernel features.

    Phase A learns the particles (:class:`ParticleKernelSampler`) by alignment with the
    labels plus repulsion; Phase B freezes them and fits ``estimator`` (a linear model) on
    the features. Any number of classes.

    Parameters
    ----------""" + _PARAMS_DOC + """
    estimator : estimator or None, default=None
        The Phase B model, cloned; ``None`` is ``LogisticRegression(max_iter=1000)``.

    Attributes
    ----------
    sampler_ : ParticleKernelSampler
        Phase A, fitted.
    estimator_ : estimator
        Phase B, fitted on ``sampler_.transform(X)``.
    history_ : dict of lists
        ``sampler_.history_``.
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)

    Examples
    --------
    >>> from sklearn.datasets import make_moons
    >>> from sktransformer.kernels import ParticleKernelClassifier
    >>> X, y = make_moons(300, noise=0.15, random_state=0)
    >>> clf = ParticleKernelClassifier(32, gamma=2.0, random_state=0, device="cpu")
    >>> clf.fit(X, y).score(X, y) > 0.9
    True
    """

    _parameter_constraints = {
        **_PARTICLE_PARAMS,
        "estimator": [None, HasMethods(["fit", "predict"])],
    }

    def __init__(self, n_components=64, *, kernel="rff", gamma=1.0, alignment="centered",
                 repulsion=0.1, s=1.0, eps=1e-3, n_iter=200, step_size=0.5, beta=math.inf,
                 radius="auto", batch_size=None, estimator=None, device="auto",
                 random_state=None, verbose=0):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.alignment = alignment
        self.repulsion = repulsion
        self.s = s
        self.eps = eps
        self.n_iter = n_iter
        self.step_size = step_size
        self.beta = beta
        self.radius = radius
        self.batch_size = batch_size
        self.estimator = estimator
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y):
        """Phase A (particles) then Phase B (the linear model on frozen features).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self : ParticleKernelClassifier
        """
        X, y = validate_data(self, X, y, dtype=[np.float64, np.float32])
        _validate_targets(y)
        params = {name: getattr(self, name) for name in _PARTICLE_PARAMS}
        self.sampler_ = ParticleKernelSampler(**params).fit(X, y)
        Z = self.sampler_.transform(X)
        estimator = (LogisticRegression(max_iter=1000) if self.estimator is None
                     else self.estimator)
        self.estimator_ = clone(estimator).fit(Z, y)
        self.classes_ = self.estimator_.classes_
        self.history_ = self.sampler_.history_
        return self

    def _features(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        return self.sampler_.transform(X)

    def predict(self, X):
        """Class of each sample."""
        Z = self._features(X)
        return self.estimator_.predict(Z)

    @available_if(_estimator_has("predict_proba"))
    def predict_proba(self, X):
        """Class probabilities of the Phase B model."""
        Z = self._features(X)
        return self.estimator_.predict_proba(Z)

    @available_if(_estimator_has("predict_log_proba"))
    def predict_log_proba(self, X):
        """Log class probabilities of the Phase B model."""
        Z = self._features(X)
        return self.estimator_.predict_log_proba(Z)

    @available_if(_estimator_has("decision_function"))
    def decision_function(self, X):
        """Decision function of the Phase B model."""
        Z = self._features(X)
        return self.estimator_.decision_function(Z)
