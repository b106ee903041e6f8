"""mtl_opt: multi-task learning estimators as optimization models, with certified gaps."""

__version__ = "0.4.0"
