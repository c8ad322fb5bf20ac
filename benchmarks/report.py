"""Write the benchmarks page from the result files: ``docs/benchmarks.md`` is this script's
output and is never edited by hand (a test checks it matches).

    python benchmarks/report.py --out docs/benchmarks.md

Each section says what is compared, the command that writes its result file, the machine the
file records, and the file's tables. A section whose script plots a curve shows the plot.
"""

import argparse
import json
import os

RESULTS = os.path.join(os.path.dirname(__file__), "results")

# What the result files written before the scripts recorded their machine ran on (the
# benchmarks printed it, and it was written down beside their figures).
EARLIER_MACHINE = ("2-core x86-64 virtual machine (AMD EPYC, AVX-512), torch 2.13.0+cpu, "
                   "scikit-learn 1.9.1; numpy, scikit-learn and faiss on OpenBLAS's Haswell "
                   "kernel, torch on its MKL and oneDNN; not recorded in the file itself")

SECTIONS = [
    {
        "title": "Everyday k-means fits: TransformerKMeans against scikit-learn's KMeans",
        "what": "Hard `TransformerKMeans` against `sklearn.cluster.KMeans` at the sizes users "
                "fit: the small real sets (standardized, k = 8) with each library's defaults "
                "over random states 0-4, a `GridSearchCV` over k, dense data from 2 x 10^4 to "
                "10^6 rows from the same start, and the TF-IDF of the Rotten Tomatoes reviews "
                "(CSR). Each library runs in blocks of fits, the two alternating. `ratio` is "
                "ours over scikit-learn's time per fit (median over repeats; lower is better, "
                "below 1 we are faster), with the mean ratio and its standard error. "
                "\"swaps=0\" rows leave out the center swaps that the default adds. "
                "`algorithm=\"hamerly\"` rows: Hamerly's bounds against scikit-learn's "
                "Lloyd from the same k-means++ centers to convergence, on Gaussian clusters "
                "(seed 11, used for no choice) and on uniform data; `same_labels` says "
                "whether the two fits' labels are identical.",
        "command": "python benchmarks/bench_cpu_engine.py --large",
        "files": ["cpu_engine.json"],
    },
    {
        "title": "The same, with two busy processes on the machine",
        "what": "The \"defaults\" rows of the section above with two other processes spinning "
                "on the two cores, as in a `GridSearchCV(n_jobs=-1)`. Timings under load vary "
                "widely from run to run: the standard errors say how much.",
        "command": "python benchmarks/bench_cpu_engine.py --load 2 --only defaults "
                   "--repeats 3 --out benchmarks/results/cpu_engine_load.json",
        "files": ["cpu_engine_load.json"],
    },
    {
        "title": "Hard k-means against scikit-learn and faiss at large sizes, and the "
                 "variants per layer",
        "what": "`libraries`: hard `TransformerKMeans`, scikit-learn's `KMeans` and "
                "`faiss.Kmeans` from the same initial centers for 20 iterations on uniform "
                "float32 data: seconds (lower is better), the ratio to scikit-learn's time "
                "(below 1 is faster) and the extra peak memory of the fit. `variants`: each "
                "variant's layer (soft, spherical, trimmed, robust, k-medoids) against the hard "
                "layer on the same data and start, milliseconds per layer (lower is better) "
                "and the ratio to the hard layer, with faiss's spherical k-means as the "
                "spherical variant's peer.",
        "command": "python benchmarks/bench_kmeans.py --repeats 5 "
                   "--json benchmarks/results/kmeans_vs_peers.json",
        "files": ["kmeans_vs_peers.json"],
    },
    {
        "title": "Selecting k: the default score against the silhouette, BIC and the gap "
                 "statistic",
        "what": "How often each criterion picks the true k (2-12) from 1..15 on tasks of eight "
                "families (round, anisotropic, unequal sizes and spreads, noise dimensions, "
                "Student-t, uniform background noise, one feature unscaled, the same "
                "standardized) and k = 1 on two without structure, 10 seeds each, never used "
                "for a choice: `GridSearchCV(TransformerKMeans(random_state=0), "
                "{\"n_clusters\": range(1, 16)}, cv=KFold(5, shuffle=True, random_state=0))` "
                "with the default score, `n_clusters=\"auto\"`, the silhouette of "
                "scikit-learn's `KMeans`, `GaussianMixture` (full, diagonal) with BIC, and the "
                "gap statistic. `hits` and `mean_abs_error` are over the 80 tasks with "
                "structure; `score_minus_this_hits` and `this_minus_score_error` compare with "
                "the default score task by task (paired standard errors). `stability`: the "
                "default score's pick under two other shuffles and under `cv=5` on rows sorted "
                "by cluster. `timing`: the grid search against `KMeans` with the silhouette "
                "over the same grid. Then the real labeled sets, standardized, with the class "
                "count as information.",
        "command": "python benchmarks/bench_model_selection.py --seeds 10",
        "files": ["model_selection.json"],
        "tables": {"model_selection.json": ["summary", "by_family", "stability", "timing",
                                            "real"]},
    },
    {
        "title": "Streaming k-means: partial_fit against MiniBatchKMeans",
        "what": "One pass of `partial_fit` over the data in batches, from the same centers, "
                "against scikit-learn's `MiniBatchKMeans.partial_fit` (random reassignment "
                "off, so that both run the same update).",
        "command": "python benchmarks/bench_partial_fit.py "
                   "--json benchmarks/results/partial_fit.json",
        "files": ["partial_fit.json"],
    },
    {
        "title": "Sparse input: k-means of TF-IDF vectors",
        "what": "`SphericalTransformerKMeans` on the CSR TF-IDF of the 12,808 Rotten "
                "Tomatoes reviews (unit rows, so cosine and Euclidean k-means agree) against "
                "the same fit on the densified matrix and scikit-learn's `KMeans` on the CSR "
                "matrix, from the same start: seconds and peak memory (lower is better), each "
                "fit in a fresh process.",
        "command": "python benchmarks/bench_sparse.py --json benchmarks/results/sparse_tfidf.json",
        "files": ["sparse_tfidf.json"],
    },
    {
        "title": "Torch tensors: float32 memory",
        "what": "A 2,000,000 x 32 mixture fitted from a CPU tensor and from a numpy array, in "
                "float32 and float64: peak resident memory of the fit (lower is better).",
        "command": "python benchmarks/bench_tensors.py "
                   "--json benchmarks/results/tensors_memory.json",
        "files": ["tensors_memory.json"],
    },
    {
        "title": "Full Lloyd on a Dask cluster",
        "what": "`TransformerKMeans` on a dask array against dask-ml's `KMeans` on a local "
                "cluster of two single-thread workers (time and inertia ratios, ours over "
                "dask-ml's), and a fit of data larger than a worker's memory limit.",
        "command": "python benchmarks/bench_dask.py --study peers --seeds 3 4 5 6 7 "
                   "--json benchmarks/results/dask_peers.json; python benchmarks/bench_dask.py "
                   "--study memory --json benchmarks/results/dask_memory.json",
        "files": ["dask_peers.json", "dask_memory.json"],
    },
    {
        "title": "A clustering layer learned from Gaussian-mixture tasks against Lloyd",
        "what": "The shipped learned layer against Lloyd's iteration on held-out tasks "
                "(adjusted Rand index, higher is better), by initialization, size and noise.",
        "command": "python benchmarks/reproduce_learned_kmeans.py --plot "
                   "docs/images/learned_kmeans.png --json benchmarks/results/learned_kmeans.json",
        "files": ["learned_kmeans.json"],
        "image": "learned_kmeans.png",
    },
    {
        "title": "Coulomb particle kernels against fixed features, on real data",
        "what": "`ParticleKernelClassifier` with its defaults against `RBFSampler` and "
                "`Nystroem` (gamma=\"scale\") + `LogisticRegression`, plain "
                "`LogisticRegression`, at the same feature budgets, repeated stratified "
                "5-fold CV: accuracy (higher is better), log-loss (lower is better) and fit "
                "time.",
        "command": "python benchmarks/bench_particle_kernel.py --study real "
                   "--json benchmarks/results/particle_kernel_real.json",
        "files": ["particle_kernel_real.json"],
    },
    {
        "title": "Particle kernels on synthetic tasks",
        "what": "Accuracy and calibration against the feature budget on the synthetic tasks of "
                "the particle-kernel paper.",
        "command": "python benchmarks/bench_particle_kernel.py --study synthetic --seeds 0 1 2 "
                   "--plot docs/images/particle_kernel_synthetic.png "
                   "--json benchmarks/results/particle_kernel.json",
        "files": ["particle_kernel.json"],
        "image": "particle_kernel_synthetic.png",
    },
    {
        "title": "Particle kernels: fit cost and bandwidth recovery",
        "what": "The fit time of `ParticleKernelClassifier` against `RBFSampler` + "
                "`LogisticRegression` (ratio, lower is better), and accuracy from bandwidths "
                "off by a factor, with and without the learned bandwidth.",
        "command": "python benchmarks/bench_particle_kernel.py --study cost "
                   "--json benchmarks/results/particle_kernel_cost.json; "
                   "python benchmarks/bench_particle_kernel.py --study recovery "
                   "--json benchmarks/results/particle_kernel_recovery.json",
        "files": ["particle_kernel_cost.json", "particle_kernel_recovery.json"],
    },
    {
        "title": "kNN attention: error against exact attention",
        "what": "Mean absolute error against exact softmax attention of the top-k truncation, "
                "the tail correction and the lazy-Gumbel estimate (lower is better), for "
                "inputs of scale B.",
        "command": "python benchmarks/bench_knn_attention.py --study error "
                   "--json benchmarks/results/knn_attention_error.json",
        "files": ["knn_attention_error.json"],
    },
    {
        "title": "kNN attention: time and memory against sequence length",
        "what": "One head, d = 64, k = 32, float32: seconds and extra peak memory (lower is "
                "better) of exact attention and kNN attention as the length grows, each "
                "method in a fresh process.",
        "command": "python benchmarks/bench_knn_attention.py --study scale --sizes 1024 4096 "
                   "16384 32768 65536 262144 1000000 --exact-queries 65536 "
                   "--json benchmarks/results/knn_attention_scale.json",
        "files": ["knn_attention_scale.json"],
    },
    {
        "title": "Top-k search: IVFIndex and exact top-k against faiss",
        "what": "Recall of the top 32 keys by inner product and search time against the cells "
                "scanned (`IVFIndex` against faiss `IndexIVFFlat`), and the exact top-k search "
                "against `faiss.knn` (time ratios, lower is better).",
        "command": "python benchmarks/bench_ivf.py --json benchmarks/results/ivf_recall.json; "
                   "python benchmarks/bench_ivf.py --exact 65536 262144 --repeats 9 "
                   "--json benchmarks/results/topk_exact.json",
        "files": ["ivf_recall.json", "topk_exact.json"],
    },
    {
        "title": "KNNAttentionRegressor against scikit-learn's regressors",
        "what": "5-fold cross-validated R^2 (higher is better) and time of the whole "
                "cross-validation, on synthetic sets and on real ones, with the difference to "
                "distance-weighted `KNeighborsRegressor` and its standard error.",
        "command": "python benchmarks/bench_knn_regressor.py "
                   "--json benchmarks/results/knn_regressor.json; "
                   "python benchmarks/bench_knn_regressor.py --study real "
                   "--json benchmarks/results/knn_regressor_real.json",
        "files": ["knn_regressor.json", "knn_regressor_real.json"],
    },
    {
        "title": "Learned-kernel linear attention: time and memory against length",
        "what": "One `KernelAttention` block, forward without grad: seconds and extra peak "
                "memory (lower is better) of softmax attention and of linear attention with "
                "FAVOR+ and with particle features.",
        "command": "python benchmarks/bench_sequence.py --study scale --plot "
                   "docs/images/linear_attention_scale.png "
                   "--json benchmarks/results/linear_attention_scale.json",
        "files": ["linear_attention_scale.json"],
        "image": "linear_attention_scale.png",
    },
    {
        "title": "Sequence classification: synthetic tasks and Rotten Tomatoes",
        "what": "`SequenceAttentionClassifier` with softmax, FAVOR+ and particle attention on "
                "synthetic sequence tasks, and on the Rotten Tomatoes reviews against TF-IDF + "
                "`LogisticRegression`: accuracy and MCC (higher is better), expected "
                "calibration error, log-loss and Brier score (lower is better), fit seconds.",
        "command": "python benchmarks/bench_sequence.py --study tasks --seeds 0 1 2 "
                   "--json benchmarks/results/sequence_tasks.json; "
                   "python benchmarks/bench_sequence.py --study text "
                   "--seeds 10 11 12 13 14 15 16 17 18 19 "
                   "--models learned fixed softmax \"TF-IDF + LogisticRegression\" "
                   "--json benchmarks/results/sequence_text.json",
        "files": ["sequence_tasks.json", "sequence_text.json"],
    },
    {
        "title": "kNN attention inside the sequence model: training cost and quality",
        "what": "A training step's seconds and extra peak memory against the length (lower is "
                "better), accuracy on the order task and on Rotten Tomatoes, and training at "
                "1,024-16,384 tokens to the plateau or a 300-s budget (epochs, seconds, test "
                "accuracy), of softmax (torch's SDPA) and kNN attention.",
        "command": "python benchmarks/bench_sequence.py --study knn-cost --lengths 256 1024 4096 "
                   "16384 32768 --plot docs/images/knn_attention_training.png "
                   "--json benchmarks/results/knn_attention_training.json; "
                   "python benchmarks/bench_sequence.py --study knn-order --seeds 10 11 12 "
                   "--models softmax \"knn k=8\" \"knn k=32\" \"kernel (learned particles)\" "
                   "--json benchmarks/results/knn_attention_order.json; "
                   "python benchmarks/bench_sequence.py --study knn-text --seeds 10 11 12 "
                   "--json benchmarks/results/knn_attention_text.json; "
                   "python benchmarks/bench_sequence.py --study knn-long --lengths 1024 4096 "
                   "16384 --n-train 600 --budget 300 --seeds 10 "
                   "--json benchmarks/results/knn_attention_long.json",
        "files": ["knn_attention_training.json", "knn_attention_order.json",
                  "knn_attention_text.json", "knn_attention_long.json"],
        "image": "knn_attention_training.png",
    },
    {
        "title": "Bad input: every estimator, every kind",
        "what": "What bad input does to each public estimator: hypothesis-generated data "
                "(non-finite, overflowing, subnormal and ordinary values, degenerate shapes, "
                "dtypes, weights, targets, in NumPy, CSR, tensor and dask containers), each "
                "listed kind of input (meta, sparse, float8 and complex tensors, zero rows or "
                "features on every input path, subnormal and huge magnitudes, unsorted CSR), "
                "and each size parameter at 10^9 and 10^12 in a process limited to 2 GiB. "
                "Silent non-finite outputs, raw exceptions, unclear errors, mutated inputs "
                "and allocations above 2 GiB must be zero.",
        "command": "python -m benchmarks.bad_input_sweep --examples 200",
        "files": ["bad_input.json"],
        "keys": {"bad_input.json": ["examples", "must_be_zero", "totals", "rows",
                                    "failures"]},
    },
    {
        "title": "On a GPU",
        "what": "`benchmarks/gpu_check.py` on one GPU: Lloyd at n = 10^7, d = 128, k = 1024 in "
                "float32 (seconds per iteration against the float32 matmul floor, lower is "
                "better), each variant's fit with the share of it the device was busy, and "
                "exact against kNN attention by length.",
        "command": "python benchmarks/gpu_check.py --out gpu_check.json",
        "files": ["gpu_check_h200_third.json", "gpu_check_h200_final.json",
                  "gpu_check_h200.json"],
        "keys": {"gpu_check_h200_third.json": ["device", "lloyd"],
                 "gpu_check_h200_final.json": ["device", "tests", "variant_profiles"],
                 "gpu_check_h200.json": ["device", "attention"]},
    },
]

