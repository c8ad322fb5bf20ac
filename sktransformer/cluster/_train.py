"""Training the learned k-means layer over a distribution of Gaussian-mixture tasks.

Two phases, neither of which can end worse than it started:

1. *search*: the layer is the circuit (:meth:`LearnedKMeansLayer.from_circuit`) and its two
   inverse temperatures are chosen by a gradient-free coordinate search on the validation
   tasks' objective after ``n_layers`` layers, the quantity the layer is judged by;
2. *training*: Adam on an unrolled loss, every weight free, keeping the checkpoint with the
   best validation objective, the searched circuit (step 0) included.

The validation objective is the mean natural log of the k-means objective after
``n_layers`` layers from the first ``k`` points of each of ``n_val_tasks`` fixed tasks.
"""

import math
import os
from numbers import Integral, Real

import numpy as np
import torch

from ..datasets import NOISES, make_gmm_tasks
from ..utils import logger, make_generator, progress, verbosity
from ._learned import (
    LearnedKMeansLayer,
    kmeans_objective,
    lloyd_step,
    smoothed_objective,
)

VALIDATION_SEED = 1_000_003  # the validation tasks never overlap a training seed's stream
CHECKPOINT_FORMAT = "sktransformer.LayerTrainer"
CHECKPOINT_VERSION = 2
# what may differ between a checkpoint and the trainer that resumes it
_RESUMABLE = ("n_steps", "checkpoint", "verbose")


