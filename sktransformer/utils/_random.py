"""Random state: a local torch.Generator per fit, never the global seed."""

from functools import lru_cache
from numbers import Integral

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
    elif isinstance(random_state, Integral):
        generator.manual_seed(_seed_of(int(random_state)))
    else:
        generator.manual_seed(int(_draw_seed(random_state)))
    return generator


def _draw_seed(random_state):
    return check_random_state(random_state).randint(np.iinfo(np.int32).max)


@lru_cache(maxsize=256)
def _seed_of(random_state):
    """The seed an int ``random_state`` gives (a new RandomState costs about 0.1 ms, a
    real share of a small fit: kept per int)."""
    return int(_draw_seed(random_state))
