"""An approximate top-k key search for very long sequences: faiss's inverted-file index."""

import math

import torch

_QUERIES = 16384  # queries per faiss search call


class IVFIndex:
    """Approximate maximum-inner-product search of keys with a faiss ``IndexIVFFlat``.

    For :func:`~sktransformer.attention.knn_attention` and
    :func:`~sktransformer.attention.topk_keys` (``index=IVFIndex()``). The keys are
    clustered into ``n_lists`` cells by k-means, and each query scans only the keys of
    its ``n_probe`` nearest cells: ``O(n_q n_k n_probe / n_lists)`` work instead of
    ``O(n_q n_k)``, at the price of missing some of the true top-k (recall below 1).

    Inner products become Euclidean distances exactly by one extra coordinate (keys
    ``[k, sqrt(M^2 - ||k||^2)]``, queries ``[q, 0]``, ``M`` the largest key norm), so the
    search is faiss's well-tested L2 path. One index is built per (batch, head) and per
    call, on the CPU (faiss-cpu), in float32; the results go back to ``q``'s device.

    Parameters
    ----------
    n_lists : int or None, default=None
        Number of cells; ``None`` is ``4 sqrt(n_keys)``, at most ``n_keys / 39`` (faiss's
        minimum of training points per cell).
    n_probe : int, default=16
        Cells scanned per query; ``n_probe = n_lists`` is an exact search.
    random_state : int, default=0
        Seed of faiss's k-means.

    Examples
    --------
    >>> import torch
    >>> from sktransformer.attention import IVFIndex, topk_keys
    >>> g = torch.Generator().manual_seed(0)
    >>> q, k = torch.randn(500, 16, generator=g), torch.randn(4000, 16, generator=g)
    >>> exact = topk_keys(q, k, 10)[1]
    >>> approx = topk_keys(q, k, 10, index=IVFIndex(n_probe=32))[1]
    >>> recall = (approx.unsqueeze(-1) == exact.unsqueeze(-2)).any(-1).float().mean()
    >>> bool(recall > 0.9)
    True
    """

    def __init__(self, n_lists=None, *, n_probe=16, random_state=0):
        self.n_lists = n_lists
        self.n_probe = n_probe
        self.random_state = random_state

    def __repr__(self):
        return (f"IVFIndex(n_lists={self.n_lists}, n_probe={self.n_probe}, "
                f"random_state={self.random_state})")

    def search(self, q, k, n_neighbors):
        """Indices of about the ``n_neighbors`` best keys per query, (..., n_q, n_neighbors),
        long, with -1 where fewer were found."""
        faiss = _faiss()
        lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
        n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
        qs = q.detach().expand(*lead, n_q, d).reshape(-1, n_q, d)
        ks = k.detach().expand(*lead, n_k, d).reshape(-1, n_k, d)
        found = [self._search_one(faiss, qi, ki, n_neighbors) for qi, ki in zip(qs, ks)]
        return torch.stack(found).reshape(*lead, n_q, n_neighbors).to(q.device)

    def _search_one(self, faiss, q, k, n_neighbors):
        keys = k.to("cpu", torch.float32)
        norms = keys.square().sum(-1, keepdim=True)
        lift = (norms.max() - norms).clamp(min=0).sqrt()
        keys = torch.cat([keys, lift], -1).contiguous().numpy()
        queries = torch.cat([q.to("cpu", torch.float32), torch.zeros(len(q), 1)], -1)
        n_lists = self.n_lists or int(4 * math.sqrt(len(keys)))
        n_lists = max(1, min(n_lists, len(keys) // 39))
        quantizer = faiss.IndexFlatL2(keys.shape[1])
        index = faiss.IndexIVFFlat(quantizer, keys.shape[1], n_lists)
        index.cp.seed = int(self.random_state)
        index.train(keys)
        index.add(keys)
        index.nprobe = min(self.n_probe, n_lists)
        queries = queries.contiguous().numpy()
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
