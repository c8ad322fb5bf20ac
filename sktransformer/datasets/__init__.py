"""Task generators: clustering problems to train and evaluate circuits on, and sequence
classification tasks that need attention."""

from ._gmm import make_gmm_tasks
from ._sequences import make_order_task, make_parity_task

__all__ = ["make_gmm_tasks", "make_order_task", "make_parity_task"]
