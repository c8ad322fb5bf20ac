"""Random state: a local torch.Generator per fit, never the global seed."""

import numpy as np
import torch
from sklearn.utils import check_random_state


def make_generator(random_state, device="cpu"):
    """A :class:`torch.Generator` seeded from a scikit-learn ``random_state``.

    Parameters
    ----------
    random_state : int, RandomState instance or None
        ``None`` seeds from fresh OS entropy; an int seeds deterministically; a RandomState
        instance is advanced by one draw, as scikit-learn does.
    device : str or torch.device, default="cpu"
        Where the generator lives; tensors drawn from it are made there.

    Returns
    -------
    torch.Generator
    """
    generator = torch.Generator(device=device)
    if random_state is None:
        generator.seed()
    else:
        seed = check_random_state(random_state).randint(np.iinfo(np.int32).max)
        generator.manual_seed(int(seed))
    return generator
