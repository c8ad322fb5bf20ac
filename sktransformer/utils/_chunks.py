"""Chunking by memory: the n x k score tile is the only thing that grows with k."""

import torch

# About 2 MiB of float32 scores per tile: small enough to stay in cache (each of torch's
# threads takes its part of a tile), large enough that the per-chunk overhead of torch
# stays a few percent of the matmul time. The k-means fits of the benchmark took 0.92, 0.94
# and 0.89 of their time with 1 MiB tiles (paired, in random order with pauses), their peak
# memory still below scikit-learn's (docs/benchmarks.md)
_TILE_ELEMENTS = 1 << 19
# On a GPU a chunk costs a few kernel launches whatever its size, so the tile is as large
# as memory comfortably allows: 128 MiB of float32 scores. (An H200's Lloyd iteration at
# n = 10^6, d = 128, k = 1024 took 0.599 s with 2 MiB tiles, 0.060 s with these.)
_TILE_ELEMENTS_GPU = 1 << 25


def chunk_rows(n_samples, n_columns, batch_size=None, min_rows=64, device=None):
    """Rows per chunk so that a ``(rows, n_columns)`` tile stays about 2 MiB of float32
    on the CPU (in cache), 128 MiB on a GPU.

    Parameters
    ----------
    n_samples : int
        Rows in the data.
    n_columns : int
        Width of the tile computed per chunk (the number of centers for k-means).
    batch_size : int or None, default=None
        An explicit choice; ``None`` picks from the tile size.
    min_rows : int, default=64
        Lower bound of the automatic choice.
    device : torch.device, str or None, default=None
        Where the tile is computed; ``None`` is the CPU.

    Returns
    -------
    int
    """
    if batch_size is not None:
        return max(1, min(int(batch_size), n_samples))
    on_cpu = device is None or torch.device(device).type == "cpu"
    tile = _TILE_ELEMENTS if on_cpu else _TILE_ELEMENTS_GPU
    rows = max(min_rows, tile // max(1, n_columns))
    return max(1, min(rows, n_samples))


def iter_chunks(stop, rows, start=0):
    """Yield ``slice`` objects that cover ``range(start, stop)`` in steps of ``rows``."""
    for lo in range(start, stop, rows):
        yield slice(lo, min(lo + rows, stop))


def sample_stride(n_samples, n_features, max_rows=4096):
    """The stride of at most ``max_rows`` evenly spaced rows (and at most 2^23 values, for
    a sort): a fixed sample for robust statistics, the same rows wherever X lives (in
    memory or in the blocks of a dask array)."""
    rows = max(1, min(max_rows, (1 << 23) // max(1, n_features)))
    return max(1, -(-n_samples // rows))
