"""One place that decides the device and makes every tensor."""

import warnings

import numpy as np
import torch


class DeviceWarning(UserWarning):
    """A requested device is not available and the CPU is used instead."""


def resolve_device(device, *, fallback=False, data=None):
    """Turn the ``device`` parameter into a :class:`torch.device`.

    Parameters
    ----------
    device : {"auto", "cpu", "cuda", "cuda:N"} or torch.device
        ``"auto"`` follows ``data`` when it is a tensor (computing where the data already
        are, without a copy), and otherwise picks CUDA when it is available and the CPU
        otherwise.
    data : ndarray, tensor or None, default=None
        The validated input, for ``"auto"``.
    fallback : bool, default=False
        When CUDA is requested but absent: False raises, True warns (:class:`DeviceWarning`)
        and returns the CPU. Fitting raises; using a fitted model (say one fitted on a GPU
        and loaded on a CPU-only machine) falls back, as skorch does.

    Returns
    -------
    torch.device

    Raises
    ------
    ValueError
        If the string is not a device, or CUDA is asked for on a machine without it.
    """
    if isinstance(device, str) and device == "auto":
        if isinstance(data, torch.Tensor) and data.device.type in ("cpu", "cuda"):
            return data.device
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(
            f"device={device!r} is not a valid device; use 'auto', 'cpu', 'cuda' or 'cuda:N'."
        ) from exc
    if resolved.type == "cuda" and not torch.cuda.is_available():
        if fallback:
            warnings.warn(
                f"device={device!r} was requested but CUDA is not available; using the CPU. "
                "Call set_params(device='cpu') to silence this warning.",
                DeviceWarning, stacklevel=3,
            )
            return torch.device("cpu")
        raise ValueError(
            f"device={device!r} was requested but CUDA is not available on this machine. "
            "The fitted state is stored as numpy, so nothing is lost: call "
            "set_params(device='cpu') (or device='auto') and try again."
        )
    if resolved.type not in ("cpu", "cuda"):
        raise ValueError(f"device={device!r}: only 'cpu' and 'cuda' devices are supported.")
    return resolved


def to_tensor(array, device, dtype=None):
    """A tensor on ``device`` that shares memory with ``array`` when it can (CPU, same dtype).

    Read-only arrays (memory maps) are shared too, without torch's warning: the package
    never writes into its input.
    """
    if isinstance(array, torch.Tensor):
        return array.to(device=device, dtype=dtype)
    if not isinstance(array, np.ndarray) and hasattr(array, "__dlpack__"):  # array API
        return torch.from_dlpack(array).to(device=device, dtype=dtype)
    return share(np.ascontiguousarray(array)).to(device=device, dtype=dtype)


def share(array):
    """``torch.from_numpy(array)``: a CPU tensor on the array's memory. A read-only array
    (a memory map) is shared too, without torch's warning: the package never writes into
    its input."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(array)


def to_numpy(tensor):
    """A numpy copy of ``tensor`` on the CPU (a numpy array is returned as is)."""
    if isinstance(tensor, np.ndarray):
        return tensor
    return tensor.detach().cpu().numpy()
