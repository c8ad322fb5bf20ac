"""Helpers shared by every estimator: devices, tensors, random state, chunking, threads,
and the few CPU kernels torch is slow at (comparisons, row sums by index, a running
top-k, trimming's, robust k-means' and k-medoids' passes)."""

from ._arrays import (
    ArrayAPISupport,
    as_numpy,
    as_tensor,
    check_data,
    check_data_and_target,
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
from ._logging import logger, logs_verbosely, progress, verbosity
from ._nearest import nearest_members, nearest_members_available
from ._numba import CompiledLoops
from ._parallel import ChunkRunner, thread_budget
from ._random import make_generator
from ._scale import check_squared_scale, squared_scale_error
from ._scatter import (
    COMPILED_MIN_ELEMENTS,
    LANES,
    RowAdder,
    compiled_available,
    index_add_rows,
    spread,
    use_compiled,
)
from ._sklearn import HasMethods, Interval, StrOptions, fit_context
from ._sparsemax import sparsemax_sums, sparsemax_sums_available
from ._topk import merge_topk, topk_available
from ._trim import trim_pass, trim_pass_available

__all__ = [
    "ArrayAPISupport",
    "as_numpy",
    "as_tensor",
    "check_data",
    "check_data_and_target",
    "check_squared_scale",
    "chunk_rows",
    "ChunkRunner",
    "CompiledLoops",
    "compiled_available",
    "COMPILED_MIN_ELEMENTS",
    "use_compiled",
    "DeviceWarning",
    "fit_context",
    "flatnonzero",
    "follows_input",
    "greater",
    "HasMethods",
    "index_add_rows",
    "Interval",
    "is_tensor",
    "iter_chunks",
    "LANES",
    "RowAdder",
    "logger",
    "logs_verbosely",
    "make_generator",
    "merge_topk",
    "nearest_members",
    "nearest_members_available",
    "numpy_dtype",
    "output_space",
    "progress",
    "resolve_device",
    "sample_stride",
    "sparsemax_sums",
    "sparsemax_sums_available",
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
    "trim_pass",
    "trim_pass_available",
    "verbosity",
]
