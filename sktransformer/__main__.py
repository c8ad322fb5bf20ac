"""``python -m sktransformer``: the demo, every family on data that needs no download.

1. Clustering: for each data set, TransformerKMeans (hard, dot-product form, soft) and the
   variants (spherical, trimmed, robust, k-medoids) against scikit-learn's KMeans, all from
   the same k-means++ initial centers: each method's own objective (``inertia_``: squared
   distances for the k-means family, of the kept points for trimmed k-means, on the sphere
   for spherical k-means, plain distances for k-medoids), layers, fit time, and agreement of
   the labels with KMeans and with the true classes (adjusted Rand index; trimmed points
   count as one more cluster, -1).
2. The learned clustering layer shipped with the package against Lloyd's algorithm, on
   unseen Gaussian-mixture tasks (d = 32, k = 10).
3. Learned kernels: ParticleKernelClassifier(64) against RBFSampler(64) and Nystroem(64) +
   LogisticRegression, 3-fold CV on scikit-learn's breast_cancer, wine and digits.
4. kNN attention: KNNAttentionRegressor against KNeighborsRegressor, 3-fold R^2 on
   scikit-learn's diabetes.
5. Sequence models: SequenceAttentionClassifier on a task that needs attention (is token 1
   before token 2?): linear attention over learned particles against fixed features at
   length 24, and kNN attention (8 keys) against softmax attention at length 128.
"""

import argparse
import time

import numpy as np
from sklearn.cluster import KMeans, kmeans_plusplus
from sklearn.datasets import load_digits, load_iris, load_wine
from sklearn.metrics import adjusted_rand_score
from sklearn.preprocessing import StandardScaler

from . import (
    RobustTransformerKMeans,
    SphericalTransformerKMeans,
    TransformerKMeans,
    TransformerKMedoids,
    TrimmedTransformerKMeans,
)

DATASETS = {"digits": load_digits, "iris": load_iris, "wine": load_wine}


def _timed_fit(estimator, X):
    start = time.perf_counter()
    estimator.fit(X)
    return estimator, time.perf_counter() - start


def run(names=("digits", "iris", "wine"), device="auto", random_state=0):
    """Fit every method on every data set; return the table rows as dicts."""
    rows = []
    for name in names:
        data = DATASETS[name]()
        X = StandardScaler().fit_transform(data.data)
        k = len(np.unique(data.target))
        init, _ = kmeans_plusplus(X, k, random_state=random_state)
        common = dict(init=init, n_init=1, max_iter=300, tol=1e-4)
        reference, ref_time = _timed_fit(KMeans(k, algorithm="lloyd", **common), X)
        methods = [("sklearn KMeans", reference, ref_time)]
        for label, cls, params in [
            ("TransformerKMeans", TransformerKMeans, {}),
            ("TransformerKMeans dot", TransformerKMeans, {"attention": "dot"}),
            ("TransformerKMeans soft t=1", TransformerKMeans, {"temperature": 1.0}),
            ("Spherical", SphericalTransformerKMeans, {}),
            ("Trimmed trim=0.05", TrimmedTransformerKMeans, {"trim": 0.05}),
            ("Robust beta=0.01", RobustTransformerKMeans, {}),
            ("KMedoids", TransformerKMedoids, {}),
        ]:
            params = {**common, **params}
            if cls is TransformerKMedoids:
                del params["tol"]
            est = cls(k, device=device, **params)
            methods.append((label, *_timed_fit(est, X)))
        for label, est, seconds in methods:
            rows.append({
                "data": f"{name} ({X.shape[0]}x{X.shape[1]}, k={k})",
                "method": label,
                "inertia": est.inertia_,
                "iterations": est.n_iter_,
                "time_ms": 1e3 * seconds,
                "ari_vs_kmeans": adjusted_rand_score(reference.labels_, est.labels_),
                "ari_vs_truth": adjusted_rand_score(data.target, est.labels_),
            })
    return rows


def format_table(rows):
    header = f"{'data':<24} {'method':<28} {'objective':>11} {'iter':>5} {'time ms':>8} " \
             f"{'ARI vs KMeans':>14} {'ARI vs truth':>13}"
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r['data']:<24} {r['method']:<28} {r['inertia']:>11.2f} {r['iterations']:>5d} "
            f"{r['time_ms']:>8.1f} {r['ari_vs_kmeans']:>14.4f} {r['ari_vs_truth']:>13.4f}"
        )
    return "\n".join(lines)


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
        float(np.mean(result["fit_time"]))]


