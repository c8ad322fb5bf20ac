"""``python -m sktransformer``: the demo, every family against its classical peer on data that
needs no download, in under a minute on 2 cores.

1. k-means and its variants against scikit-learn's ``KMeans`` on iris, wine and digits
   (standardized, k = the class count), all from the same k-means++ start.
2. Selecting k: ``GridSearchCV`` over ``n_clusters`` with each estimator's default score.
3. The learned clustering layer shipped with the package against Lloyd's iteration, on
   unseen Gaussian-mixture tasks (d = 32, k = 10).
4. Learned kernels: ``ParticleKernelClassifier(64)`` against ``RBFSampler(64)`` +
   ``LogisticRegression``, 3-fold CV on breast_cancer and wine.
5. kNN attention: ``KNNAttentionRegressor`` against ``KNeighborsRegressor``, 3-fold R^2 on
   diabetes.
6. Sequence models: ``SequenceAttentionClassifier`` with learned particles against fixed
   random features on a task that needs attention (is token 1 before token 2?).

Every time is the median of 3 fits after an untimed one (so that loading compiled code is
not counted), on the threads torch and scikit-learn use by default.
"""

import argparse
import time

import numpy as np
from sklearn.cluster import KMeans, kmeans_plusplus
from sklearn.datasets import (
    load_breast_cancer,
    load_diabetes,
    load_digits,
    load_iris,
    load_wine,
    make_blobs,
)
from sklearn.metrics import adjusted_rand_score
from sklearn.preprocessing import StandardScaler

from . import (
    RobustTransformerKMeans,
    SphericalTransformerKMeans,
    TransformerKMeans,
    TransformerKMedoids,
    TrimmedTransformerKMeans,
)

DATASETS = {"iris": load_iris, "wine": load_wine, "digits": load_digits}


def _fit_time(make, X, repeats=3):
    """The fitted estimator of the last of ``repeats`` timed fits (after an untimed one)
    and the median seconds of a fit."""
    make().fit(X)
    times = []
    for _ in range(repeats):
        estimator = make()
        start = time.perf_counter()
        estimator.fit(X)
        times.append(time.perf_counter() - start)
    return estimator, float(np.median(times))


def _speed(ratio):
    if ratio < 0.9:
        return f"{1 / ratio:.1f}x faster"
    if ratio > 1.1:
        return f"{ratio:.1f}x slower"
    return "as fast"


def clustering(names=("iris", "wine", "digits"), device="auto", random_state=0):
    """Every method on every data set: rows of dicts."""
    rows = []
    for name in names:
        data = DATASETS[name]()
        X = StandardScaler().fit_transform(data.data)
        k = len(np.unique(data.target))
        init, _ = kmeans_plusplus(X, k, random_state=random_state)
        common = dict(init=init, n_init=1, max_iter=300)
        reference, ref_s = _fit_time(lambda: KMeans(k, algorithm="lloyd", **common), X)
        ref_truth = adjusted_rand_score(data.target, reference.labels_)
        rows.append({"data": f"{name} ({X.shape[0]} x {X.shape[1]}, k={k})",
                     "method": "scikit-learn KMeans", "ms": 1e3 * ref_s, "ratio": 1.0,
                     "ari_vs_kmeans": 1.0, "ari_vs_truth": ref_truth, "verdict": "the peer"})
        for label, cls, params in [
            ("TransformerKMeans", TransformerKMeans, {}),
            ("TransformerKMeans soft t=1", TransformerKMeans, {"temperature": 1.0}),
            ("SphericalTransformerKMeans", SphericalTransformerKMeans, {}),
            ("TrimmedTransformerKMeans", TrimmedTransformerKMeans, {"trim": 0.05}),
            ("RobustTransformerKMeans", RobustTransformerKMeans, {}),
            ("TransformerKMedoids", TransformerKMedoids, {}),
        ]:
            est, seconds = _fit_time(lambda: cls(k, device=device, **common, **params), X)
            same = adjusted_rand_score(reference.labels_, est.labels_)
            truth = adjusted_rand_score(data.target, est.labels_)
            ratio = seconds / ref_s
            if same > 0.9999:
                verdict = f"KMeans' labels, {_speed(ratio)}"
            else:
                verdict = (f"{'closer to' if truth > ref_truth else 'further from'} the "
                           f"classes than KMeans, {_speed(ratio)}")
            rows.append({"data": "", "method": label, "ms": 1e3 * seconds, "ratio": ratio,
                         "ari_vs_kmeans": same, "ari_vs_truth": truth, "verdict": verdict})
    return rows


