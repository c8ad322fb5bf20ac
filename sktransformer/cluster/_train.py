"""Training the learned k-means layer over a distribution of Gaussian-mixture tasks."""

import logging
import math
import os

import numpy as np
import torch
from tqdm.auto import tqdm

from ..datasets import make_gmm_tasks
from ._learned import LearnedKMeansLayer, kmeans_objective, lloyd_step, smoothed_objective

logger = logging.getLogger(__name__)

VALIDATION_SEED = 1_000_003  # the validation tasks never overlap a training seed's stream


class LayerTrainer:
    """Fit a :class:`LearnedKMeansLayer` to a task distribution (the paper's recipe).

    Each step draws ``batch_size`` fresh tasks from :func:`~sktransformer.datasets.make_gmm_tasks`,
    starts from the first ``k`` points of each task, applies the layer once and takes an Adam
    step on the smoothed k-means objective (``gamma``). Every ``val_every`` steps it scores
    the layer on ``n_val_tasks`` fixed tasks, as the mean ratio of its one-step k-means
    objective to Lloyd's, lowers the learning rate when that stalls (``ReduceLROnPlateau``),
    keeps the best layer, and writes a checkpoint from which an interrupted run resumes.

    Parameters
    ----------
    n_features, n_clusters : int, default=32, 10
        The task's ``d`` and ``k`` (the paper's main setting).
    scratch : bool, default=True
        Width ``d + k`` (``True``) or ``d`` (the ablation).
    n_steps : int, default=2000
        Optimizer steps (the paper runs 10,000).
    batch_size : int, default=32
        Tasks per step.
    n_samples : int, default=512
        Points per task.
    lr : float, default=0.01
        Adam's initial learning rate.
    gamma : float, default=10.0
        Temperature of the smoothed objective.
    a, dropout : float, default=1.0, 0.01
        The layer's attention inverse temperature and attention dropout.
    val_every, n_val_tasks : int, default=50, 320
    patience, factor : default=5, 0.5
        ReduceLROnPlateau's settings, counted in validations.
    noise, sigma : default="gaussian", 0.1
        The task distribution.
    checkpoint : str or None, default=None
        File to write every validation and resume from when it exists.
    random_state : int, default=0
        Seeds the weights, the tasks and the dropout (one local ``torch.Generator``).
    verbose : int, default=1
        Show a progress bar (tqdm).

    Attributes
    ----------
    layer_ : LearnedKMeansLayer
        The layer with the best validation score.
    history_ : dict of lists
        ``step, loss, lr`` per step and ``val_step, val_score`` per validation.
    best_score_ : float
    """

    def __init__(self, n_features=32, n_clusters=10, *, scratch=True, n_steps=2000,
                 batch_size=32, n_samples=512, lr=0.01, gamma=10.0, a=1.0, dropout=0.01,
                 val_every=50, n_val_tasks=320, patience=5, factor=0.5, noise="gaussian",
                 sigma=0.1, init="random", init_gamma=20.0, checkpoint=None, random_state=0,
                 verbose=1):
        self.n_features, self.n_clusters, self.scratch = n_features, n_clusters, scratch
        self.n_steps, self.batch_size, self.n_samples = n_steps, batch_size, n_samples
        self.lr, self.gamma, self.a, self.dropout = lr, gamma, a, dropout
        self.val_every, self.n_val_tasks = val_every, n_val_tasks
        self.patience, self.factor = patience, factor
        self.noise, self.sigma = noise, sigma
        self.init, self.init_gamma = init, init_gamma
        self.checkpoint, self.random_state, self.verbose = checkpoint, random_state, verbose

    def _tasks(self, n_tasks, generator):
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator))
        X, _ = make_gmm_tasks(n_tasks, self.n_samples, self.n_features, self.n_clusters,
                              sigma=self.sigma, noise=self.noise, random_state=seed)
        return torch.from_numpy(X)

    def _validation(self):
        X, _ = make_gmm_tasks(self.n_val_tasks, self.n_samples, self.n_features,
                              self.n_clusters, sigma=self.sigma, noise=self.noise,
                              random_state=VALIDATION_SEED)
        X = torch.from_numpy(X)
        init = X[:, :self.n_clusters]
        return X, init, kmeans_objective(X, lloyd_step(X, init))

    def _score(self, layer, validation):
        X, init, lloyd = validation
        layer.eval()
        with torch.no_grad():
            ratios = [kmeans_objective(X[s:s + 64], layer.step(X[s:s + 64], init[s:s + 64]))
                      / lloyd[s:s + 64] for s in range(0, len(X), 64)]
        layer.train()
        return float(torch.cat(ratios).mean())

    def fit(self):
        """Train (or resume from ``checkpoint``) for ``n_steps``; return self."""
        generator = torch.Generator().manual_seed(int(self.random_state))
        if self.init == "circuit":
            layer = LearnedKMeansLayer.from_circuit(self.n_features, self.n_clusters,
                                                    gamma=self.init_gamma, a=self.a,
                                                    dropout=self.dropout)
        else:
            layer = LearnedKMeansLayer(self.n_features, self.n_clusters, scratch=self.scratch,
                                       a=self.a, dropout=self.dropout, generator=generator)
        optimizer = torch.optim.Adam(layer.parameters(), lr=self.lr)
        scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer, mode="min", factor=self.factor, patience=self.patience)
        history = {"step": [], "loss": [], "lr": [], "val_step": [], "val_score": []}
        best = {"score": math.inf, "state": None}
        start = 0
        if self.checkpoint and os.path.exists(self.checkpoint):
            state = torch.load(self.checkpoint, map_location="cpu", weights_only=True)
            layer.load_state_dict(state["layer"])
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            generator.set_state(state["generator"])
            history, best, start = state["history"], state["best"], state["step"]
            logger.info("resumed from %s at step %d", self.checkpoint, start)
        validation = self._validation()
        layer.train()
        bar = tqdm(total=self.n_steps, initial=start, disable=not self.verbose,
                   desc="training the k-means layer")
        for step in range(start, self.n_steps):
            X = self._tasks(self.batch_size, generator)
            centers = layer.step(X, X[:, :self.n_clusters], generator)
            loss = smoothed_objective(X, centers, self.gamma).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            history["step"].append(step + 1)
            history["loss"].append(float(loss.detach()))
            history["lr"].append(optimizer.param_groups[0]["lr"])
            bar.update(1)
            if (step + 1) % self.val_every == 0 or step + 1 == self.n_steps:
                score = self._score(layer, validation)
                scheduler.step(score)
                history["val_step"].append(step + 1)
                history["val_score"].append(score)
                if score < best["score"]:
                    best = {"score": score,
                            "state": {k: v.detach().clone() for k, v in
                                      layer.state_dict().items()}}
                bar.set_postfix(loss=f"{float(loss.detach()):.2f}", val=f"{score:.4f}",
                                best=f"{best['score']:.4f}")
                if self.checkpoint:
                    self._save(layer, optimizer, scheduler, generator, history, best, step + 1)
        bar.close()
        if best["state"] is not None:
            layer.load_state_dict(best["state"])
        self.layer_ = layer.eval()
        self.history_ = history
        self.best_score_ = best["score"]
        return self

    def _save(self, layer, optimizer, scheduler, generator, history, best, step):
        state = {"layer": layer.state_dict(), "optimizer": optimizer.state_dict(),
                 "scheduler": scheduler.state_dict(), "generator": generator.get_state(),
                 "history": history, "best": best, "step": step}
        tmp = f"{self.checkpoint}.tmp"
        torch.save(state, tmp)
        os.replace(tmp, self.checkpoint)


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
