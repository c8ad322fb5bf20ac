"""The fused assignment kernel (Triton): the assignment block without its score tile.

A program scores a block of points against the centers, one tile of centers at a time
(``x . c - ||c||^2 / 2``, float32 products accumulated in float32), and keeps each point's
running best and second-best score and the best one's center: the ``(n, k)`` score
matrix is never written, where the torch layer writes each chunk's tile and reads it back
for its maximum. It serves the hard layers' assignment (:func:`~._lloyd.layer`, which
then sums the members; ``predict`` is such a layer without the sums) for dense float32
points on a CUDA device when Triton is installed (it ships with CUDA builds of torch); the
torch layer stays the fallback and the reference. With
``TRITON_INTERPRET=1`` the kernel runs on CPU tensors through Triton's interpreter, which
is how it is tested without a GPU.
"""

import functools
import os

import torch

_BLOCKS = {"BLOCK_N": 64, "BLOCK_K": 64, "BLOCK_D": 32}  # (tl.dot needs 16 and more)


@functools.lru_cache(maxsize=1)
def _kernel():
    """The compiled kernel, or None where Triton cannot be imported."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def assign_kernel(X, shift, C, half_sq, labels, best_out, second_out, x_sq_out, n, k, d,
                      BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr):
        rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
        row_ok = rows < n
        best = tl.full((BLOCK_N,), float("-inf"), tl.float32)
        second = tl.full((BLOCK_N,), float("-inf"), tl.float32)
        label = tl.zeros((BLOCK_N,), tl.int32)
        x_sq = tl.zeros((BLOCK_N,), tl.float32)
        for k0 in range(0, k, BLOCK_K):
            cols = k0 + tl.arange(0, BLOCK_K)
            col_ok = cols < k
            acc = tl.zeros((BLOCK_N, BLOCK_K), tl.float32)
            for d0 in range(0, d, BLOCK_D):
                f = d0 + tl.arange(0, BLOCK_D)
                f_ok = f < d
                x = tl.load(X + rows[:, None] * d + f[None, :],
                            mask=row_ok[:, None] & f_ok[None, :], other=0.0)
                x = tl.where(f_ok[None, :], x - tl.load(shift + f, mask=f_ok, other=0.0)[None, :],
                             0.0)
                if k0 == 0:
                    x_sq += tl.sum(x * x, 1)
                c = tl.load(C + cols[:, None] * d + f[None, :],
                            mask=col_ok[:, None] & f_ok[None, :], other=0.0)
                acc += tl.dot(x, tl.trans(c), input_precision="ieee")
            scores = acc - tl.load(half_sq + cols, mask=col_ok, other=float("inf"))[None, :]
            tile_best = tl.max(scores, 1)
            tile_label = tl.argmax(scores, 1) + k0  # (ties: the lowest index)
            runner_up = tl.max(tl.where(cols[None, :] == tile_label[:, None], float("-inf"),
                                        scores), 1)
            better = tile_best > best  # (ties with an earlier tile keep the earlier center)
            second = tl.where(better, tl.maximum(best, runner_up),
                              tl.maximum(second, tile_best))
            label = tl.where(better, tile_label, label)
            best = tl.where(better, tile_best, best)
        tl.store(labels + rows, label, mask=row_ok)
        tl.store(best_out + rows, best, mask=row_ok)
        tl.store(second_out + rows, second, mask=row_ok)
        tl.store(x_sq_out + rows, x_sq, mask=row_ok)

    return triton, assign_kernel


def available(points):
    """Whether the kernel serves these point tokens: dense float32 with the Euclidean
    score, on a CUDA device (or on the CPU under ``TRITON_INTERPRET=1``), Triton
    importable."""
    if points.X is None or points.dtype != torch.float32 or points.score.name != "euclidean":
        return False
    on_device = points.device.type == "cuda" or (
        points.device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1")
    return on_device and points.n > 0 and _kernel() is not None


def assign(points, centers, *, second=False):
    """Labels (int64) and squared distances of the points to their closest center
    (``centers`` in the points' shifted coordinates); with ``second``, the squared
    distances to the second-closest center too (the margin the fast precision mode
    needs)."""
    triton, kernel = _kernel()
    X = points.X.contiguous()
    C = centers.to(torch.float32).contiguous()
    n, d = X.shape
    half_sq = 0.5 * C.square().sum(1)
    labels = torch.empty(n, dtype=torch.int32, device=X.device)
    best, runner_up, x_sq = (torch.empty(n, dtype=torch.float32, device=X.device)
                             for _ in range(3))
    grid = (triton.cdiv(n, _BLOCKS["BLOCK_N"]),)
    kernel[grid](X, points.shift.to(torch.float32).contiguous(), C, half_sq, labels, best,
                 runner_up, x_sq, n, C.shape[0], d, **_BLOCKS)
    dist = x_sq.sub(best, alpha=2.0).clamp_(min=0.0)
    if second:
        return labels.long(), dist, x_sq.sub_(runner_up, alpha=2.0).clamp_(min=0.0)
    return labels.long(), dist