def format_table(rows):
    header = (f"{'data':<25} {'method':<27} {'fit ms':>7} {'x KMeans':>8} "
              f"{'ARI KMeans':>10} {'ARI truth':>9}  verdict")
    lines = [header, f"{'':<25} {'':<27} {'lower':>7} {'lower':>8} "
                     f"{'':>10} {'higher':>9}", "-" * (len(header) + 30)]
    for r in rows:
        lines.append(f"{r['data']:<25} {r['method']:<27} {r['ms']:>7.1f} {r['ratio']:>8.2f} "
                     f"{r['ari_vs_kmeans']:>10.3f} {r['ari_vs_truth']:>9.3f}  {r['verdict']}")
    return "\n".join(lines)


def select_k(random_state=0):
    """The k that GridSearchCV picks over 2..10 on blobs of 6 centers, by each default
    score."""
    from sklearn.model_selection import GridSearchCV

    X, _ = make_blobs(1000, centers=6, n_features=5, random_state=random_state)
    grid = {"n_clusters": list(range(2, 11))}
    return {label: GridSearchCV(model, grid).fit(X).best_params_["n_clusters"]
            for label, model in (
                ("TransformerKMeans (held-out likelihood)",
                 TransformerKMeans(random_state=random_state)),
                ("scikit-learn KMeans (minus the inertia)",
                 KMeans(random_state=random_state)))}


def learned_layer(n_tasks=64, random_state=0):
    """Mean log k-means objective after 20 layers: the shipped layer and Lloyd."""
    import torch

    from .cluster import LearnedKMeansLayer, kmeans_objective, lloyd_step
    from .datasets import make_gmm_tasks

    X = torch.from_numpy(make_gmm_tasks(n_tasks, random_state=random_state + 12345)[0])
    layer = LearnedKMeansLayer.shipped()
    ours = theirs = X[:, :10]
    with torch.no_grad():
        for _ in range(20):
            ours, theirs = layer.step(X, ours), lloyd_step(X, theirs)
    return {name: float(torch.log(kmeans_objective(X, c)).mean())
            for name, c in (("learned layer", ours), ("Lloyd", theirs))}


def _cv(model, X, y, scoring):
    from sklearn.model_selection import KFold, StratifiedKFold, cross_validate

    folds = (StratifiedKFold if scoring[0] == "accuracy" else KFold)(3, shuffle=True,
                                                                      random_state=0)
    result = cross_validate(model, X, y, cv=folds, scoring=list(scoring))
    return [float(np.mean(result[f"test_{s}"])) for s in scoring] + [
        float(np.median(result["fit_time"]))]


def learned_kernels(device="auto", random_state=0):
    """3-fold accuracy, log loss and fit seconds of learned and fixed 64-feature kernels."""
    from sklearn.kernel_approximation import RBFSampler
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    from . import ParticleKernelClassifier

    rows = []
    for name, loader in (("breast_cancer", load_breast_cancer), ("wine", load_wine)):
        X, y = loader(return_X_y=True)
        for label, model in (
                ("ParticleKernelClassifier(64)",
                 ParticleKernelClassifier(64, device=device, random_state=random_state)),
                ("RBFSampler(64) + LR", make_pipeline(
                    RBFSampler(gamma="scale", n_components=64, random_state=random_state),
                    LogisticRegression(max_iter=1000)))):
            accuracy, loss, seconds = _cv(make_pipeline(StandardScaler(), model), X, y,
                                          ("accuracy", "neg_log_loss"))
            rows.append((name, label, accuracy, -loss, seconds))
    return rows


def knn_attention(device="auto", random_state=0):
    """3-fold R^2 and fit seconds of kNN attention against k-nearest neighbors."""
    from sklearn.neighbors import KNeighborsRegressor
    from sklearn.pipeline import make_pipeline

    from . import KNNAttentionRegressor

    X, y = load_diabetes(return_X_y=True)
    return [(label, *_cv(make_pipeline(StandardScaler(), model), X, y, ("r2",)))
            for label, model in (
                ("KNNAttentionRegressor", KNNAttentionRegressor(
                    device=device, random_state=random_state)),
                ("KNeighborsRegressor(16, distance)", KNeighborsRegressor(
                    16, weights="distance")))]


