"""What the Dask workers run: one pass of the circuit over one block of rows.

Each function takes a block of X (numpy, validated lazily by the driver), its weights (or
None), the block's state from the last pass (a dict of per-row arrays kept on the worker)
and the small arrays broadcast by the client (centers, shift, thresholds). It returns
``(state, summary)``: the state stays on the worker for the next pass, the summary (a
dict of ``k x d``-sized arrays and scalars) is reduced in a tree and sent to the client.
Nothing that grows with the block's rows is ever in a summary.

The layer is the in-memory one (``_lloyd.layer``) on the worker's device: ``device="auto"``
is resolved where the block runs, so a worker with a GPU computes on it. Inside a
``dask.distributed`` worker torch runs one thread per Dask thread.
"""

import numpy as np
import torch

from ..attention import group_sums
from ..utils import resolve_device, to_numpy, to_tensor
from . import _lloyd


def _worker_threads():
    """One torch thread per Dask thread, inside a dask.distributed worker (Dask's own model:
    a worker runs ``nthreads`` tasks at once)."""
    try:
        from distributed import get_worker

        get_worker()
    except (ImportError, ValueError):
        return
    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)


def _tokens(X, spec, shift):
    device = resolve_device(spec["device"], fallback=True)
    Xt = to_tensor(X, device)
    rows = _lloyd.layer_rows(Xt.shape[0], spec["n_clusters"], Xt.shape[1], spec["batch_size"],
                             device)
    return _lloyd.PointTokens(Xt, rows=rows, attention=spec["attention"],
                              shift=to_tensor(shift, device, dtype=Xt.dtype))


def _weights(w, points):
    if w is None:
        return points.X.new_ones(points.n)
    return to_tensor(w, points.X.device, dtype=points.X.dtype)


def _host_weights(w, n):
    """The block's weights as float64 on the host (ones without ``sample_weight``)."""
    return np.ones(n) if w is None else np.asarray(w, dtype=np.float64)


def _uniforms(seed, n):
    """``n`` uniform draws from a local generator seeded for this block and pass."""
    return torch.rand(n, dtype=torch.float64,
                      generator=torch.Generator().manual_seed(int(seed))).numpy()


def add(a, b):
    """Sum of two summaries, key by key."""
    return {key: a[key] + b[key] for key in a}


def stats(X, w, state, spec):
    """Rows, column means and squared deviations (float64, for Chan's parallel variance),
    the largest magnitude, and whether X and the weights are valid."""
    _worker_threads()
    X64 = X.astype(np.float64)
    n = X.shape[0]
    with np.errstate(all="ignore"):  # non-finite or huge values: reported, not warned
        mean = X64.mean(0) if n else np.zeros(X.shape[1])
        summary = {
            "n": n, "mean": mean, "m2": ((X64 - mean) ** 2).sum(0),
            "max_abs": [float(np.abs(X).max()) if X.size else 0.0],
            "not_finite": int(n and not np.isfinite(X).all()),
            "w_total": float(n) if w is None else float(np.sum(w, dtype=np.float64)),
            "w_bad": 0 if w is None else int(not np.isfinite(w).all() or (w < 0).any()),
        }
    return state, summary


def merge_stats(a, b):
    """Chan, Golub & LeVeque's pairwise combination of two blocks' means and deviations."""
    n = a["n"] + b["n"]
    if a["n"] == 0 or b["n"] == 0:
        mean, m2 = (a["mean"], a["m2"]) if b["n"] == 0 else (b["mean"], b["m2"])
    else:
        with np.errstate(over="ignore", invalid="ignore"):  # the overflow check follows
            delta = b["mean"] - a["mean"]
            mean = a["mean"] + delta * (b["n"] / n)
            m2 = a["m2"] + b["m2"] + delta ** 2 * (a["n"] * b["n"] / n)
    out = add(a, b)
    out.update(n=n, mean=mean, m2=m2, max_abs=[max(a["max_abs"][0], b["max_abs"][0])])
    return out