_SKIP = {"machine", "device", "log", "tail", "top", "host_waits", "curves", "times", "params"}


def _cell(value):
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if value is None:
        return ""
    if isinstance(value, list) and all(not isinstance(v, (dict, list)) for v in value):
        return ", ".join(_cell(v) for v in value)
    return str(value).replace("|", "/").replace("\n", " ")


def _scalar(value):
    return not isinstance(value, (dict, list)) or (
        isinstance(value, list) and len(value) <= 4
        and all(not isinstance(v, (dict, list)) for v in value))


def _flat(row):
    """A row with its dicts of scalars spread into ``key.sub`` columns."""
    out = {}
    for key, value in row.items():
        if isinstance(value, dict) and all(_scalar(v) for v in value.values()):
            out.update({f"{key}.{sub}": v for sub, v in value.items()})
        else:
            out[key] = value
    return out


def _table(rows, first=None):
    """A markdown table of ``rows`` (dicts), the scalar columns in order of appearance."""
    rows = [_flat(row) for row in rows]
    columns = [] if first is None else [first]
    for row in rows:
        for key, value in row.items():
            if key not in columns and key not in _SKIP and _scalar(value):
                columns.append(key)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row.get(c)) for c in columns) + " |" for row in rows]
    return lines + [""]


def _row_like(value):
    """Whether a value is one row of a table: a dict of scalars and dicts of scalars."""
    return isinstance(value, dict) and all(
        _scalar(v) or (isinstance(v, dict) and all(_scalar(x) for x in v.values()))
        for v in value.values())


