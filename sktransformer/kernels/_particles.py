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
    clone,
)
from sklearn.linear_model import LogisticRegression
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from ..attention import FEATURE_MAPS, favor_offset, features, initial_particles, n_particles
from ..utils import (
    SMALL_OP,
    ArrayAPISupport,
    HasMethods,
    Interval,
    StrOptions,
    as_numpy,
    check_allocation,
    check_data,
    check_data_and_target,
    check_squared_scale,
    fit_context,
    follows_input,
    logger,
    logs_verbosely,
    make_generator,
    numpy_dtype,
    output_space,
    progress,
    resolve_device,
    single_threaded,
    to_numpy,
    to_tensor,
    torch_dtype,
)
from ._hamiltonian import ALIGNMENTS, target_codes
from ._langevin import train_particles
from ._selection import choose_C, refit_from, ridge_validation_error, validation_split

_PARTICLE_PARAMS = {
    "n_components": [Interval(Integral, 1, None, closed="left")],
    "kernel": [StrOptions(set(FEATURE_MAPS))],
    "gamma": [StrOptions({"scale"}), Interval(Real, 0, None, closed="neither")],
    "learn_bandwidth": ["boolean"],
    "alignment": [StrOptions(set(ALIGNMENTS))],
    "repulsion": [Interval(Real, 0, None, closed="left")],
    "s": [Interval(Real, 0, None, closed="left")],
    "eps": [Interval(Real, 0, None, closed="neither")],
    "n_iter": [Interval(Integral, 0, None, closed="left")],
    "n_iter_no_change": [None, Interval(Integral, 1, None, closed="left")],
    "step_size": [Interval(Real, 0, None, closed="neither")],
    "beta": [Interval(Real, 0, None, closed="right")],
    "radius": [StrOptions({"auto"}), None, Interval(Real, 0, None, closed="neither")],
    "batch_size": [None, Interval(Integral, 1, None, closed="left")],
    "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
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
        PORF-softplus, or softmax features (see :func:`sktransformer.attention.features`).
    gamma : "scale" or float, default="scale"
        Initial RBF width for the Fourier maps: particles start as ``N(0, 2 gamma I)``,
        ``RBFSampler(gamma)``'s features. ``"scale"`` is ``1 / (n_features * X.var())``, as
        in scikit-learn's SVC. The positive maps start from orthogonal Gaussian rows.
    learn_bandwidth : bool, default=True
        Learn a global scale of the particles (the kernel's bandwidth) on held-out rows: a
        search over ``2^-5 .. 2^5`` times the start before the dynamics (every other power
        of two, then the best one's two neighbours), then a move by a factor of 2 up, down
        or none at every validation. ``False`` keeps ``gamma``.
    alignment : {"uncentered", "centered", "normalized"}, default="normalized"
        The kernel-target alignment climbed (normalized = centered and scale-free).
    repulsion : float, default=0.1
        Strength ``lambda`` of the Riesz repulsion between particles.
    s : float, default=1.0
        Riesz exponent (``0``: logarithmic; ``p - 2`` is Coulomb in dimension ``p``).
    eps : float, default=1e-3
        Softening of the repulsion at zero distance.
    n_iter : int, default=50
        Langevin steps (0 keeps the initial random particles, at the learned bandwidth).
    n_iter_no_change : int or None, default=None
        Early stopping: the dynamics stop at a validation (every 10 steps) that finds the
        validation error not improved for this many steps; the best particles are kept
        either way. ``None`` runs all ``n_iter`` steps. ``10`` fits about a fifth faster
        on small sets, with slightly worse log loss where the best particles come late.
    step_size : float, default=2.0
        ``eta``, in units of the initial particles' spread: the particles move as
        ``u = w / (sqrt(2 gamma) scale)`` with drift ``eta N dH/du_k`` (mean-field scaling,
        so it depends on neither ``n_components`` nor the data's scale).
    beta : float, default=inf
        Inverse temperature of the Langevin noise ``sqrt(2 eta / beta) xi``; ``inf`` is
        projected gradient descent.
    radius : "auto", float or None, default="auto"
        Radius ``R`` of the ball (in the units of ``step_size``) the particles are projected
        onto; ``"auto"`` is three times the root-mean-square norm of the initial particles,
        ``None`` no projection.
    batch_size : int or None, default=1024
        Training samples per Langevin step (a fresh minibatch each step, so a step costs
        the same at any ``n_samples``); ``None``: all of them.
    validation_fraction : float, default=0.2
        Share of the samples (stratified) held out from the dynamics. Every 10 steps the
        particles are scored by the validation error of a ridge regression of the labels on
        their features; the best particles are kept (early stopping) and the bandwidth is
        chosen by the same score.
    device : {"auto", "cpu", "cuda", "cuda:N"} or torch.device, default="auto"
        Where the dynamics run; fitted state is numpy.
    random_state : int, RandomState instance or None, default=None
        Seeds a local ``torch.Generator`` (split, initial particles, minibatches, noise).
    verbose : int, default=0
        A progress bar over the Langevin steps."""

# Reconstructed choices: the full paper was not available; every choice above that is not
# in its abstract (the Hamiltonian's exact form, the mean-field step scaling, the positive
# feature maps' details, the held-out selection) is a parameter with a default.
_VALIDATE_EVERY = 10
_SEARCH = tuple(2.0 ** k for k in range(-5, 6))  # the bandwidth search, scale multipliers


def resolve_gamma(gamma, X):
    """``gamma="scale"`` is ``1 / (n_features * X.var())`` (scikit-learn's SVC and
    RBFSampler), 1 for constant X; a number is used as it is."""
    if isinstance(gamma, str):  # "scale"
        var = (float(X.to(torch.float64).var(unbiased=False)) if isinstance(X, torch.Tensor)
               else float(np.var(X, dtype=np.float64)))
        return 1.0 / (X.shape[1] * var) if var > 0 else 1.0
    return float(gamma)


def _validate_targets(y):
    check_classification_targets(y)
    classes, y_index = np.unique(y, return_inverse=True)
    if len(classes) < 2:
        raise ValueError(f"The number of classes has to be greater than one; got "
                         f"{len(classes)} class.")
    return classes, y_index


class ParticleKernelSampler(ArrayAPISupport, ClassNamePrefixFeaturesOutMixin, TransformerMixin,
                            BaseEstimator):
    __doc__ = """Random features whose frequencies are particles learned from labels.

    A supervised drop-in for :class:`sklearn.kernel_approximation.RBFSampler` in a
    ``Pipeline``: ``fit(X, y)`` starts from RBFSampler's random features and moves the
    particles (the features' parameters ``w_k``) by projected Langevin dynamics on the
    Hamiltonian ``H = -A + lambda E_s``: ``A`` is the kernel-target alignment of the kernel
    ``K(x, x') = phi(x) . phi(x')`` with the labels, ``E_s`` a Riesz (Coulomb) repulsion that
    keeps the particles apart (Badiei Khuzani et al., 2026). The alignment is climbed on
    the training rows only; ``validation_fraction`` of the rows choose the kernel's
    bandwidth (a global scale of the particles that moves with them) and which particles
    are kept, so that the features cannot simply fit the training labels. ``transform``
    returns the features of the kept particles.

    ``fit(X)`` without labels has nothing to align with: it draws the initial random
    features at ``gamma`` (RBFSampler's fixed features) and learns nothing.

    Parameters
    ----------""" + _PARAMS_DOC + """

    Attributes
    ----------
    particles_ : ndarray of shape (n_particles, `n_features_in_`)
        In X's dtype.
    offsets_ : ndarray of shape (n_particles,)
        The phases ``b`` of ``"rff"`` (unused by the other maps).
    offset_ : float
        The exponent shift of ``"favor+"`` (0 for the other maps).
    gamma_ : float
        The initial RBF width (``gamma``, with ``"scale"`` resolved).
    scale_ : float
        The learned global scale: ``particles_ = scale_ * sqrt(2 gamma_) * u`` for the
        Fourier maps (an RBF width of ``scale_**2 * gamma_`` at the start of the dynamics).
    best_iter_ : int
        The Langevin step whose particles were kept (0: the initial ones).
    history_ : dict of lists
        Per Langevin step: ``alignment``, ``repulsion``, ``hamiltonian``, ``min_distance``
        and ``mean_distance`` between particles (the last entry after the last step run); per
        validation: ``validation_step``, ``validation_error``, ``scale``.
    classes_ : ndarray of shape (n_classes,)
        Only when fitted with labels.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)

    See Also
    --------
    ParticleKernelClassifier : These features and a linear model.
    sklearn.kernel_approximation.RBFSampler : The fixed random features.

    Examples
    --------
    >>> from sklearn.datasets import make_moons
    >>> from sktransformer.kernels import ParticleKernelSampler
    >>> X, y = make_moons(200, noise=0.1, random_state=0)
    >>> sampler = ParticleKernelSampler(32, random_state=0, device="cpu")
    >>> Z = sampler.fit_transform(X, y)
    >>> Z.shape
    (200, 32)
    >>> round(sampler.gamma_, 4)  # "scale": 1 / (n_features * X.var())
    0.9536
    """

    _parameter_constraints = dict(_PARTICLE_PARAMS)

    def __init__(self, n_components=64, *, kernel="rff", gamma="scale", learn_bandwidth=True,
                 alignment="normalized", repulsion=0.1, s=1.0, eps=1e-3, n_iter=50,
                 n_iter_no_change=None, step_size=2.0, beta=math.inf, radius="auto",
                 batch_size=1024, validation_fraction=0.2, device="auto", random_state=None,
                 verbose=0):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.learn_bandwidth = learn_bandwidth
        self.alignment = alignment
        self.repulsion = repulsion
        self.s = s
        self.eps = eps
        self.n_iter = n_iter
        self.n_iter_no_change = n_iter_no_change
        self.step_size = step_size
        self.beta = beta
        self.radius = radius
        self.batch_size = batch_size
        self.validation_fraction = validation_fraction
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    _array_attributes = ("particles_", "offsets_")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags

    @logs_verbosely
    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Learn the particles from labeled data (or draw fixed ones without labels).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Dense: a sparse matrix is an error, where ``RBFSampler`` takes one. The
            dynamics run on a dense copy of X (its rows centered by their mean for
            ``"rff"``), so a sparse X would be densified whole: densify it yourself
            (``X.toarray()``) where it fits, or reduce it first (``TruncatedSVD`` for
            TF-IDF).
        y : array-like of shape (n_samples,) or None
            Class labels (two or more classes). ``None``: RBFSampler's fixed features.

        Returns
        -------
        self : ParticleKernelSampler
        """
        return self._fit(X, y)

    def _fit(self, X, y, split=None, generator=None):
        """``fit``'s guts; the classifier passes its own split and generator."""
        space = output_space(X)
        if y is None:
            X = check_data(self, X, reset=True)
        else:
            X, y = check_data_and_target(self, X, y)
            self.classes_, y_index = _validate_targets(y)
        check_squared_scale(X, fit=True)
        device = resolve_device(self.device, data=X)
        if generator is None:
            generator = make_generator(self.random_state, device=device)
        np_dtype, dtype = numpy_dtype(X), torch_dtype(X)
        N = n_particles(self.kernel, self.n_components)
        # the particles, a minibatch's features and (learning) the particles' pairwise
        # distances and forces
        check_allocation("n_components", self.n_components, dtype.itemsize * N * (
            4 * X.shape[1] + 2 * min(X.shape[0], self.batch_size or X.shape[0])
            + (4 * N if y is not None else 0)))
        Xt = to_tensor(X, device, dtype=dtype)
        self.gamma_ = resolve_gamma(self.gamma, Xt)
        # (drawn in float64 whatever X's dtype: torch's draws differ from one dtype to the
        # other, and the same random_state gives the same start for float32 and float64 X)
        U, b = (v.to(dtype) for v in initial_particles(
            self.kernel, N, X.shape[1], gamma=0.5, generator=generator, dtype=torch.float64))
        base = math.sqrt(2 * self.gamma_) if self.kernel in ("rff", "rff_cossin") else 1.0
        self.scale_, self.best_iter_, self.history_ = 1.0, 0, {}
        if y is not None:
            if split is None:
                split = validation_split(y_index, self.validation_fraction,
                                         _cpu_generator(generator))
            N, d = U.shape
            small = device.type == "cpu" and len(split[0]) * N * max(N, d) < SMALL_OP
            # closed-form gradients: no autograd record
            with torch.inference_mode(), single_threaded(small):
                work, shift, unit = _working_space(Xt, self.kernel, split[0])
                Y = target_codes(torch.as_tensor(y_index, device=device),
                                 len(self.classes_), dtype=work.dtype)
                U = self._learn(work, Y, U.to(work.dtype), b.to(work.dtype), base * unit,
                                split, generator).to(dtype)
        W = U * (base * self.scale_)
        if y is not None and shift is not None:  # the phases the centering moved
            b = torch.remainder(b - W @ shift, 2 * math.pi)
        self.particles_ = to_numpy(W).astype(np_dtype, copy=False)
        self.offsets_ = to_numpy(b).astype(np_dtype, copy=False)
        self.offset_ = float(favor_offset(Xt, W)) if self.kernel == "favor+" else 0.0
        self._n_features_out = self.n_components
        self._publish(space)
        return self

    def _phi(self, X, U, b, scale, reference):
        """Features at particles ``U * scale`` (base included); favor+'s shift from
        ``reference`` rows, so that the training and validation features agree."""
        W = U * scale
        offset = favor_offset(reference, W.detach()) if self.kernel == "favor+" else 0.0
        return features(self.kernel, X, W, b, offset=offset)

    def _learn(self, X, Y, U, b, base, split, generator):
        """The dynamics on the training rows, the selection on the validation rows."""
        train, val = (torch.as_tensor(rows, device=X.device) for rows in split)
        X_train, Y_train, X_val, Y_val = X[train], Y[train], X[val], Y[val]

        def scores(U, scales):
            '''The validation errors of the particles at each of ``scales``.'''
            phi = [(self._phi(X_train, U, b, base * c, X_train),
                    self._phi(X_val, U, b, base * c, X_train)) for c in scales]
            return ridge_validation_error(torch.stack([train for train, _ in phi]), Y_train,
                                          torch.stack([val for _, val in phi]), Y_val)

        scale = 1.0
        if self.learn_bandwidth:  # every other multiplier, then the best one's neighbours
            coarse = scores(U, _SEARCH[1::2])
            best = 1 + 2 * int(np.argmin(coarse))
            below, above = scores(U, (_SEARCH[best - 1], _SEARCH[best + 1]))
            errors = (below, min(coarse), above)
            scale = _SEARCH[best - 1 + int(np.argmin(errors))]
        record = {"validation_step": [], "validation_error": [], "scale": []}
        best = {"error": math.inf, "U": U, "scale": scale, "step": 0}

        def validate(U, step):
            nonlocal scale
            candidates = ((scale / 2, scale, scale * 2) if self.learn_bandwidth and step > 0
                          else (scale,))
            errors = scores(U, candidates)
            j = int(np.argmin(errors))
            scale = candidates[j]
            record["validation_step"].append(step)
            record["validation_error"].append(errors[j])
            record["scale"].append(scale)
            if errors[j] < best["error"]:
                best.update(error=errors[j], U=U.clone(), scale=scale, step=step)
            patience = self.n_iter_no_change
            return patience is not None and step - best["step"] >= patience

        radius = self.radius
        if radius == "auto":
            radius = 3.0 * float(U.square().sum(1).mean().sqrt())
        with progress(self.n_iter, self.verbose, "particles (Langevin)") as bar:
            _, history = train_particles(
                self.kernel, X_train, Y_train, U, b, scale=lambda: base * scale,
                alignment=self.alignment, repulsion=self.repulsion, s=self.s, eps=self.eps,
                n_iter=self.n_iter, step_size=self.step_size, beta=self.beta, radius=radius,
                batch_size=self.batch_size, generator=generator, progress=bar,
                verbose=self.verbose, validate=validate, validate_every=_VALIDATE_EVERY)
        if not all(math.isfinite(h) for h in history["hamiltonian"]):
            logger.warning("The particles diverged (non-finite energy); the best particles "
                           "before that are kept. Lower step_size or set a radius.")
        self.history_ = {**history, **record}
        self.scale_, self.best_iter_ = best["scale"], best["step"]
        return best["U"]

    @follows_input
    def transform(self, X):
        """The features of the learned particles.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        Z : ndarray of shape (n_samples, n_components)
            In X's dtype.
        """
        check_is_fitted(self)
        X = check_data(self, X, reset=False)
        device = resolve_device(self.device, fallback=True, data=X)
        dtype = torch_dtype(X)
        with torch.inference_mode():
            return features(self.kernel, to_tensor(X, device, dtype=dtype),
                            to_tensor(self.particles_, device, dtype=dtype),
                            to_tensor(self.offsets_, device, dtype=dtype), offset=self.offset_)


def _working_space(X, kernel, rows):
    """``(X', shift, unit)``: the data the dynamics run on, ``X' = (X - shift) / unit``,
    ``shift`` and ``unit`` from the training ``rows`` (the dynamics never see the others).

    ``"rff"``'s features ``cos(w . x + b)`` are the same kernel for centered data with the
    phases moved by ``w . shift`` and for data scaled by ``unit`` with particles scaled by
    ``unit``: so the dynamics run on centered rows, scaled by a power of two near their
    spread (exact), in float32 -- about twice as fast as float64, with the cosines'
    arguments of order one whatever the data's offset or scale. The other maps depend on
    the data's own scale and keep ``X`` (``shift`` None, ``unit`` 1).
    """
    if kernel != "rff":
        return X, None, 1.0
    X64 = X.to(torch.float64)
    train = X64[torch.as_tensor(rows, device=X.device)]
    shift = train.mean(0)
    spread = float((train - shift).square().mean().sqrt())
    unit = 2.0 ** round(math.log2(spread)) if spread > 0 else 1.0
    return ((X64 - shift) / unit).to(torch.float32), shift.to(X.dtype), unit


def _cpu_generator(generator):
    """A CPU generator seeded from ``generator`` (for draws that must be on the CPU)."""
    seed = int(torch.randint(0, 2**62, (1,), generator=generator, device=generator.device))
    return torch.Generator().manual_seed(seed)


def _logistic(C):
    """The default Phase B model (Newton-CG: fast on the few, dense features)."""
    return LogisticRegression(C=C, solver="newton-cg", max_iter=1000)


def _estimator_has(attr):
    def check(self):
        if hasattr(self, "estimator_"):
            return hasattr(self.estimator_, attr)
        return hasattr(self.estimator if self.estimator is not None else _logistic(1.0),
                       attr)
    return check


class ParticleKernelClassifier(ArrayAPISupport, ClassifierMixin, BaseEstimator):
    __doc__ = """A linear classifier on Coulomb-particle kernel features.

    Phase A learns the particles (:class:`ParticleKernelSampler`) by alignment with the
    labels plus repulsion, with the bandwidth and the kept particles chosen on a held-out
    ``validation_fraction`` of the rows; Phase B freezes them and fits a linear model on the
    features: by default a logistic regression whose ``C`` is chosen from ``Cs`` by the
    log loss on the same held-out rows, then refitted on all of them. Any number of
    classes.

    Parameters
    ----------""" + _PARAMS_DOC + """
    Cs : sequence of float, default=(0.01, 0.1, 1, 10, 100, 1000)
        The inverse regularizations tried for the default Phase B model.
    estimator : estimator or None, default=None
        The Phase B model, cloned and fitted as it is; ``None`` is the logistic regression
        above.

    Attributes
    ----------
    sampler_ : ParticleKernelSampler
        Phase A, fitted.
    estimator_ : estimator
        Phase B, fitted on ``sampler_.transform(X)``.
    C_ : float or None
        The chosen ``C`` of the default Phase B model (``None`` with ``estimator``).
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
    >>> clf = ParticleKernelClassifier(32, random_state=0, device="cpu")
    >>> clf.fit(X, y).score(X, y) > 0.9
    True
    """

    _parameter_constraints = {
        **_PARTICLE_PARAMS,
        "Cs": ["array-like"],
        "estimator": [None, HasMethods(["fit", "predict"])],
    }

    def __init__(self, n_components=64, *, kernel="rff", gamma="scale", learn_bandwidth=True,
                 alignment="normalized", repulsion=0.1, s=1.0, eps=1e-3, n_iter=50,
                 n_iter_no_change=None, step_size=2.0, beta=math.inf, radius="auto",
                 batch_size=1024, validation_fraction=0.2,
                 Cs=(0.01, 0.1, 1.0, 10.0, 100.0, 1000.0),
                 estimator=None, device="auto", random_state=None, verbose=0):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.learn_bandwidth = learn_bandwidth
        self.alignment = alignment
        self.repulsion = repulsion
        self.s = s
        self.eps = eps
        self.n_iter = n_iter
        self.n_iter_no_change = n_iter_no_change
        self.step_size = step_size
        self.beta = beta
        self.radius = radius
        self.batch_size = batch_size
        self.validation_fraction = validation_fraction
        self.Cs = Cs
        self.estimator = estimator
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    @logs_verbosely
    @fit_context(prefer_skip_nested_validation=False)
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
        space = output_space(X)
        X, y = check_data_and_target(self, X, y)
        check_squared_scale(X, fit=True)
        _, y_index = _validate_targets(y)
        Cs = np.asarray(self.Cs, dtype=float).ravel()
        if len(Cs) == 0 or not np.all(np.isfinite(Cs) & (Cs > 0)):
            raise ValueError(f"Cs must be positive finite numbers, got {self.Cs!r}.")
        params = {name: getattr(self, name) for name in _PARTICLE_PARAMS}
        generator = make_generator(self.random_state,
                                   device=resolve_device(self.device, data=X))
        split = validation_split(y_index, self.validation_fraction, _cpu_generator(generator))
        self.sampler_ = ParticleKernelSampler(**params)._fit(X, y, split, generator)
        Z = as_numpy(self.sampler_.transform(X))  # Phase B is a scikit-learn model
        self.C_ = None
        if self.estimator is None and len(Cs) > 1:
            self.C_, _, start = choose_C(_logistic(1.0), Z, y, *split, tuple(Cs))
            self.estimator_ = refit_from(_logistic(self.C_), Z, y, start)
        elif self.estimator is None:
            self.C_ = float(Cs[0])
            self.estimator_ = _logistic(self.C_).fit(Z, y)
        else:
            self.estimator_ = clone(self.estimator).fit(Z, y)
        self.classes_ = self.estimator_.classes_
        self.history_ = self.sampler_.history_
        self._publish(space)
        return self

    def _features(self, X):
        check_is_fitted(self)
        X = check_data(self, X, reset=False)
        return as_numpy(self.sampler_.transform(X))

    @follows_input
    def predict(self, X):
        """Class of each sample."""
        Z = self._features(X)
        return self.estimator_.predict(Z)

    @available_if(_estimator_has("predict_proba"))
    @follows_input
    def predict_proba(self, X):
        """Class probabilities of the Phase B model."""
        Z = self._features(X)
        return self.estimator_.predict_proba(Z)

    @available_if(_estimator_has("predict_log_proba"))
    @follows_input
    def predict_log_proba(self, X):
        """Log class probabilities of the Phase B model."""
        Z = self._features(X)
        return self.estimator_.predict_log_proba(Z)

    @available_if(_estimator_has("decision_function"))
    @follows_input
    def decision_function(self, X):
        """Decision function of the Phase B model."""
        Z = self._features(X)
        return self.estimator_.decision_function(Z)
