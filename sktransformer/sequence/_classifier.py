"""SequenceAttentionClassifier: a small attention encoder for sequences, whose attention is
linear over learned particles (the default), kNN attention or softmax attention.

Phase A moves each block's particles by projected Langevin dynamics on the kernel-target
alignment of the block's pooled queries (the kernels package's Hamiltonian and dynamics,
reused); phase B freezes them and trains the rest by cross-entropy.
"""

import copy
import inspect
import math
import time
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import deprecated
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    check_consistent_length,
    check_is_fitted,
    column_or_1d,
    validate_data,
)

from ..attention import POSITIVE_MAPS
from ..kernels import target_codes, train_particles
from ..utils import (
    ArrayAPISupport,
    Interval,
    StrOptions,
    as_numpy,
    as_tensor,
    check_allocation,
    check_squared_scale,
    dense_values,
    fit_context,
    follows_input,
    is_tensor,
    logger,
    logs_verbosely,
    make_generator,
    output_space,
    progress,
    resolve_device,
    to_numpy,
    to_tensor,
)
from ._encoder import SequenceEncoder, build, masked_mean, training_bytes

_STARTED = 0.01  # nats below the class frequencies' loss: the model has started learning

# what a model may take to train (the sequences' length sizes it, not only a typo): 2 GiB
TRAINING_LIMIT_BYTES = 2 << 30


def _prior_loss(train, val, n_classes):
    """The validation cross-entropy of predicting the training rows' class frequencies."""
    prior = torch.bincount(train, minlength=n_classes).double() / len(train)
    return float(-torch.log(prior.clamp(min=1e-12))[val].mean())


def _decay_groups(model, weight_decay):
    """The trained parameters as AdamW's groups: the weight matrices (linear maps, token
    embeddings) decayed, biases and LayerNorms not (decayed, the LayerNorms' gains shrink
    to zero and take the signal with them: at ``weight_decay=1`` the order task stayed at
    chance)."""
    trained = [p for p in model.parameters() if p.requires_grad]
    return [{"params": [p for p in trained if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in trained if p.dim() < 2], "weight_decay": 0.0}]


