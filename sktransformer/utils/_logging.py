"""The package's messages: one logger, and ``verbose`` turning it on for a fit.

Library code never prints. It logs to the ``"sktransformer"`` logger and shows progress
bars with tqdm (on stderr). ``verbose`` follows scikit-learn: 0 is silent; 1 shows a
progress bar and the stopping reason; 2 and more add a message per layer or step.
"""

import functools
import logging
import sys
from contextlib import contextmanager

from tqdm.auto import tqdm

logger = logging.getLogger("sktransformer")


@contextmanager
def verbosity(verbose):
    """While it is open, ``verbose > 0`` lets the logger's INFO messages through.

    If neither this logger nor the root logger has a handler (logging not configured), a
    handler writing bare messages to stdout is attached for the duration, as scikit-learn's
    ``verbose`` prints; a configured application gets the records through its handlers.
    """
    if not verbose:
        yield
        return
    level, handler = logger.level, None
    logger.setLevel(logging.INFO)
    if not logger.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
    try:
        yield
    finally:
        logger.setLevel(level)
        if handler is not None:
            logger.removeHandler(handler)


def progress(total, verbose, desc):
    """A tqdm bar over ``total`` steps, shown when ``verbose`` (stderr; off otherwise)."""
    return tqdm(total=total, desc=desc, disable=not verbose, leave=False)


def logs_verbosely(method):
    """Run an estimator's method inside ``verbosity(self.verbose)``."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with verbosity(self.verbose):
            return method(self, *args, **kwargs)
    return wrapper