class LayerTrainer:
    """Fit a :class:`LearnedKMeansLayer` to a task distribution.

    Tasks come from :func:`~sktransformer.datasets.make_gmm_tasks` (``n_features``,
    ``n_clusters``, ``n_samples``, ``noise``, ``sigma``); every run starts from the first
    ``k`` points of a task, as in the paper.

    With ``init="circuit"`` (the default) the layer starts as the k-means circuit and a
    gradient-free search picks its two inverse temperatures: a grid over the assignment's
    ``gamma`` (in units of the task's spread), then over ``update_gamma``, then a finer
    grid around both. Among the settings within one standard error of the best (paired
    over the validation tasks) it keeps the one with the largest ``gamma``: the collapse of
    every center onto the data's mean lies on the side of small ``gamma``. Then
    ``n_steps`` Adam steps train every weight on an unrolled loss: a task batch runs a
    random number of layers without gradients (0 to ``n_layers - depth``), then ``depth``
    layers (1 to ``unroll``) with them, and the loss is the mean log k-means objective of
    the centers (``loss_gamma=None``) or of the paper's smoothed objective. Gradients are
    clipped to norm ``clip``. Every ``val_every`` steps the layer is scored on the
    validation tasks; the best layer, step 0 included, is kept, so training never ends
    worse than the search. ``init="random"`` skips the search (the paper's start, and the
    only one for ``scratch=False``; use ``lr`` around 1e-2 there).

    Parameters
    ----------
    n_features, n_clusters : int, default=32, 10
        The task's ``d`` and ``k`` (the paper's main setting).
    scratch : bool, default=True
        Width ``d + k`` (``True``) or ``d`` (the ablation; needs ``init="random"``).
    init : {"circuit", "random"}, default="circuit"
    normalize : bool, default=True
        The layer divides each task by its spread (see :class:`LearnedKMeansLayer`).
    n_steps : int, default=200
        Adam steps after the search (0: the searched circuit).
    batch_size : int, default=16
        Tasks per step.
    n_samples : int, default=512
        Points per task.
    noise, sigma : default="gaussian", 0.1
        The task distribution.
    n_layers : int, default=20
        Layers the validation objective is measured after (the paper's 20).
    unroll : int, default=10
        Largest number of layers a loss is backpropagated through.
    lr : float, default=1e-4
        Adam's learning rate.
    loss_gamma : float or None, default=None
        ``None``: the log k-means objective; a float: the log of the paper's smoothed
        objective at that inverse temperature (gradients reach every center).
    clip : float, default=1.0
        Largest gradient norm.
    a, dropout : float, default=1.0, 0.0
        The layer's attention inverse temperature and attention dropout (the paper's 0.01).
    val_every, n_val_tasks : int, default=50, 128
        Validation period (in steps) and number of fixed validation tasks.
    patience, factor : default=5, 0.5
        ``ReduceLROnPlateau`` on the validation objective, counted in validations.
    checkpoint : str or None, default=None
        File written after the search and at every validation; a run with the same
        settings resumes from it (another ``n_steps`` extends it). A checkpoint of other
        settings, or an unreadable one, is a ``ValueError``.
    random_state : int or None, default=None
        Seeds the training tasks, the initial weights and the dropout (one local
        ``torch.Generator``); the validation tasks are fixed.
    verbose : int, default=1
        1: progress bars and a summary; 2: a message per validation.

    Attributes
    ----------
    layer_ : LearnedKMeansLayer
        The layer with the best validation objective.
    best_score_ : float
        Its validation objective (mean log k-means objective after ``n_layers`` layers).
    lloyd_score_ : float
        The same for Lloyd's algorithm from the same centers (the paper's loop).
    best_step_ : int
        The training step of ``layer_`` (0: the searched circuit, or the random start).
    search_ : list of dict
        Each setting the search tried: ``gamma``, ``update_gamma``, ``score``.
    gamma_, update_gamma_ : float or None
        The settings the search chose (``None`` with ``init="random"``).
    history_ : dict of lists
        ``step, loss, lr`` per step and ``val_step, val_score`` per validation.

    Examples
    --------
    >>> from sktransformer.cluster import LayerTrainer
    >>> trainer = LayerTrainer(4, 3, n_samples=64, n_steps=5, val_every=5, n_val_tasks=8,
    ...                        random_state=0, verbose=0).fit()
    >>> trainer.best_score_ <= trainer.search_[0]["score"]
    True
    """

    def __init__(self, n_features=32, n_clusters=10, *, scratch=True, init="circuit",
                 normalize=True, n_steps=200, batch_size=16, n_samples=512, noise="gaussian",
                 sigma=0.1, n_layers=20, unroll=10, lr=1e-4, loss_gamma=None, clip=1.0,
                 a=1.0, dropout=0.0, val_every=50, n_val_tasks=128, patience=5, factor=0.5,
                 checkpoint=None, random_state=None, verbose=1):
        self.n_features, self.n_clusters, self.scratch = n_features, n_clusters, scratch
        self.init, self.normalize = init, normalize
        self.n_steps, self.batch_size, self.n_samples = n_steps, batch_size, n_samples
        self.noise, self.sigma = noise, sigma
        self.n_layers, self.unroll, self.lr = n_layers, unroll, lr
        self.loss_gamma, self.clip, self.a, self.dropout = loss_gamma, clip, a, dropout
        self.val_every, self.n_val_tasks = val_every, n_val_tasks
        self.patience, self.factor = patience, factor
        self.checkpoint, self.random_state, self.verbose = checkpoint, random_state, verbose

    # -- settings ------------------------------------------------------------------------

    def _settings(self):
        return {name: getattr(self, name) for name in (
            "n_features", "n_clusters", "scratch", "init", "normalize", "n_steps",
            "batch_size", "n_samples", "noise", "sigma", "n_layers", "unroll", "lr",
            "loss_gamma", "clip", "a", "dropout", "val_every", "n_val_tasks", "patience",
            "factor", "checkpoint", "random_state", "verbose")}

    def _validate(self):
        def integer(name, low):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, Integral) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}.")

        def number(name, low, high=math.inf, closed=False):
            value = getattr(self, name)
            ok = (not isinstance(value, bool) and isinstance(value, Real)
                  and (low <= value if closed else low < value) and value < high)
            if not ok:
                bounds = f"[{low}, {high})" if closed else f"({low}, {high})"
                raise ValueError(f"{name} must be a number in {bounds}, got {value!r}.")

        for name in ("n_features", "n_clusters", "batch_size", "n_samples", "n_layers",
                     "unroll", "val_every", "n_val_tasks", "patience"):
            integer(name, 1)
        integer("n_steps", 0)
        integer("verbose", 0)
        for name in ("sigma", "lr", "clip", "a"):
            number(name, 0)
        number("dropout", 0, 1, closed=True)
        number("factor", 0, 1)
        if self.loss_gamma is not None:
            number("loss_gamma", 0)
        for name in ("scratch", "normalize"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}.")
        if self.init not in ("circuit", "random"):
            raise ValueError(f"init must be 'circuit' or 'random', got {self.init!r}.")
        if self.init == "circuit" and not self.scratch:
            raise ValueError("init='circuit' needs the one-hot scratch space (scratch=True); "
                             "the D = d ablation starts from init='random'.")
        if self.noise not in NOISES:
            raise ValueError(f"noise must be one of {NOISES}, got {self.noise!r}.")
        if self.n_samples < self.n_clusters:
            raise ValueError(f"n_samples={self.n_samples} should be >= "
                             f"n_clusters={self.n_clusters}.")
        if self.random_state is not None and (isinstance(self.random_state, bool) or
                                              not isinstance(self.random_state, Integral)):
            raise ValueError(f"random_state must be an int or None (it is stored in "
                             f"checkpoints), got {self.random_state!r}.")
        if self.checkpoint is not None and not isinstance(self.checkpoint, (str, os.PathLike)):
            raise ValueError(f"checkpoint must be a path or None, got {self.checkpoint!r}.")

    # -- tasks and scores ------------------------------------------------------------------

    def _tasks(self, n_tasks, seed):
        X, _ = make_gmm_tasks(n_tasks, self.n_samples, self.n_features, self.n_clusters,
                              sigma=self.sigma, noise=self.noise, random_state=seed)
        return torch.from_numpy(X)

    def _scores(self, layer, X):
        """Log k-means objective of each task after ``n_layers`` layers (eval mode)."""
        was_training = layer.training
        layer.eval()
        with torch.no_grad():
            out = [torch.log(kmeans_objective(x, layer(x, x[:, :self.n_clusters],
                                                       self.n_layers)))
                   for x in X.split(32)]
        layer.train(was_training)
        return torch.cat(out).double()

    def _lloyd_score(self, X):
        centers = X[:, :self.n_clusters]
        for _ in range(self.n_layers):
            centers = lloyd_step(X, centers)
        return float(torch.log(kmeans_objective(X, centers)).mean())

    # -- phase 1: the temperature search ---------------------------------------------------

    def _search(self, X, bar):
        """Coordinate search over (gamma, update_gamma) on a log2 grid; see the class doc."""
        tried = {}

        def score(log_g, log_u):
            key = (round(log_g, 4), round(log_u, 4))
            if key not in tried:
                layer = self._circuit(2.0 ** key[0], 2.0 ** key[1])
                tried[key] = self._scores(layer, X)
                bar.update(1)
            return float(tried[key].mean())

        def best_of(candidates):
            return min(candidates, key=lambda c: score(*c))

        log_u = math.log2(2.5)
        log_g = best_of([(g, log_u) for g in range(-1, 7)])[0]
        log_u = best_of([(log_g, log_u + du) for du in (-1.5, -1, -0.5, 0, 0.5, 1, 1.5)])[1]
        log_g = best_of([(log_g + dg, log_u) for dg in (-0.5, -0.25, 0, 0.25, 0.5)])[0]
        log_u = best_of([(log_g, log_u + du) for du in (-0.25, 0, 0.25)])[1]
        best = tried[(round(log_g, 4), round(log_u, 4))]
        # the one-standard-error rule, toward harder assignments
        close = [key for key, values in tried.items()
                 if float((values - best).mean()) <= float((values - best).std()) /
                 math.sqrt(len(best))]
        chosen = max(close, key=lambda key: (key[0], -float(tried[key].mean())))
        search = [{"gamma": 2.0 ** g, "update_gamma": 2.0 ** u,
                   "score": float(values.mean())} for (g, u), values in tried.items()]
        return 2.0 ** chosen[0], 2.0 ** chosen[1], search

    def _circuit(self, gamma, update_gamma):
        return LearnedKMeansLayer.from_circuit(
            self.n_features, self.n_clusters, gamma=gamma, update_gamma=update_gamma,
            normalize=self.normalize, a=self.a, dropout=self.dropout)

    # -- phase 2: training -------------------------------------------------------------------

    def _loss(self, layer, X, generator):
        depth = int(torch.randint(1, min(self.unroll, self.n_layers) + 1, (1,),
                                  generator=generator))
        warm = int(torch.randint(0, self.n_layers - depth + 1, (1,), generator=generator))
        centers = X[:, :self.n_clusters]
        with torch.no_grad():
            for _ in range(warm):
                centers = layer.step(X, centers)
        for _ in range(depth):
            centers = layer.step(X, centers, generator)
        objective = (kmeans_objective(X, centers) if self.loss_gamma is None
                     else smoothed_objective(X, centers, self.loss_gamma))
        return torch.log(objective).mean()

    def fit(self):
        """Search, then train (or resume from ``checkpoint``); return self."""
        self._validate()
        with verbosity(self.verbose):
            return self._fit()

    def _fit(self):
        generator = make_generator(self.random_state)
        X_val = self._tasks(self.n_val_tasks, VALIDATION_SEED)
        state = self._load() if self.checkpoint and os.path.exists(self.checkpoint) else None
        if state is not None:
            layer = self._make_layer(state["gamma"], state["update_gamma"], generator)
            search, start = state["search"], state["step"]
            gamma, update_gamma = state["gamma"], state["update_gamma"]
        else:
            start = 0
            gamma = update_gamma = None
            search = []
            if self.init == "circuit":
                with progress(20, self.verbose, "searching the temperatures") as bar:
                    gamma, update_gamma, search = self._search(X_val, bar)
                logger.info(f"search: gamma {gamma:.4g}, update_gamma {update_gamma:.4g}")
            layer = self._make_layer(gamma, update_gamma, generator)
        optimizer = torch.optim.Adam(layer.parameters(), lr=self.lr)
        scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer, mode="min", factor=self.factor, patience=self.patience)
        history = {"step": [], "loss": [], "lr": [], "val_step": [], "val_score": []}
        if state is not None:
            try:
                layer.load_state_dict(state["layer"])
                optimizer.load_state_dict(state["optimizer"])
                scheduler.load_state_dict(state["scheduler"])
                generator.set_state(state["generator"])
                best_state = state["best_state"]
                if {k: tuple(v.shape) for k, v in best_state.items()} != {
                        k: tuple(v.shape) for k, v in layer.state_dict().items()}:
                    raise ValueError("the best layer's weights do not fit the settings")
            except (KeyError, TypeError, ValueError, RuntimeError) as exc:
                raise ValueError(f"{self.checkpoint} is a damaged LayerTrainer checkpoint "
                                 f"({type(exc).__name__}: {exc}).") from exc
            history, best = state["history"], state["best"]
            logger.info(f"resumed from {self.checkpoint} at step {start}")
        else:
            best = {"score": float(self._scores(layer, X_val).mean()), "step": 0}
            best_state = _copy_state(layer)
            history["val_step"].append(0)
            history["val_score"].append(best["score"])
            if self.checkpoint:
                self._save(layer, optimizer, scheduler, generator, history, best, best_state,
                           search, gamma, update_gamma, 0)
        layer.train()
        with progress(self.n_steps, self.verbose, "training the k-means layer") as bar:
            bar.update(min(start, self.n_steps))
            for step in range(start, self.n_steps):
                X = self._tasks(self.batch_size,
                                int(torch.randint(0, 2**31 - 1, (1,), generator=generator)))
                loss = self._loss(layer, X, generator)
                if not torch.isfinite(loss):
                    logger.warning(f"step {step + 1}: the loss is not finite; training stops "
                                   f"and keeps the best layer (lower lr or clip).")
                    break
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(layer.parameters(), self.clip)
                optimizer.step()
                history["step"].append(step + 1)
                history["loss"].append(float(loss.detach()))
                history["lr"].append(optimizer.param_groups[0]["lr"])
                bar.update(1)
                if (step + 1) % self.val_every and step + 1 != self.n_steps:
                    continue
                score = float(self._scores(layer, X_val).mean())
                scheduler.step(score)
                history["val_step"].append(step + 1)
                history["val_score"].append(score)
                if score < best["score"]:
                    best = {"score": score, "step": step + 1}
                    best_state = _copy_state(layer)
                bar.set_postfix(val=f"{score:.4f}", best=f"{best['score']:.4f}")
                if self.verbose > 1:
                    logger.info(f"step {step + 1}: validation {score:.4f}, best "
                                f"{best['score']:.4f} (step {best['step']})")
                if self.checkpoint:
                    self._save(layer, optimizer, scheduler, generator, history, best,
                               best_state, search, gamma, update_gamma, step + 1)
        layer.load_state_dict(best_state)
        self.layer_ = layer.eval()
        self.best_score_, self.best_step_ = best["score"], best["step"]
        self.lloyd_score_ = self._lloyd_score(X_val)
        self.gamma_, self.update_gamma_ = gamma, update_gamma
        self.search_, self.history_ = search, history
        logger.info(f"validation objective {self.best_score_:.4f} (step {self.best_step_}); "
                    f"Lloyd {self.lloyd_score_:.4f}")
        return self

    def _make_layer(self, gamma, update_gamma, generator):
        if self.init == "circuit":
            return self._circuit(gamma, update_gamma)
        return LearnedKMeansLayer(self.n_features, self.n_clusters, scratch=self.scratch,
                                  normalize=self.normalize, a=self.a, dropout=self.dropout,
                                  generator=generator)

    # -- checkpoints ---------------------------------------------------------------------

    def _save(self, layer, optimizer, scheduler, generator, history, best, best_state,
              search, gamma, update_gamma, step):
        settings = {k: v for k, v in self._settings().items() if k not in _RESUMABLE}
        state = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION,
                 "settings": settings, "layer": layer.state_dict(),
                 "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                 "generator": generator.get_state(), "history": history, "best": best,
                 "best_state": best_state, "search": search, "gamma": gamma,
                 "update_gamma": update_gamma, "step": step}
        tmp = f"{self.checkpoint}.tmp"
        torch.save(state, tmp)
        os.replace(tmp, self.checkpoint)

    def _load(self):
        path = self.checkpoint
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # empty, truncated, or not a weights-only file
            raise ValueError(f"{path} is not a readable LayerTrainer checkpoint "
                             f"({type(exc).__name__}: {exc}); delete it to start afresh."
                             ) from exc
        if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"{path} is not a LayerTrainer checkpoint.")
        if state.get("version") != CHECKPOINT_VERSION:
            raise ValueError(f"{path} is a LayerTrainer checkpoint of version "
                             f"{state.get('version')!r}; this sktransformer reads "
                             f"{CHECKPOINT_VERSION}.")
        saved = state.get("settings")
        if not isinstance(saved, dict):
            raise ValueError(f"{path} is a damaged LayerTrainer checkpoint (no settings).")
        ours = {k: v for k, v in self._settings().items() if k not in _RESUMABLE}
        differ = [f"{k}={saved.get(k)!r} there, {v!r} here" for k, v in ours.items()
                  if saved.get(k) != v]
        if differ:
            raise ValueError(f"{path} was written with other settings ({'; '.join(differ)}); "
                             f"use the same settings to resume, or another checkpoint path.")
        step = state.get("step")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"{path} is a damaged LayerTrainer checkpoint (step {step!r}).")
        return state


def _copy_state(layer):
    return {k: v.detach().clone() for k, v in layer.state_dict().items()}


def evaluate(layer, X, init, n_steps=20):
    """Mean natural log of the k-means objective after 1..n_steps layers, and Lloyd's.

    Returns
    -------
    learned, lloyd : ndarray of shape (n_steps + 1,)
        Index 0 is the objective of ``init``.
    """
    X, centers = torch.as_tensor(X), torch.as_tensor(init)
    learned, lloyd = [kmeans_objective(X, centers)], [kmeans_objective(X, centers)]
    ours, theirs = centers, centers
    with torch.no_grad():
        for _ in range(n_steps):
            ours = layer.step(X, ours)
            theirs = lloyd_step(X, theirs)
            learned.append(kmeans_objective(X, ours))
            lloyd.append(kmeans_objective(X, theirs))
    log_mean = [float(torch.log(v).mean()) for v in learned], [
        float(torch.log(v).mean()) for v in lloyd]
    return np.array(log_mean[0]), np.array(log_mean[1])
