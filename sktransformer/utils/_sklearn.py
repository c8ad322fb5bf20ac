"""The private scikit-learn names the package relies on, in one place.

scikit-learn keeps its parameter validation (``Interval``, ``StrOptions``, ``HasMethods``)
and the ``_fit_context`` decorator private; a rename upstream then breaks this file alone.
CI installs the newest scikit-learn the registry offers (the requirement is a lower bound),
so a break shows at once. Nothing else in the package imports a private scikit-learn name
(``tests/test_architecture.py`` checks).
"""

from sklearn.base import _fit_context as fit_context
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions

__all__ = ["HasMethods", "Interval", "StrOptions", "fit_context"]
