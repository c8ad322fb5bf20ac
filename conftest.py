"""pytest's settings for the package's doctests (``--doctest-modules``): an example that
needs an optional extra is skipped, with the reason, where that extra is not installed."""

import importlib.util

import pytest

# doctest name -> the module its example imports from an optional extra
NEEDS_EXTRA = {
    "sktransformer.attention._index.IVFIndex": "faiss",
    "sktransformer.onnx.to_onnx": "skl2onnx",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        module = NEEDS_EXTRA.get(item.name)
        if (isinstance(item, pytest.DoctestItem) and module
                and importlib.util.find_spec(module) is None):
            item.add_marker(pytest.mark.skip(reason=f"the example needs {module}"))
