"""Task generators: clustering problems to train and evaluate circuits on, sequence
classification tasks that need attention, and real text that needs no download."""

from ._gmm import NOISES, make_gmm_tasks
from ._sequences import make_order_task, make_parity_task
from ._text import load_rotten_tomatoes

__all__ = ["NOISES", "load_rotten_tomatoes", "make_gmm_tasks", "make_order_task",
           "make_parity_task"]
