"""scikit-learn's own k-means tests, run on our estimators (the installed
``sklearn/cluster/tests/test_k_means.py``, through ``sklearn_suite_plugin``).

``TransformerKMeans`` runs the whole module and may fail only the tests of scikit-learn's
private API. The variants run the tests of the estimator contract (input kinds, weights,
predict and transform, mutation, dtypes); the ones that assert what Lloyd's algorithm
computes, which a variant computes otherwise by design, are listed with the reason.
"""

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PRIVATE = {
    "test_kmeans_init_auto_with_initial_centroids": "reads KMeans._n_init",
    "test_n_init_auto": "reads KMeans._n_init",
    "test_sample_weight_init": "calls KMeans._init_centroids",
    "test_sample_weight_zero": "calls KMeans._init_centroids",
}

CONTRACT = [
    "test_dense_sparse", "test_predict_dense_sparse", "test_integer_input",
    "test_fortran_aligned_data", "test_transform", "test_fit_transform",
    "test_centers_not_mutated", "test_predict_does_not_change_cluster_centers",
    "test_unit_weights_vs_no_weights", "test_scaled_weights", "test_sample_weight_unchanged",
    "test_feature_names_out", "test_float_precision", "test_kmeans_init_fitted_centers",
    "test_kmeans_empty_cluster_relocated", "test_score_max_iter", "test_weighted_vs_repeated",
    "test_kmeans_with_array_like_or_np_scalar_init",
    "test_kmeans_warns_less_centers_than_unique_points", "test_all_init",
    "test_result_equal_in_diff_n_threads",
]

BY_DESIGN = {
    "SphericalTransformerKMeans": {
        "test_all_init": "clusters directions: the blobs' labels are not its clusters",
        "test_integer_input": "the same: v-measure against the blobs' labels",
        "test_transform": "distances between unit vectors, not to the raw rows",
    },
    "TrimmedTransformerKMeans": {
        "test_all_init": "trimmed points are labelled -1, an extra unique label",
        "test_kmeans_empty_cluster_relocated": "the far point is trimmed as an outlier",
    },
    "RobustTransformerKMeans": {
        "test_kmeans_init_fitted_centers": "a mean is not a fixed point of sparsemax "
                                           "weights",
        "test_scaled_weights": "sparsemax is not invariant to the weights' scale "
                               "(documented)",
    },
    "TransformerKMedoids": {
        "test_all_init": "its seeding is named 'k-medoids++', not 'k-means++'",
        "test_integer_input": "the same init name",
        "test_predict_dense_sparse": "the same init name",
        "test_kmeans_with_array_like_or_np_scalar_init": "the same init name",
        "test_score_max_iter": "score is the Laplace mixture's likelihood, which the "
                               "medoid search does not maximize",
        "test_transform": "a medoid's distance to its own row is exactly 0, where "
                          "pairwise_distances gives rounding (1e-8)",
    },
}


def _run(estimator, tmp_path, keyword=None):
    """The names of the suite's test functions that passed and that failed."""
    report = tmp_path / "report.xml"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "tests.cluster.sklearn_suite_plugin",
               "-p", "no:logging", "-p", "no:cacheprovider", f"--junitxml={report}",
               "--pyargs", "sklearn.cluster.tests.test_k_means"]
    if keyword:
        command += ["-k", keyword]
    env = {**os.environ, "SKT_ESTIMATOR": estimator, "PYTHONPATH": str(ROOT)}
    subprocess.run(command, cwd=ROOT, env=env, capture_output=True, timeout=600)
    passed, failed = set(), set()
    for case in ET.parse(report).iter("testcase"):
        name = case.get("name").split("[")[0]
        if case.find("failure") is not None or case.find("error") is not None:
            failed.add(name)
        elif case.find("skipped") is None:
            passed.add(name)
    return passed, failed


def test_transformer_kmeans_fails_only_the_private_api_tests(tmp_path):
    passed, failed = _run("TransformerKMeans", tmp_path)
    assert failed <= set(PRIVATE), sorted(failed - set(PRIVATE))
    assert len(passed) >= 50  # (of the module's about 70 test functions)


@pytest.mark.parametrize("estimator", sorted(BY_DESIGN))
def test_variants_keep_the_estimator_contract(estimator, tmp_path):
    passed, failed = _run(estimator, tmp_path, keyword=" or ".join(CONTRACT))
    assert failed <= set(BY_DESIGN[estimator]), sorted(failed - set(BY_DESIGN[estimator]))
    assert "test_dense_sparse" in passed and len(passed) >= 12