def _blocks(name, value, keys=None):
    """Markdown lines for a value of a result file (``name``: its heading, None at the top):
    its scalars as a list, its dicts of scalars as one table (a row each), its lists of
    dicts as tables, anything deeper in turn."""
    if isinstance(value, list):
        if value and all(isinstance(v, dict) for v in value):
            return ([] if name is None else [f"**{name}**", ""]) + _table(value)
        return []
    if not isinstance(value, dict):
        return []
    value = {k: v for k, v in value.items()
             if k not in _SKIP and v != [] and (keys is None or k in keys)}
    lines = [] if name is None else [f"**{name}**", ""]
    scalars = [f"- {k}: {_cell(v)}" for k, v in value.items() if _scalar(v)]
    lines += scalars + [""] if scalars else []
    rows = {k: v for k, v in value.items() if _row_like(v) and not _scalar(v)}
    if len(rows) > 1 or (rows and name is not None):
        lines += _table([{"": k, **v} for k, v in rows.items()], first="")
    else:
        rows = {}
    for key, sub in value.items():
        if not _scalar(sub) and key not in rows:
            lines += _blocks(key if name is None else f"{name}: {key}", sub)
    return lines


def _machine(data):
    if not isinstance(data, dict):
        return EARLIER_MACHINE
    if "machine" in data:
        m = data["machine"]
        blas = "; ".join(f"{api} {arch or ''}".strip() for api, arch, *_ in m.get("blas", []))
        parts = [m.get("cpu"), f"{m.get('cores')} cores", f"BLAS and OpenMP: {blas}"]
        parts += [f"{k} {m[k]}" for k in m if k not in ("cpu", "cores", "blas")]
        return ", ".join(str(p) for p in parts if p)
    if "device" in data:
        d = data["device"]
        return (f"{d.get('name')} ({d.get('memory_gb', 0):.0f} GB), torch {d.get('torch')}, "
                f"CUDA {d.get('cuda')}, float32 matmul {d.get('matmul_tflops', 0):.0f} TFLOP/s")
    return EARLIER_MACHINE


