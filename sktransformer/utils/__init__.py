"""Helpers shared by every estimator: devices, tensors, random state, chunking, threads,
the loader of numba's compiled loops, and the few CPU kernels torch is slow at that more
than one family uses (comparisons, a running top-k). The clustering family's own compiled
loops live in ``sktransformer.cluster._compiled``."""

from ._arrays import (
    ArrayAPISupport,
    as_numpy,
    as_tensor,
    check_data,
    check_data_and_target,
    dense_values,
    follows_input,
    is_tensor,
    numpy_dtype,
    output_space,
    to_output,
    torch_dtype,
)
from ._chunks import chunk_rows, iter_chunks, sample_stride
from ._compare import flatnonzero, greater, through_numpy
from ._device import DeviceWarning, resolve_device, to_numpy, to_tensor
from ._lanes import LANES, spread
from ._logging import logger, logs_verbosely, progress, verbosity
from ._memory import check_allocation
from ._numba import DTYPES as COMPILED_DTYPES
from ._numba import CompiledLoops, disk_cache, one_blas_thread
from ._numba import plain as plain_tensors
from ._parallel import SMALL_OP, ChunkRunner, single_threaded, thread_budget
from ._random import make_generator
from ._scale import check_squared_scale, squared_scale_error
from ._sklearn import HasMethods, Interval, StrOptions, fit_context
from ._topk import merge_topk, topk_available

__all__ = [
    "ArrayAPISupport",
    "as_numpy",
    "as_tensor",
    "check_allocation",
    "check_data",
    "check_data_and_target",
    "check_squared_scale",
    "chunk_rows",
    "ChunkRunner",
    "COMPILED_DTYPES",
    "CompiledLoops",
    "DeviceWarning",
    "fit_context",
    "flatnonzero",
    "follows_input",
    "greater",
    "HasMethods",
    "Interval",
    "is_tensor",
    "iter_chunks",
    "LANES",
    "logger",
    "logs_verbosely",
    "make_generator",
    "merge_topk",
    "numpy_dtype",
    "one_blas_thread",
    "output_space",
    "plain_tensors",
    "progress",
    "dense_values",
    "disk_cache",
    "resolve_device",
    "sample_stride",
    "single_threaded",
    "SMALL_OP",
    "spread",
    "squared_scale_error",
    "StrOptions",
    "thread_budget",
    "through_numpy",
    "to_numpy",
    "to_output",
    "to_tensor",
    "topk_available",
    "torch_dtype",
    "verbosity",
]