def layer(X, w, state, spec, centers, shift):
    """The assignment block, and the mean update's sums when the update is a mean.

    The state keeps the labels and squared distances; ``changed`` counts the labels that
    differ from the last layer's (the strict convergence of ``run_layers``).
    """
    _worker_threads()
    with torch.inference_mode():
        points = _tokens(X, spec, shift)
        wt = None if w is None else _weights(w, points)
        c = to_tensor(centers, points.X.device)
        labels = torch.empty(points.n, dtype=torch.long, device=points.X.device)
        min_dist = points.X.new_empty(points.n)
        accumulate = spec["update"] == "mean"
        sums, weight = _lloyd.layer(points, wt, c, labels=labels, min_dist=min_dist,
                                    temperature=spec["temperature"], accumulate=accumulate)
        cost = min_dist if wt is None else min_dist * wt
        new_state = {"labels": to_numpy(labels).astype(np.int32),
                     "min_dist": to_numpy(min_dist)}
        if state is not None and "marked" in state:  # trimming's last output labels
            new_state["marked"] = state["marked"]
        previous = None if state is None else state.get("labels")
        summary = {"cost": float(cost.sum()), "changed": _changed(previous, new_state["labels"]),
                   "counts": np.bincount(new_state["labels"], minlength=c.shape[0])}
        if accumulate:
            summary.update(sums=to_numpy(sums), weight=to_numpy(weight))
    return new_state, summary


def _changed(previous, labels):
    """Labels that differ from the last pass's (all of them on the first)."""
    if previous is None:
        return labels.shape[0]
    return int((previous != labels).sum())


def below(X, w, state, spec, lo, hi, n_bins):
    """The weight at or below ``lo`` and a histogram of the weight in ``(lo, hi]``
    (``n_bins`` equal bins), with the count, minimum and maximum there: one round of the
    exact distributed selection of the trimming threshold."""
    dist = state["min_dist"].astype(np.float64)
    wt = _host_weights(w, len(dist))
    inside = (dist > lo) & (dist <= hi)
    hist = np.zeros(n_bins)
    if inside.any() and np.isfinite(hi):  # the first round only finds the largest
        edges = np.linspace(lo, hi, n_bins + 1)
        bins = np.clip(np.searchsorted(edges, dist[inside], side="left") - 1, 0, n_bins - 1)
        np.add.at(hist, bins, wt[inside])
    return state, {
        "at_or_below": float(wt[dist <= lo].sum()), "hist": hist,
        "count": int(inside.sum()),
        "lo_hi": np.array([dist[inside].min() if inside.any() else np.inf,
                           -(dist[inside].max() if inside.any() else -np.inf)]),
    }


def min_of(a, b):
    """Combine two :func:`below` summaries (sums, and the elementwise min of ``lo_hi``)."""
    out = add(a, b)
    out["lo_hi"] = np.minimum(a["lo_hi"], b["lo_hi"])
    return out


def values_in(X, w, state, spec, lo, hi):
    """The distances in ``(lo, hi]`` and their weights: the last round of the selection,
    when few are left."""
    dist = state["min_dist"].astype(np.float64)
    inside = (dist > lo) & (dist <= hi)
    return state, {"values": dist[inside], "weights": _host_weights(w, len(dist))[inside]}


def concat(a, b):
    return {key: np.concatenate([a[key], b[key]]) for key in a}


def trim_sums(X, w, state, spec, centers, shift, threshold):
    """Trimmed k-means' update pass: the members within ``threshold`` are averaged, the
    others marked -1 (the in-memory ``Trim`` update with a global threshold)."""
    _worker_threads()
    with torch.inference_mode():
        points = _tokens(X, spec, shift)
        labels = to_tensor(state["labels"], points.X.device, dtype=torch.long)
        min_dist = to_tensor(state["min_dist"], points.X.device)
        kept = min_dist <= threshold
        wt = _weights(w, points) * kept
        marked = torch.where(kept, labels, -1)
        k = centers.shape[0]
        sums = _lloyd.weighted_sums(points, labels, wt, k)  # trimmed: weight 0
        weight = group_sums(wt, labels, k)
        marked = to_numpy(marked).astype(np.int32)
        summary = {"sums": to_numpy(sums), "weight": to_numpy(weight),
                   "cost": float((min_dist * wt).sum()),
                   "changed": _changed(state.get("marked"), marked),
                   "trimmed": int((~kept).sum()),
                   "far_kept": np.array([float(min_dist[kept].max()) if kept.any() else 0.0])}
    return {**state, "marked": marked}, summary


