"""A pytest plugin that runs scikit-learn's own k-means tests on one of our estimators.

    python -m pytest -p tests.cluster.sklearn_suite_plugin -p no:logging \
        --pyargs sklearn.cluster.tests.test_k_means      # SKT_ESTIMATOR=TransformerKMeans

At configuration, before the suite is imported, it puts the estimator named by
``SKT_ESTIMATOR`` in place of ``sklearn.cluster.KMeans``, so every test of the installed
module that builds a
``KMeans`` builds ours (scikit-learn's ``k_means``, ``kmeans_plusplus`` and private
helpers stay its own). ``no:logging`` keeps the root logger unconfigured, as in a script,
so ``verbose`` prints to stdout as the suite expects.
"""

import os

import sklearn.cluster

import sktransformer


def pytest_configure(config):
    # (a hook, not an import-time patch: the main test run imports this module for its
    # doctests and must keep scikit-learn's KMeans)
    sklearn.cluster.KMeans = getattr(sktransformer, os.environ.get("SKT_ESTIMATOR",
                                                                   "TransformerKMeans"))