def sequences(device="auto", random_state=0, n=1500, length=24, max_epochs=25):
    """Test accuracy and fit seconds on the order task: learned particles and fixed
    features."""
    from . import SequenceAttentionClassifier
    from .datasets import make_order_task

    X, y = make_order_task(n, length=length, random_state=random_state)
    Xt, yt = make_order_task(500, length=length, random_state=random_state + 1)
    rows = []
    for label, params in (("learned particles", {}), ("fixed random features",
                                                      {"features": "fixed"})):
        start = time.perf_counter()
        clf = SequenceAttentionClassifier(max_epochs=max_epochs, device=device,
                                          random_state=random_state, **params).fit(X, y)
        rows.append((label, clf.score(Xt, yt), time.perf_counter() - start))
    return rows


def _verdict(ours, theirs, higher_better=True, tie=0.005):
    gap = (ours - theirs) if higher_better else (theirs - ours)
    return "ahead" if gap > tie else "behind" if gap < -tie else "level"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m sktransformer", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", nargs="+", choices=list(DATASETS), default=list(DATASETS))
    parser.add_argument("--device", default="auto")
    parser.add_argument("--random-state", type=int, default=0)
    args = parser.parse_args(argv)
    kw = dict(device=args.device, random_state=args.random_state)
    start = time.perf_counter()
    print("1. k-means and its variants against scikit-learn's KMeans, same start. fit ms: "
          "median of 3 fits (lower is better); x KMeans: over KMeans' time (below 1 is "
          "faster); ARI: adjusted Rand index with KMeans' labels and with the classes "
          "(1 is equal; higher is better)\n")
    print(format_table(clustering(args.data, **kw)), flush=True)

    print("\n2. Selecting k: GridSearchCV over n_clusters 2..10 on blobs of 6 centers, "
          "each estimator's default score\n")
    for label, k in select_k(args.random_state).items():
        print(f"   {label:<42} picks k = {k:<3} {'right' if k == 6 else 'wrong'}")

    scores = learned_layer(random_state=args.random_state)
    print("\n3. The learned clustering layer against Lloyd: mean log k-means objective after "
          "20 layers on 64 unseen tasks (lower is better)\n")
    print(f"   learned layer {scores['learned layer']:.3f}, Lloyd {scores['Lloyd']:.3f}: the "
          f"learned layer is {_verdict(scores['learned layer'], scores['Lloyd'], False)}",
          flush=True)

    print("\n4. Learned kernels, 64 features, 3-fold CV: accuracy (higher is better), log "
          "loss (lower is better), median fit seconds (lower is better)\n")
    rows = learned_kernels(**kw)
    for (name, label, accuracy, loss, seconds), peer in zip(rows, [None, *rows[:-1]]):
        verdict = "" if label != "RBFSampler(64) + LR" else (
            f"particles {_verdict(peer[2], accuracy)} on accuracy, "
            f"{_verdict(peer[3], loss, False)} on log loss, at {peer[4] / seconds:.0f}x "
            f"the fit time")
        print(f"   {name:<14} {label:<30} {accuracy:>6.3f} {loss:>7.3f} {seconds:>6.3f}  "
              f"{verdict}", flush=True)

    print("\n5. kNN attention on diabetes, 3-fold R^2 (higher is better), median fit "
          "seconds\n")
    (label, r2, seconds), (peer, peer_r2, peer_s) = knn_attention(**kw)
    print(f"   {label:<36} R^2 {r2:.3f}  fit {seconds:.3f} s")
    print(f"   {peer:<36} R^2 {peer_r2:.3f}  fit {peer_s:.3f} s")
    print(f"   kNN attention is {_verdict(r2, peer_r2)} on R^2", flush=True)

    print("\n6. Sequence models: is token 1 before token 2? Test accuracy (higher is "
          "better; 0.5 is chance), fit seconds\n")
    rows = sequences(**kw)
    for label, accuracy, seconds in rows:
        print(f"   {label:<24} {accuracy:.3f}  fit {seconds:.1f} s")
    print(f"   learned particles are {_verdict(rows[0][1], rows[1][1])}")
    print(f"\nThe demo took {time.perf_counter() - start:.0f} s.")


if __name__ == "__main__":
    main()
