"""
kNN attention: the error of keeping k keys, and memory that grows linearly
==========================================================================

kNN attention keeps, for each query, only its ``k`` highest-scoring keys. The truncated
estimator renormalizes the softmax over them; the lazy-Gumbel estimator adds exact samples
of the rest, Rao-Blackwellized over the top ``k`` (unbiased). Left: mean absolute error
against exact softmax attention as ``k`` grows (``n = 2048`` keys, d = 32). Right: peak
memory of one call against ``n``: materialized softmax attention holds an ``n x n``
matrix, kNN attention score tiles of a block of queries and ``n x k`` indices.
"""

# %%
import matplotlib.pyplot as plt
import torch

from sktransformer.attention import knn_attention

g = torch.Generator().manual_seed(0)
n, d = 2048, 32
q, k, v = (torch.rand(n, d, generator=g, dtype=torch.float64) * 2 - 1 for _ in range(3))
q, k = q * 2.0, k * 2.0  # peaked scores, so the top keys hold most of the mass
exact = torch.softmax(q @ k.T / d ** 0.5, -1) @ v
ks = [1, 4, 16, 64, 256]
errors = {"truncated": [], "lazy Gumbel (64 draws)": []}
for n_neighbors in ks:
    errors["truncated"].append(float((knn_attention(q, k, v, n_neighbors) - exact).abs()
                                     .mean()))
    sampled = knn_attention(q, k, v, n_neighbors, estimator="gumbel", n_samples=64,
                            generator=torch.Generator().manual_seed(1))
    errors["lazy Gumbel (64 draws)"].append(float((sampled - exact).abs().mean()))
    print(f"k = {n_neighbors:3d}: " + ", ".join(f"{a} {b[-1]:.4f}" for a, b in
                                                 errors.items()))

# memory: bytes of the largest intermediate (counted, not measured, so the figure is
# the same on every machine): the n x n score matrix against a (block x n) tile and
# n x k indices and scores
sizes = [1024, 4096, 16384, 65536, 262144]
block, n_neighbors = 256, 32
materialized = [8 * s * s / 2**20 for s in sizes]
knn = [8 * (block * s + 2 * s * n_neighbors) / 2**20 for s in sizes]

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
for name, values in errors.items():
    left.plot(ks, values, "o-", label=name)
left.set_xscale("log", base=2)
left.set_yscale("log")
left.set_xlabel("k (keys kept per query)")
left.set_ylabel("mean absolute error vs exact")
left.legend()
right.plot(sizes, materialized, "s-", label="materialized softmax (n x n)")
right.plot(sizes, knn, "o-", label=f"kNN attention (k = {n_neighbors})")
right.set_xscale("log", base=2)
right.set_yscale("log")
right.set_xlabel("sequence length n")
right.set_ylabel("largest intermediate, MiB (float64)")
right.legend()
fig.tight_layout()
plt.show()