class SequenceAttentionClassifier(ArrayAPISupport, ClassifierMixin, BaseEstimator):
    """Sequence classification by a small transformer: learned-kernel linear attention, kNN
    attention or softmax attention.

    Formerly ``ParticleAttentionClassifier``; that name still works (with a
    ``FutureWarning``) and will be removed in 0.3.

    The model embeds each position (tokens, or float features), adds a fixed sinusoidal
    position encoding, runs ``n_layers`` pre-norm blocks of multi-head attention and a
    feed-forward layer, mean-pools the real positions and classifies. By default its
    attention is linear (:class:`~sktransformer.sequence.KernelAttention`): the kernel
    ``phi(q) . phi(k)`` of a positive feature map over particles, linear in sequence
    length.

    ``attention="knn"`` attends to each query's ``n_neighbors`` best keys only (kNN
    attention, :func:`~sktransformer.attention.knn_attention_grad`), and
    ``attention="softmax"`` to all of them: the alternatives and the quadratic baseline, in
    the same model (phase A applies to the kernel attention's particles only).

    Training: ``warmup_epochs`` epochs of phase B with the initial (random, FAVOR+-like)
    particles; then phase A, for each block in turn: the block's queries, mean-pooled per
    sequence and head, are the samples of a kernel-target alignment, and the particles move
    by ``n_iter`` projected Langevin steps on minus that alignment plus Riesz repulsion
    (:class:`~sktransformer.ParticleKernelSampler`'s energy and dynamics); then phase B
    again, particles frozen: Adam on cross-entropy for everything else, with early stopping
    on a validation split. ``features="fixed"`` skips phase A (the fixed random features
    baseline) and ``attention="softmax"`` uses exact softmax attention (the quadratic
    baseline), in the same model.

    Parameters
    ----------
    attention : {"kernel", "knn", "softmax"}, default="kernel"
        Linear attention over particle features (the model's own), kNN attention (each
        query's ``n_neighbors`` best keys, memory linear in the length), or exact softmax
        attention (the quadratic baseline).
    features : {"learned", "fixed"}, default="learned"
        Particles by phase A, or the initial random draw.
    kernel : {"favor+", "porf", "softmax"}, default="favor+"
        The positive feature map.
    n_components : int, default=32
        Particles (random features) per block, shared by its heads.
    d_model : int, default=32
    n_heads : int, default=2
    n_layers : int, default=1
    causal : bool, default=False
        Each position attends to earlier ones only.
    tie_qk : bool, default=False
        One projection for queries and keys.
    n_neighbors : int, default=32
        Keys kept per query by kNN attention.
    gradient : {"exact", "sampled"}, default="exact"
        kNN attention's training gradient: exact through the top-k, or the random-walk
        estimate of full softmax attention's gradient from lazy-Gumbel draws (drawn from
        the model's own generator, seeded by ``random_state``).
    pad_id : int, default=0
        For integer tokens: the padding id (not a key, not pooled).
    max_epochs : int, default=60
        Phase B epochs, warm-up included.
    batch_size : int, default=32
    learning_rate : float, default=3e-3
    weight_decay : float, default=1.0
        Decoupled weight decay (AdamW) of the weight matrices (not of biases, LayerNorms
        or the particles; 0 is Adam). On the Rotten Tomatoes reviews it is what keeps the
        model from fitting the training reviews within 3 epochs
        (``benchmarks/bench_sequence.py --study text``).
    early_stopping : bool, default=True
        Hold out ``validation_fraction`` of the training set (stratified) and stop when its
        loss has not improved by ``tol`` for ``n_iter_no_change`` epochs; the best epoch's
        weights are kept. The epochs are counted from the first whose validation loss is
        below that of predicting the class frequencies: a model still at chance trains on
        (up to ``max_epochs``).
    validation_fraction : float, default=0.1
    n_iter_no_change : int, default=8
    tol : float, default=1e-4
    warmup_epochs : int, default=1
        Phase B epochs before phase A (at most ``max_epochs - 1``).
    n_iter : int, default=100
        Langevin steps per block in phase A.
    step_size : float, default=0.5
    repulsion : float, default=0.01
        Strength of the Riesz repulsion between particles.
    beta : float, default=inf
        Inverse temperature of the Langevin noise (inf: projected gradient descent).
    device : {"auto", "cpu", "cuda", "cuda:N"} or torch.device, default="auto"
    random_state : int, RandomState instance or None, default=None
        Seeds a local ``torch.Generator`` (weights, particles, minibatches, the split).
    verbose : int, default=0
        1: a progress bar over epochs; 2: a message per epoch.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
        Sequence length (the padded width of X).
    history_ : dict
        ``train_loss``, ``val_loss``, ``val_accuracy`` and ``seconds`` (the wall-clock
        time since ``fit`` began) per epoch and, under ``phase_a``, the Langevin history
        of each block.
    n_iter_ : int
        Phase B epochs run.
    model_ : SequenceEncoder
        The trained torch module, on the CPU.

    Notes
    -----
    X is a padded integer array of token ids (``(n_samples, length)``; ids absent from the
    training set share one embedding), or floats: ``(n_samples, length)`` is a sequence of
    scalars, ``(n_samples, length, d)`` of vectors. The model has no dropout: torch's
    dropout draws from the global generator, which the package never touches.

    Examples
    --------
    >>> import numpy as np
    >>> from sktransformer import SequenceAttentionClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.integers(1, 5, size=(200, 12))
    >>> y = (X == 4).any(1) & (X[:, 0] > 2)
    >>> clf = SequenceAttentionClassifier(max_epochs=5, n_iter=10, random_state=0,
    ...                                   device="cpu").fit(X, y)
    >>> clf.predict(X[:3]).shape
    (3,)
    """

    _parameter_constraints = {
        "attention": [StrOptions({"kernel", "knn", "softmax"})],
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "gradient": [StrOptions({"exact", "sampled"})],
        "features": [StrOptions({"learned", "fixed"})],
        "kernel": [StrOptions(set(POSITIVE_MAPS))],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "d_model": [Interval(Integral, 1, None, closed="left")],
        "n_heads": [Interval(Integral, 1, None, closed="left")],
        "n_layers": [Interval(Integral, 1, None, closed="left")],
        "causal": ["boolean"],
        "tie_qk": ["boolean"],
        "pad_id": [Integral],
        "max_epochs": [Interval(Integral, 1, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "weight_decay": [Interval(Real, 0, None, closed="left")],
        "early_stopping": ["boolean"],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "warmup_epochs": [Interval(Integral, 0, None, closed="left")],
        "n_iter": [Interval(Integral, 0, None, closed="left")],
        "step_size": [Interval(Real, 0, None, closed="neither")],
        "repulsion": [Interval(Real, 0, None, closed="left")],
        "beta": [Interval(Real, 0, None, closed="right")],
        "device": [str, torch.device],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(self, attention="kernel", *, features="learned", kernel="favor+",
                 n_components=32, d_model=32, n_heads=2, n_layers=1, causal=False,
                 tie_qk=False, n_neighbors=32, gradient="exact", pad_id=0, max_epochs=60,
                 batch_size=32, learning_rate=3e-3, weight_decay=1.0, early_stopping=True,
                 validation_fraction=0.1, n_iter_no_change=8, tol=1e-4, warmup_epochs=1,
                 n_iter=100, step_size=0.5, repulsion=0.01, beta=math.inf, device="auto",
                 random_state=None, verbose=0):
        self.attention = attention
        self.features = features
        self.kernel = kernel
        self.n_components = n_components
        self.d_model = d_model
        self.n_heads = n_heads
        self.n_layers = n_layers
        self.causal = causal
        self.tie_qk = tie_qk
        self.n_neighbors = n_neighbors
        self.gradient = gradient
        self.pad_id = pad_id
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.warmup_epochs = warmup_epochs
        self.n_iter = n_iter
        self.step_size = step_size
        self.repulsion = repulsion
        self.beta = beta
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        return tags

    # -- data ----------------------------------------------------------------------------

    def _check_kind(self, tokens, shape, reset):
        """Integer tokens or float features, the same kind and width as in fit."""
        if len(shape) not in (2, 3):
            raise ValueError(f"X must be (n_samples, length) or (n_samples, length, d); "
                             f"got shape {tuple(shape)}.")
        if 0 in tuple(shape[1:]):
            raise ValueError(f"X has shape {tuple(shape)}: each sequence needs at least one "
                             "position, and each position at least one feature.")
        width = None if tokens else (1 if len(shape) == 2 else shape[2])
        if reset:
            self._tokens, self._n_inputs = tokens, width
        elif tokens != self._tokens or width != self._n_inputs:
            raise ValueError("X is not of the kind seen in fit (integer tokens vs float "
                             "features, or another feature width).")

    def _check_size(self, n_samples):
        """A ValueError naming the size parameter furthest above its default, before
        anything is built, where the model would take more than 2 GiB to train."""
        sizes = {name: getattr(self, name) for name in ("d_model", "n_layers", "n_components")}
        defaults = inspect.signature(type(self)).parameters
        name = max(sizes, key=lambda k: sizes[k] / defaults[k].default)
        check_allocation(name, sizes[name], training_bytes(
            **self._model_config, batch_size=min(self.batch_size, n_samples)),
            limit=TRAINING_LIMIT_BYTES)

    def _inputs(self, X, device, reset):
        """Validated X as model inputs: (tokens long (n, L) or floats (n, L, d), mask)."""
        if is_tensor(X):
            return self._tensor_inputs(dense_values(as_tensor(X).detach()), device, reset)
        X = validate_data(self, X, reset=reset, allow_nd=True, dtype=None,
                          ensure_min_features=1)
        tokens = X.ndim == 2 and np.issubdtype(X.dtype, np.integer)
        self._check_kind(tokens, X.shape, reset)
        if tokens:
            if X.min() < 0:
                raise ValueError("Token ids must be non-negative integers.")
            if reset:  # the ids seen in fit, sorted: the embedding has a row for each
                self._vocabulary = np.unique(X[X != self.pad_id])
                self._n_tokens = len(self._vocabulary) + 1  # the encoder adds the unseen row
            t = to_tensor(self._compact(X), device)
            return t, t != 0

        X = np.asarray(X, dtype=np.float32)
        if not np.isfinite(X).all():
            raise ValueError("Input X contains NaN or infinity.")
        check_squared_scale(X.reshape(len(X), -1))
        t = to_tensor(X if X.ndim == 3 else X[..., None], device)
        return t, torch.ones(t.shape[:2], dtype=torch.bool, device=device)

    def _tensor_inputs(self, X, device, reset):
        """:meth:`_inputs` for a tensor, validated where it lives (no copy to the host)."""
        if X.dim() not in (2, 3) or X.shape[0] < 1 or X.shape[1] < 1:
            raise ValueError(f"X must be (n_samples, length) or (n_samples, length, d) with "
                             f"at least one sample and one position; got shape "
                             f"{tuple(X.shape)}.")
        if X.is_complex():
            raise ValueError("Complex data not supported.")
        validate_data(self, X, skip_check_array=True, reset=reset)
        tokens = X.dim() == 2 and not X.is_floating_point() and X.dtype != torch.bool
        self._check_kind(tokens, X.shape, reset)
        X = X.to(device)
        if tokens:
            if bool((X < 0).any()):
                raise ValueError("Token ids must be non-negative integers.")
            if reset:
                self._vocabulary = to_numpy(torch.unique(X[X != self.pad_id]))
                self._n_tokens = len(self._vocabulary) + 1
            vocabulary = to_tensor(self._vocabulary, device, dtype=X.dtype)
            found = torch.searchsorted(vocabulary, X)
            known = torch.zeros_like(X, dtype=torch.bool)
            if len(vocabulary):
                known = (found < len(vocabulary)) & (
                    vocabulary[found.clamp(max=len(vocabulary) - 1)] == X)
            ids = torch.where(known, found + 1, len(vocabulary) + 1)
            ids = torch.where(X == self.pad_id, 0, ids).long()
            return ids, ids != 0
        X = X.to(torch.float32)
        if not bool(torch.isfinite(X).all()):
            raise ValueError("Input X contains NaN or infinity.")
        check_squared_scale(X.reshape(len(X), -1))
        t = X if X.dim() == 3 else X[..., None]
        return t, torch.ones(t.shape[:2], dtype=torch.bool, device=device)

    def _compact(self, X):
        """Ids as rows of the embedding: 0 the padding, ``1 ..`` the ids seen in fit, and
        one shared row for every id fit never saw (memory by the vocabulary, never by the
        largest id)."""
        found = np.searchsorted(self._vocabulary, X)
        known = found < len(self._vocabulary)
        known[known] = self._vocabulary[found[known]] == X[known]
        ids = np.where(known, found + 1, len(self._vocabulary) + 1)
        return np.where(X == self.pad_id, 0, ids).astype(np.int64)

    # -- fitting -------------------------------------------------------------------------

    @logs_verbosely
    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Train the encoder: warm-up, phase A (particles), phase B (the rest).

        Parameters
        ----------
        X : array-like of shape (n_samples, length) or (n_samples, length, d)
            Padded integer tokens, or float sequences.
        y : array-like of shape (n_samples,)

        Returns
        -------
        self : SequenceAttentionClassifier
        """
        began = time.perf_counter()
        space = output_space(X)
        device = resolve_device(self.device, data=X if isinstance(X, torch.Tensor) else None)
        generator = make_generator(self.random_state, device=device)
        x, mask = self._inputs(X, device, reset=True)
        y = column_or_1d(as_numpy(y), warn=True)
        check_consistent_length(x, y)
        check_classification_targets(y)
        self.classes_, y_index = np.unique(y, return_inverse=True)
        if len(self.classes_) < 2:
            raise ValueError(f"Classification needs at least 2 classes; the data has "
                             f"{len(self.classes_)} class.")
        labels = to_tensor(y_index.astype(np.int64), device)
        self._model_config = dict(
            n_classes=len(self.classes_), max_len=x.shape[1],
            n_tokens=self._n_tokens if self._tokens else None, n_inputs=self._n_inputs,
            d_model=self.d_model, n_heads=self.n_heads, n_layers=self.n_layers,
            n_components=self.n_components, kernel=self.kernel, attention=self.attention,
            causal=self.causal, tie_qk=self.tie_qk, n_neighbors=self.n_neighbors,
            gradient=self.gradient)
        self._check_size(len(x))
        self.model_ = build(generator, device, **self._model_config)
        train, val = self._split(labels, generator)
        self.history_ = {"train_loss": [], "val_loss": [], "val_accuracy": [], "seconds": [],
                         "phase_a": []}
        learned = self.attention == "kernel" and self.features == "learned"
        optimizer = torch.optim.AdamW(_decay_groups(self.model_, self.weight_decay),
                                      lr=self.learning_rate)
        best, best_loss, since = None, math.inf, 0
        chance = _prior_loss(labels[train], labels[val], len(self.classes_))
        started = False
        bar = progress(self.max_epochs, self.verbose, "epochs")
        for epoch in range(self.max_epochs):
            if learned and epoch == min(self.warmup_epochs, self.max_epochs - 1):
                self._phase_a(x[train], mask[train], labels[train], generator)
                best_loss, since = math.inf, 0  # the model changed: judge it anew
            self._epoch(x, mask, labels, train, optimizer, generator)
            val_loss, val_acc = self._evaluate(x, mask, labels, val)
            self.history_["val_loss"].append(val_loss)
            self.history_["val_accuracy"].append(val_acc)
            self.history_["seconds"].append(time.perf_counter() - began)
            bar.update(1)
            if self.verbose > 1:
                logger.info(f"epoch {epoch}: train loss {self.history_['train_loss'][-1]:.4f}"
                            f", validation loss {val_loss:.4f}, accuracy {val_acc:.3f}")
            if not self.early_stopping:
                continue
            # patience runs once the model beats the class frequencies: a model still on
            # the plateau of chance (the order task at length 128: up to about 20 epochs)
            # is not stopped there
            started = started or val_loss < chance - _STARTED
            if val_loss < best_loss - self.tol:
                best, best_loss, since = copy.deepcopy(self.model_.state_dict()), val_loss, 0
            elif started:
                since += 1
                if since >= self.n_iter_no_change and epoch >= self.warmup_epochs:
                    break
        bar.close()
        if best is not None:
            self.model_.load_state_dict(best)
        self.n_iter_ = epoch + 1
        self.model_ = self.model_.cpu().eval()
        self._publish(space)
        return self

    def _split(self, labels, generator):
        """Training and validation rows: a stratified split, or all rows twice (without
        early stopping, or when no class has members to spare)."""
        n = len(labels)
        rows = torch.arange(n, device=labels.device)
        if not self.early_stopping:
            return rows, rows
        order = torch.randperm(n, generator=generator, device=generator.device).to(
            labels.device)
        val = []
        for c in labels.unique():
            members = order[labels[order] == c]
            take = int(round(self.validation_fraction * len(members)))
            if 0 < take < len(members):
                val.append(members[:take])
        if not val:
            return rows, rows
        val = torch.cat(val)
        keep = torch.ones(n, dtype=torch.bool, device=labels.device)
        keep[val] = False
        return rows[keep], val

    def _epoch(self, x, mask, labels, train, optimizer, generator):
        self.model_.train()
        perm = train[torch.randperm(len(train), generator=generator,
                                    device=generator.device).to(train.device)]
        total = 0.0
        for a in range(0, len(perm), self.batch_size):
            rows = perm[a:a + self.batch_size]
            loss = torch.nn.functional.cross_entropy(self.model_(x[rows], mask[rows]),
                                                     labels[rows])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += float(loss.detach()) * len(rows)
        self.history_["train_loss"].append(total / len(perm))

    @torch.no_grad()
    def _evaluate(self, x, mask, labels, rows):
        self.model_.eval()
        logits = self._logits(x[rows], mask[rows])
        loss = float(torch.nn.functional.cross_entropy(logits, labels[rows]))
        return loss, float((logits.argmax(1) == labels[rows]).float().mean())

    def _logits(self, x, mask, upto=None, chunk=1024, model=None):
        """The model's logits (or, with ``upto``, a block's input) by chunks of rows."""
        model = self.model_ if model is None else model
        return torch.cat([model(x[a:a + chunk], mask[a:a + chunk], upto=upto)
                          for a in range(0, len(x), chunk)])

    def _phase_a(self, x, mask, labels, generator):
        """Each block's particles by Langevin on the alignment of its pooled queries."""
        Y = target_codes(labels, len(self.classes_))
        for i, block in enumerate(self.model_.blocks):
            attention = block.attention
            with torch.no_grad():
                h = block.norm1(self._logits(x, mask, upto=i))
                q, _ = attention.queries_keys(h)  # (B, H, L, dh)
                pooled = masked_mean(q, mask[:, None, :, None], 2)  # (B, H, dh)
            samples = pooled.reshape(-1, pooled.shape[-1]).double()
            targets = Y.repeat_interleave(pooled.shape[1], dim=0)
            W = attention.particles.double()
            radius = 3.0 * float(W.square().sum(1).mean().sqrt())
            with progress(self.n_iter, self.verbose, f"phase A, block {i}") as bar:
                W, history = train_particles(
                    self.kernel, samples, targets, W, repulsion=self.repulsion,
                    n_iter=self.n_iter, step_size=self.step_size, beta=self.beta,
                    radius=radius, generator=generator, verbose=self.verbose, progress=bar)
            if not torch.isfinite(W).all():
                raise FloatingPointError("The particles diverged in phase A (non-finite "
                                         "values); lower step_size.")
            attention.particles.copy_(W.to(attention.particles.dtype))
            self.history_["phase_a"].append(history)

    # -- persistence -----------------------------------------------------------------------

    def __getstate__(self):
        """The fitted module as its settings and numpy weights: pickle and skops store
        plain arrays, never a torch object, and load on any machine."""
        state = dict(super().__getstate__())  # a copy: the estimator keeps its module
        if isinstance(state.get("model_"), torch.nn.Module):
            weights = {k: v.detach().cpu().numpy().copy()
                       for k, v in state["model_"].state_dict().items()}
            state["model_"] = {"config": dict(self._model_config), "weights": weights}
        return state

    def __setstate__(self, state):
        saved = state.get("model_")
        if isinstance(saved, dict):
            with torch.device("meta"):
                model = SequenceEncoder(**saved["config"])
            model = model.to_empty(device="cpu")
            model.load_state_dict({k: torch.from_numpy(np.asarray(v))
                                   for k, v in saved["weights"].items()})
            state = {**state, "model_": model.eval()}
        super().__setstate__(state)

    # -- prediction ----------------------------------------------------------------------

    def _proba(self, X):
        """Class probabilities as a float64 tensor on the device."""
        check_is_fitted(self)
        device = resolve_device(self.device, fallback=True,
                                data=X if isinstance(X, torch.Tensor) else None)
        x, mask = self._inputs(X, device, reset=False)
        # a copy on the device: predicting never changes fitted state (thread-safe)
        model = self.model_ if device.type == "cpu" else copy.deepcopy(self.model_).to(device)
        with torch.inference_mode():
            return torch.softmax(self._logits(x, mask, model=model).double(), dim=1)

    @follows_input
    def predict_proba(self, X):
        """Class probabilities (softmax of the logits).

        Parameters
        ----------
        X : array-like or tensor of shape (n_samples, length) or (n_samples, length, d)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            float64; under ``array_api_dispatch``, in X's namespace and on its device.
        """
        return self._proba(X)

    @follows_input
    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`."""
        return self._proba(X).clamp(min=1e-300).log()

    @follows_input
    def predict(self, X):
        """The most probable class of each sequence.

        Parameters
        ----------
        X : array-like of shape (n_samples, length) or (n_samples, length, d)

        Returns
        -------
        y : ndarray of shape (n_samples,)
        """
        best = to_numpy(self._proba(X).argmax(1))  # checks that the model is fitted first
        return self.classes_[best]


@deprecated("ParticleAttentionClassifier was renamed SequenceAttentionClassifier (it offers "
            "kernel, kNN and softmax attention); the old name will be removed in 0.3.")
class ParticleAttentionClassifier(SequenceAttentionClassifier):
    """The former name of :class:`SequenceAttentionClassifier`."""