def trim_merge(a, b):
    out = add(a, b)
    out["far_kept"] = np.maximum(a["far_kept"], b["far_kept"])
    return out


def farthest(X, w, state, spec, shift, n_far, threshold):
    """The block's ``n_far`` points farthest from their centers (among the kept ones when a
    trimming threshold is given), for the relocation of empty clusters."""
    dist = state["min_dist"].astype(np.float64)
    if threshold is not None:
        dist = np.where(dist <= threshold, dist, -1.0)
    top = np.argsort(-dist, kind="stable")[:n_far]
    rows = X[top].astype(X.dtype) - shift
    wt = np.ones(len(top), X.dtype) if w is None else np.asarray(w, X.dtype)[top]
    return state, {"dist": dist[top], "rows": rows, "w": wt, "labels": state["labels"][top]}


def farthest_merge(a, b):
    out = concat(a, b)
    n_far = max(len(a["dist"]), len(b["dist"]))
    top = np.argsort(-out["dist"], kind="stable")[:n_far]
    return {key: value[top] for key, value in out.items()}


def random_keys(X, w, state, spec, seed, n_keys):
    """Efraimidis-Spirakis keys ``log(u) / w``: the rows with the ``n_keys`` largest keys of
    all blocks are a draw without replacement in proportion to the weights."""
    wt = _host_weights(w, X.shape[0])
    with np.errstate(divide="ignore"):
        keys = np.where(wt > 0, np.log(_uniforms(seed, X.shape[0])) / wt, -np.inf)
    top = np.argsort(-keys, kind="stable")[:n_keys]
    return state, {"dist": keys[top], "rows": X[top], "w": wt[top],
                   "positive": np.array([int((wt > 0).sum())])}


def random_merge(a, b):
    positive = a["positive"] + b["positive"]
    out = farthest_merge({k: v for k, v in a.items() if k != "positive"},
                         {k: v for k, v in b.items() if k != "positive"})
    return {**out, "positive": positive}


def closest(X, w, state, spec, shift, new_centers):
    """k-means||: the squared distance to the closest candidate so far, updated with the
    new candidates, and its weighted sum (the potential)."""
    _worker_threads()
    with torch.inference_mode():
        points = _tokens(X, spec, shift)
        d2 = _lloyd.sq_distances(points, to_tensor(new_centers, points.X.device))
        d2 = to_numpy(d2.min(1).values).astype(np.float64)
    if state is not None and "closest" in state:
        d2 = np.minimum(state["closest"], d2)
    return {"closest": d2}, {"potential": float((_host_weights(w, len(d2)) * d2).sum())}


def oversample(X, w, state, spec, seed, scale):
    """k-means||: each row is drawn independently with probability
    ``min(1, scale * w D^2)`` (``scale = l / potential``)."""
    drawn = (_uniforms(seed, X.shape[0])
             < scale * _host_weights(w, X.shape[0]) * state["closest"])
    return state, {"rows": X[drawn]}


def candidate_weights(X, w, state, spec, shift, candidates):
    """k-means||: the weight of the rows closest to each candidate."""
    _worker_threads()
    with torch.inference_mode():
        points = _tokens(X, spec, shift)
        labels, _ = _lloyd.assign(points, to_tensor(candidates, points.X.device))
        wt = _weights(w, points).to(torch.float64)
        out = group_sums(wt, labels, candidates.shape[0])
    return state, {"weight": to_numpy(out)}
