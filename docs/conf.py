"""Sphinx configuration: numpydoc API pages, a sphinx-gallery of examples/plot_*.py."""

import os

# the torch-embeddings example turns on scikit-learn's array API mode, which needs scipy's,
# read when scipy is first imported (here, through sktransformer)
os.environ.setdefault("SCIPY_ARRAY_API", "1")

import sktransformer  # noqa: E402

project = "sktransformer"
author = "the sktransformer developers"
copyright = "2026, the sktransformer developers"
version = release = sktransformer.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "matplotlib.sphinxext.plot_directive",
    "myst_parser",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "auto_examples/*.ipynb", "auto_examples/*.py",
                    "auto_examples/*.zip", "sg_execution_times.rst"]
templates_path = ["_templates"]

autosummary_generate = True
autodoc_default_options = {}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "abort_on_example_error": True,
    "download_all_examples": False,
    "write_computation_times": False,
}

plot_include_source = True
plot_html_show_source_link = False
plot_html_show_formats = False
plot_formats = [("png", 100)]

myst_heading_anchors = 3
suppress_warnings = ["myst.header"]

html_theme = "pydata_sphinx_theme"
# the object entries of a page's table of contents by their short names (fit, not
# TransformerKMeans.fit)
toc_object_entries_show_parents = "hide"
html_static_path = ["_static"]
html_css_files = ["custom.css"]
html_title = "sktransformer"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}


# Methods inherited from scikit-learn's mixins (score, fit_predict, ...) carry docstrings
# that point at scikit-learn's own pages by :ref: labels this site does not have; they
# become links to scikit-learn's user guide.
import re  # noqa: E402

_SKLEARN_GUIDE = "https://scikit-learn.org/stable/modules/model_evaluation.html"


def _sklearn_refs(app, what, name, obj, options, lines):
    module = getattr(obj, "__module__", "") or ""
    if not module.startswith("sklearn"):
        return
    for i, line in enumerate(lines):
        lines[i] = re.sub(r":ref:`([^`<]+?)(?: <([^>]+)>)?`",
                          lambda m: f"`{m.group(1).strip()} <{_SKLEARN_GUIDE}>`__", line)


def setup(app):
    app.connect("autodoc-process-docstring", _sklearn_refs)
