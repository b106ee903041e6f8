"""Sphinx configuration of mtl_opt's documentation site.

Built offline with warnings as errors: ``python -m sphinx -W --keep-going -b html docs docs/_build/html``
(``pip install -e ".[docs]"``).  Guide pages are Markdown (MyST), the API reference is generated
from the numpydoc docstrings (autosummary), the CLI page from ``mtl_opt.cli.build_parser``
(sphinx-argparse), and the gallery is run by sphinx-gallery, which renders each example's figures.
"""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))          # the checkout's mtl_opt, as an editable install has it
sys.path.insert(0, str(ROOT / "docs"))   # cli_parser, the CLI page's parser
os.environ.setdefault("MPLBACKEND", "Agg")

import mtl_opt  # noqa: E402

project = "mtl_opt"
author = "the mtl_opt developers"
copyright = "2026, the mtl_opt developers"
release = mtl_opt.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "myst_parser",
    "numpydoc",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "sphinx_gallery.gen_gallery",
    "sphinxarg.ext",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "gallery/README.rst", "**/*.ipynb", "**/*.py.md5", "**/*.codeobj.json"]
templates_path = ["_templates"]
highlight_language = "text"      # docstrings' :: blocks are formulas; code fences name their language
nitpicky = False

# Markdown: anchors for headings down to level 3, so pages link to sections (guide/x.md#anchor).
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "dollarmath"]

# API reference: one page per public name, from its numpydoc docstring.
autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"members": True, "inherited-members": False, "show-inheritance": True}
autodoc_typehints = "none"          # the numpydoc Parameters section says the types
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# The gallery: every docs/gallery/plot_*.py is run at build time and its figures kept.
sphinx_gallery_conf = {
    "examples_dirs": "gallery",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "matplotlib_animations": False,
    "reset_modules_order": "both",
}

html_theme = "furo"
html_title = f"mtl_opt {release}"
html_static_path = []
html_show_sourcelink = False


def _skip_metadata_requests(app, what, name, obj, skip, options):
    """scikit-learn's generated ``set_<method>_request`` methods: its own documentation covers them."""
    return True if name.startswith("set_") and name.endswith("_request") else None


def setup(app):
    app.connect("autodoc-skip-member", _skip_metadata_requests)
