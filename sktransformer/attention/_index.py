"""An approximate top-k key search for very long sequences: faiss's inverted-file index."""

import math

import torch

_QUERIES = 16384  # queries per faiss search call


class IVFIndex:
    """Approximate maximum-inner-product search of keys with a faiss ``IndexIVFFlat``.

    For :func:`~sktransformer.attention.knn_attention` and
    :func:`~sktransformer.attention.topk_keys` (``index=IVFIndex()``). The keys are
    clustered into ``n_lists`` cells by k-means, and each query scans only the keys of
    its ``n_probe`` best cells: ``O(n_q n_k n_probe / n_lists)`` work instead of
    ``O(n_q n_k)``, at the price of missing some of the true top-k (recall below 1).

    The index uses faiss's inner-product metric directly (cells are ranked and keys scored
    by ``q . k``). Its k-means trains on a random subsample of the keys
    (``train_size``), and the built indexes (one per batch and head) are kept with the key
    tensor they index: a search with the same, unchanged tensor (the next block of queries,
    the backward pass, inference over the same memory) reuses them. Built on the CPU
    (faiss-cpu) in float32; results go back to ``q``'s device.

    Parameters
    ----------
    n_lists : int or None, default=None
        Number of cells; ``None`` is ``sqrt(n_keys)``, at most ``n_keys / 39`` (faiss's
        minimum of training points per cell).
    n_probe : int or float, default=0.1
        Cells scanned per query: an int is a count, a float in ``(0, 1]`` a fraction of
        ``n_lists`` (rounded up); ``1.0`` scans every cell, an exact search. At 0.1 the
        recall of the top 32 of 65,536 keys was 1.0 on clustered keys, 0.94 on low-rank
        ones, 0.78 on text embeddings and 0.47 on isotropic Gaussian ones
        (``benchmarks/bench_ivf.py``).
    train_size : int, default=16384
        Keys (drawn at random) that the k-means of the cells trains on.
    random_state : int, default=0
        Seeds the training subsample and faiss's k-means.

    Examples
    --------
    >>> import torch
    >>> from sktransformer.attention import IVFIndex, topk_keys
    >>> g = torch.Generator().manual_seed(0)
    >>> q, k = torch.randn(500, 16, generator=g), torch.randn(4000, 16, generator=g)
    >>> exact = topk_keys(q, k, 10)[1]
    >>> approx = topk_keys(q, k, 10, index=IVFIndex(n_probe=0.5))[1]
    >>> recall = (approx.unsqueeze(-1) == exact.unsqueeze(-2)).any(-1).float().mean()
    >>> bool(recall > 0.9)
    True
    """

    def __init__(self, n_lists=None, *, n_probe=0.1, train_size=16384, random_state=0):
        self.n_lists = n_lists
        self.n_probe = n_probe
        self.train_size = train_size
        self.random_state = random_state
        self._built = {}  # the last keys searched and their faiss indexes, one per head

    def __repr__(self):
        return (f"IVFIndex(n_lists={self.n_lists}, n_probe={self.n_probe}, "
                f"train_size={self.train_size}, random_state={self.random_state})")

    def __getstate__(self):  # the faiss indexes are a cache: rebuilt where unpickled
        return {**self.__dict__, "_built": {}}

    def search(self, q, k, n_neighbors):
        """Indices of about the ``n_neighbors`` best keys per query, (..., n_q, n_neighbors),
        long, with -1 where fewer were found."""
        faiss = _faiss()
        lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
        n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
        qs = q.detach().expand(*lead, n_q, d).reshape(-1, n_q, d)
        ks = k.detach().expand(*lead, n_k, d).reshape(-1, n_k, d)
        cached = self._built
        if not (cached.get("keys") is k and cached.get("version") == k._version
                and cached.get("lead") == lead):
            # the same tensor object, unchanged in place: a freed tensor's memory reused by
            # new keys never matches, since the cache holds the keys it was built from
            cached = {"keys": k, "version": k._version, "lead": lead,
                      "indexes": [self._build(faiss, ki) for ki in ks]}
            self._built = cached
        found = [self._search(index, qi, n_neighbors)
                 for index, qi in zip(cached["indexes"], qs)]
        return torch.stack(found).reshape(*lead, n_q, n_neighbors).to(q.device)

    def _cells(self, n_keys):
        n_lists = self.n_lists or int(math.sqrt(n_keys))
        return max(1, min(n_lists, n_keys // 39))

    def _probes(self, n_lists):
        if isinstance(self.n_probe, float):
            return max(1, min(n_lists, math.ceil(self.n_probe * n_lists)))
        return max(1, min(n_lists, int(self.n_probe)))

    def _build(self, faiss, k):
        keys = k.to("cpu", torch.float32).contiguous().numpy()
        n_lists = self._cells(len(keys))
        quantizer = faiss.IndexFlatIP(keys.shape[1])
        index = faiss.IndexIVFFlat(quantizer, keys.shape[1], n_lists,
                                   faiss.METRIC_INNER_PRODUCT)
        index.cp.seed = int(self.random_state)
        index.cp.max_points_per_centroid = max(39, -(-self.train_size // n_lists))
        sample = keys
        if len(keys) > self.train_size:
            generator = torch.Generator().manual_seed(int(self.random_state))
            rows = torch.randperm(len(keys), generator=generator)[:self.train_size]
            sample = keys[rows.sort().values.numpy()]
        index.train(sample)
        index.add(keys)
        return index

    def _search(self, index, q, n_neighbors):
        index.nprobe = self._probes(index.nlist)  # n_probe may change between searches
        queries = q.to("cpu", torch.float32).contiguous().numpy()
        # by blocks of queries: faiss's buffers for one search grow with the queries
        return torch.cat([torch.from_numpy(index.search(queries[a:a + _QUERIES],
                                                        n_neighbors)[1]).long()
                          for a in range(0, len(queries), _QUERIES)])


def _faiss():
    try:
        import faiss
    except ImportError as exc:  # an optional dependency
        raise ImportError("IVFIndex needs faiss: pip install faiss-cpu "
                          "(or pip install 'sktransformer[faiss]').") from exc
    return faiss