def render(results=RESULTS):
    """The page, as a string."""
    out = ["# Benchmarks", "",
           "Written by `python benchmarks/report.py --out docs/benchmarks.md` from the files "
           "in `benchmarks/results/`; each section names the command that writes its files. "
           "Timings on a shared 2-core machine vary by 20-50% from run to run: compare the "
           "ratios of one file, measured in one run, not times across files.", ""]
    for section in SECTIONS:
        out += [f"## {section['title']}", "", section["what"], "",
                f"Command: `{section['command']}`", ""]
        for name in section["files"]:
            with open(os.path.join(results, name)) as f:
                data = json.load(f)
            keys = section.get("keys", {}).get(name)
            out += [f"`benchmarks/results/{name}` (machine: {_machine(data)})", ""]
            tables = section.get("tables", {}).get(name)
            if tables:  # (these keys only, each a table of its own)
                for key in tables:
                    out += [f"**{key}**", ""] + _table(
                        [{"": k, **v} for k, v in data[key].items()], first="")
            else:
                out += _blocks(None, data, keys)
        if "image" in section:
            out += [f"![{section['title']}](images/{section['image']})", ""]
    while out[-1] == "":
        out.pop()
    return "\n".join(line.rstrip() for line in out) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="write the page here (default: print)")
    args = parser.parse_args()
    page = render()
    if args.out is None:
        print(page, end="")
    else:
        with open(args.out, "w") as f:
            f.write(page)


if __name__ == "__main__":
    main()
