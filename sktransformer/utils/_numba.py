"""numba, where installed: the loader of the package's few compiled CPU loops.

Each loop's module builds its functions through a :class:`CompiledLoops` (by
:func:`load`), once per process: numba caches their machine code on disk; where it cannot
(no writable directory) they are compiled in memory, and where they cannot be built at all
the caller's torch path serves, with a warning. numba is a requirement; the torch paths
stay for where it cannot be imported (a new Python, some months before numba supports it).
"""

import warnings

import torch

DTYPES = (torch.float32, torch.float64)  # the loops are compiled for these


def plain(*tensors):
    """Whether the loops can take these tensors through numpy: contiguous CPU tensors
    without gradient."""
    for t in tensors:  # (a loop, not all() over a generator: the layer calls it per chunk)
        if not t.is_cpu or t.requires_grad or not t.is_contiguous():
            return False
    return True


def load(build, what, instead):
    """``build(numba, cache)``'s functions, or None without numba (or where they cannot be
    built: then a warning names ``what`` was not built and what serves ``instead``)."""
    try:
        import numba
    except ImportError:
        return None
    errors = []
    for cache in (True, False):
        try:
            return build(numba, cache)
        except Exception as exc:  # (numba's errors have no common base worth naming)
            errors.append(exc)
    warnings.warn(f"{what} could not be built ({errors[-1]!r}); {instead} serves instead.",
                  RuntimeWarning, stacklevel=3)
    return None


_UNBUILT = object()


def _probe():
    pass


def disk_cache():
    """Whether numba can cache machine code on disk here (next to the module, or in its
    user cache directory): the ``cache=`` of a module's loops; with neither writable they
    are compiled in each process. numba imported."""
    import numba

    try:
        numba.njit(cache=True)(_probe)
        return True
    except RuntimeError:
        return False


_blas = None  # the BLAS libraries threadpoolctl finds, listed once


class one_blas_thread:
    """A context in which BLAS runs on one thread, around a compiled loop that makes its
    own small products (numba calls NumPy's BLAS): a BLAS team inside would only contend,
    and OpenBLAS's idle workers, woken by earlier calls, otherwise spin beside the loop's
    threads and torch's (a TF-IDF k-means fit at k = 20 took 2.7x scikit-learn's time
    without the limit, 0.9-1.0x with it; a particle fit's later torch passes 3-30x
    theirs). Each library's count is read and set directly, and only where it is not 1
    already (about 2 us, against 20-40 for a ``threadpool_limits`` context: a grid search
    over k makes dozens of loop calls a fit)."""

    def __enter__(self):
        global _blas
        if _blas is None:
            from threadpoolctl import ThreadpoolController
            _blas = ThreadpoolController().select(user_api="blas").lib_controllers
        self._restore = []
        for lib in _blas:
            n = lib.get_num_threads()
            if n != 1:
                lib.set_num_threads(1)
                self._restore.append((lib, n))
        return self

    def __exit__(self, *exc):
        for lib, n in self._restore:
            lib.set_num_threads(n)
        return False


class CompiledLoops:
    """One module's compiled loops, built by :func:`load` on first use, once per process.

    ``get()`` returns ``build``'s functions, or None (numba missing, the loops switched
    off, or not buildable); ``loaded`` says whether this process has built them already
    (nothing left to pay); ``enabled = False`` switches them off (the tests compare both
    paths); ``forget()`` drops them (the next ``get`` builds again).
    """

    def __init__(self, build, what, instead):
        self._build, self.what, self.instead = build, what, instead
        self.enabled = True
        self._loops = _UNBUILT

    def get(self):
        if not self.enabled:
            return None
        if self._loops is _UNBUILT:
            self._loops = load(self._build, self.what, self.instead)
        return self._loops

    @property
    def loaded(self):
        return self.enabled and self._loops is not _UNBUILT and self._loops is not None

    def forget(self):
        self._loops = _UNBUILT
