"""The default dynamics' compiled loops (numba): the ``"rff"`` features and the steps.

Loaded by :mod:`._compiled`, which says when they serve. Machine code is cached on disk
where a directory is writable, else compiled in each process.
"""

import math

import numpy as np
from numba import njit

from ..utils import disk_cache

CACHE = disk_cache()

# pi / 2 in two parts (fdlibm's): q * PIO2_HI is exact for the q below FAR's, so the
# reduced argument keeps float64's precision
PIO2_HI = 1.57079632673412561417e00
PIO2_LO = 6.07710050650619224932e-11
TWO_OVER_PI = 2 / math.pi
FAR = 1048576.0  # beyond this, the features' range reduction is the math library's


@njit(nogil=True, cache=CACHE, fastmath={"contract"}, error_model="numpy")
def rff_features(X, W, b, Phi):
    """``Phi = sqrt(2 / N) cos(X W^T + b)`` in X's dtype, written in place; returns
    ``sin(X W^T + b)`` (the pull-back's). cos and sin of each argument together, in
    float64: reduced by the nearest multiple of pi / 2 (Cody and Waite's two-part
    constant, exact below ``FAR``), Taylor polynomials on [-pi/4, pi/4] to the 17th and
    18th power (error below 1e-16), the quadrant's swap and signs as selects, so that the
    loop vectorizes (numba's math.cos is a call per value, 10x slower); beyond ``FAR``,
    the math library's."""
    n, N = Phi.shape
    c = Phi.dtype.type(math.sqrt(2.0 / N))
    Z = np.dot(X, W.T)
    far = 0  # (a count, not a maximum: a maximum stops the vectorization)
    for i in range(n):
        for j in range(N):
            z = float(Z[i, j]) + float(b[j])
            q = np.floor(z * TWO_OVER_PI + 0.5)
            r = (z - q * PIO2_HI) - q * PIO2_LO
            r2 = r * r
            sin_r = r * (1.0 + r2 * (-1 / 6 + r2 * (1 / 120 + r2 * (-1 / 5040 + r2 * (
                1 / 362880 + r2 * (-1 / 39916800 + r2 * (1 / 6227020800 + r2 * (
                    -1 / 1307674368000 + r2 * (1 / 355687428096000)))))))))
            cos_r = 1.0 + r2 * (-0.5 + r2 * (1 / 24 + r2 * (-1 / 720 + r2 * (
                1 / 40320 + r2 * (-1 / 3628800 + r2 * (1 / 479001600 + r2 * (
                    -1 / 87178291200 + r2 * (1 / 20922789888000 + r2 * (
                        -1 / 6402373705728000)))))))))
            q -= 4.0 * np.floor(q * 0.25)
            swap = q == 1.0 or q == 3.0
            cos_z = sin_r if swap else cos_r
            sin_z = cos_r if swap else sin_r
            Phi[i, j] = c * (-cos_z if (q == 1.0 or q == 2.0) else cos_z)
            Z[i, j] = -sin_z if q >= 2.0 else sin_z  # (no other array: it vectorizes)
            far += abs(z) >= FAR
    if far:
        Z = np.dot(X, W.T)
        for i in range(n):
            for j in range(N):
                z = float(Z[i, j]) + float(b[j])
                Phi[i, j] = c * math.cos(z)
                Z[i, j] = math.sin(z)
    return Z


@njit(nogil=True, cache=CACHE, fastmath={"contract"}, error_model="numpy")
def rff_steps(X, Yc, y_norm, b, U, scale, step_size, radius, repulsion, s, eps, count,
              move_last):
    """``count`` steps from the particles ``U``: each records ``(H, A, E_s, min
    distance, mean distance)`` at the particles it starts from, then moves them (not
    after the last, unless ``move_last``). ``Yc``: the centered target codes and
    ``y_norm`` its Gram matrix's norm over n (fixed). Returns the particles and the
    record ``(count, 5)``."""
    n, d = X.shape
    N = U.shape[0]
    dtype = X.dtype.type
    c = dtype(math.sqrt(2.0 / N))
    tiny = np.finfo(X.dtype).tiny
    record = np.empty((count, 5))
    U = U.copy()
    for step in range(count):
        W = U * dtype(scale)
        Phi = np.empty((n, N), dtype=X.dtype)
        Z = rff_features(X, W, b, Phi)  # (Z: the sines)
        mean = np.zeros(N, dtype=X.dtype)
        for i in range(n):
            for j in range(N):
                mean[j] += Phi[i, j]
        mean /= dtype(n)
        for i in range(n):
            for j in range(N):
                Phi[i, j] -= mean[j]  # (centered)
        M = np.dot(Phi.T, Yc)
        value = float(np.sum(M * M)) / n**2
        G = np.dot(Phi.T, Phi)
        g_norm = max(math.sqrt(float(np.sum(G * G))), tiny)
        denominator = max(g_norm / n * y_norm, tiny)
        value = value / denominator
        along = value * y_norm * (2.0 / n) / g_norm
        d_phi = np.dot(Phi, G)
        d_y = np.dot(Yc, M.T)
        beta, alpha = dtype(-along / denominator), dtype(2.0 / n**2 / denominator)
        for i in range(n):
            for j in range(N):
                d_phi[i, j] = (beta * d_phi[i, j] + alpha * d_y[i, j]) * -c * Z[i, j]
        grad = np.dot(d_phi.T, X)
        grad *= dtype(-scale)
        # the repulsion between the rows of U, in float64: slope[j, k] is the pair
        # energy's derivative in the softened squared distance
        U64 = U.astype(np.float64)
        gram = np.dot(U64, U64.T)
        slope = np.empty((N, N))
        energy, low, total = 0.0, np.inf, 0.0
        for j in range(N):
            slope[j, j] = 0.0  # (no pair with itself)
            for k in range(N):
                if k == j:
                    continue
                raw = max(gram[j, j] + gram[k, k] - 2 * gram[j, k], 0.0)
                dist = math.sqrt(raw)  # (the record's)
                low = min(low, dist)
                total += dist
                sq = raw + eps * eps
                if s == 1.0:
                    pair = 1.0 / math.sqrt(sq)
                elif s == 0.0:
                    pair = -0.5 * math.log(sq)
                else:
                    pair = sq ** (-s / 2)
                energy += pair
                slope[j, k] = -0.5 / sq if s == 0.0 else pair / sq * (-s / 2)
        rep = np.dot(slope, U64)
        for j in range(N):
            slopes = 0.0
            for k in range(N):
                slopes += slope[j, k]
            for e in range(d):
                rep[j, e] = slopes * U64[j, e] - rep[j, e]
        energy /= 2 * N**2
        if N < 2:
            low, total = np.inf, np.inf * N
        record[step, 0] = -value + repulsion * float(dtype(energy))
        record[step, 1] = value
        record[step, 2] = float(dtype(energy))
        record[step, 3] = low
        record[step, 4] = total / max(N * (N - 1), 1)
        if step == count - 1 and not move_last:
            break
        if repulsion:
            grad += (rep * (2.0 * repulsion / N**2)).astype(X.dtype)
        U = U - dtype(step_size * N) * grad
        if radius < np.inf:
            for j in range(N):
                norm = 0.0
                for e in range(d):
                    norm += float(U[j, e]) ** 2
                factor = dtype(min(radius / max(math.sqrt(norm), tiny), 1.0))
                for e in range(d):
                    U[j, e] *= factor
    return U, record