def learned_kernels(device="auto", random_state=0):
    """3-fold accuracy, log loss and fit time of learned and fixed 64-feature kernels."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.kernel_approximation import Nystroem, RBFSampler
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    from . import ParticleKernelClassifier

    rows = []
    for name, loader in (("breast_cancer", load_breast_cancer), ("wine", load_wine),
                         ("digits", load_digits)):
        X, y = loader(return_X_y=True)
        for label, model in (
                ("ParticleKernelClassifier(64)",
                 ParticleKernelClassifier(64, device=device, random_state=random_state)),
                ("RBFSampler(64) + LR", make_pipeline(
                    RBFSampler(gamma="scale", n_components=64, random_state=random_state),
                    LogisticRegression(max_iter=1000))),
                ("Nystroem(64) + LR", make_pipeline(
                    Nystroem(n_components=64, random_state=random_state),
                    LogisticRegression(max_iter=1000)))):
            accuracy, loss, seconds = _cv(make_pipeline(StandardScaler(), model), X, y,
                                          ("accuracy", "neg_log_loss"))
            rows.append((name, label, accuracy, -loss, seconds))
    return rows


def knn_attention(device="auto", random_state=0):
    """3-fold R^2 and fit time of kNN attention against k-nearest neighbors."""
    from sklearn.datasets import load_diabetes
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


def sequences(device="auto", random_state=0):
    """Test accuracy on the order task: learned particles and fixed features at length 24,
    softmax and kNN attention at length 128."""
    from . import SequenceAttentionClassifier
    from .datasets import make_order_task

    rows = []
    for length, n, models, epochs in (
            (24, 1500, {"learned particles": {}, "fixed features": {"features": "fixed"}}, 25),
            (128, 2000, {"softmax attention": {"attention": "softmax"},
                         "kNN attention, k=8": {"attention": "knn", "n_neighbors": 8}}, 15)):
        X, y = make_order_task(n, length=length, random_state=random_state)
        Xt, yt = make_order_task(500, length=length, random_state=random_state + 1)
        for label, params in models.items():
            start = time.perf_counter()
            clf = SequenceAttentionClassifier(max_epochs=epochs, device=device,
                                              random_state=random_state, **params).fit(X, y)
            rows.append((f"L={length}, {label}", clf.score(Xt, yt),
                         time.perf_counter() - start))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m sktransformer", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", nargs="+", choices=sorted(DATASETS),
                        default=["digits", "iris", "wine"])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--random-state", type=int, default=0)
    args = parser.parse_args(argv)
    kw = dict(device=args.device, random_state=args.random_state)
    print("1. Clustering: the circuit and its variants against scikit-learn's KMeans\n")
    print(format_table(run(args.data, **kw)), flush=True)
    scores = learned_layer(random_state=args.random_state)
    print("\n2. The learned clustering layer: mean log k-means objective after 20 layers, "
          "64 unseen tasks (d=32, k=10)\n")
    print("   " + ", ".join(f"{k} {v:.3f}" for k, v in scores.items()), flush=True)
    print("\n3. Learned kernels (64 features, standardized, 3-fold CV)\n")
    print(f"   {'data':<14} {'model':<30} {'accuracy':>9} {'log loss':>9} {'fit s':>6}")
    for name, label, accuracy, loss, seconds in learned_kernels(**kw):
        print(f"   {name:<14} {label:<30} {accuracy:>9.3f} {loss:>9.3f} {seconds:>6.2f}")
    print("\n4. kNN attention: diabetes, 3-fold R^2\n", flush=True)
    for label, r2, seconds in knn_attention(**kw):
        print(f"   {label:<36} R^2 {r2:.3f}   fit {seconds:.2f} s")
    print("\n5. Sequence models: is token 1 before token 2? (test accuracy)\n", flush=True)
    for label, accuracy, seconds in sequences(**kw):
        print(f"   {label:<28} {accuracy:.3f}   fit {seconds:.1f} s")


if __name__ == "__main__":
    main()
