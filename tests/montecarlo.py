"""Monte Carlo helpers shared by the collab tests."""

import numpy as np


def zscores(samples, exact):
    """Entrywise |mean - exact| / standard error over the first axis."""
    se = samples.std(axis=0, ddof=1) / np.sqrt(len(samples))
    return np.abs(samples.mean(axis=0) - exact) / np.maximum(se, 1e-300)
