"""The two-layer ReLU network of Meta-Ban and NeuUCB, in numpy with hand-derived gradients.

    f(x; theta) = w2 . relu(W1 x),   theta = [vec(W1), w2],  W1 (m, d), w2 (m,),  p = m d + m

as Eq. (9) of the Meta-Ban paper with L = 2 (no biases), initialized as its
Section 5: W1 ~ N(0, 2/m), w2 ~ N(0, 1/m).  Parameters are flat vectors, so
many networks (one per user, or one per arm) stack into a (..., p) array and
every function accepts leading batch axes.  The gradient features are
g(x) = d f(x) / d theta / sqrt(m), the scaling of NeuralUCB (Zhou et al. 2020)
that keeps ||g|| of order one for any width.
"""

from __future__ import annotations

import math

import numpy as np


class MLP:
    """Shapes and maths of f(x; theta) for inputs of dimension ``dim`` and hidden ``width``."""

    def __init__(self, dim: int, width: int = 100):
        self.dim, self.width = dim, width
        self.size = width * dim + width

    def init(self, rng: np.random.Generator, n: int | None = None) -> np.ndarray:
        """Random parameters, (p,) or (n, p) when ``n`` is given."""
        shape = () if n is None else (n,)
        W1 = rng.normal(0.0, math.sqrt(2.0 / self.width), shape + (self.width * self.dim,))
        w2 = rng.normal(0.0, math.sqrt(1.0 / self.width), shape + (self.width,))
        return np.concatenate([W1, w2], axis=-1)

    def split(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Views W1 (..., m, d) and w2 (..., m) of ``theta`` (..., p)."""
        cut = self.width * self.dim
        return theta[..., :cut].reshape(theta.shape[:-1] + (self.width, self.dim)), theta[..., cut:]

    def _hidden(self, theta: np.ndarray, X: np.ndarray):
        W1, w2 = self.split(theta)
        H = W1 @ np.swapaxes(X, -1, -2)          # (..., m, n) pre-activations
        return W1, w2, H, np.maximum(H, 0.0)

    def predict(self, theta: np.ndarray, X: np.ndarray) -> np.ndarray:
        """f for each row of ``X`` (..., n, d) under ``theta`` (..., p), broadcast: (..., n)."""
        _, w2, _, A = self._hidden(theta, X)
        return np.einsum("...m,...mn->...n", w2, A)

    def features(self, theta: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Gradient features g(x) = df/dtheta / sqrt(m) for each row of ``X``: (..., n, p)."""
        _, w2, H, A = self._hidden(theta, X)
        back = w2[..., :, None] * (H > 0)        # df/dh (..., m, n)
        dW1 = np.swapaxes(back, -1, -2)[..., :, :, None] * X[..., :, None, :]   # (..., n, m, d)
        dW1 = dW1.reshape(dW1.shape[:-2] + (self.width * self.dim,))
        return np.concatenate([dW1, np.swapaxes(A, -1, -2)], axis=-1) / math.sqrt(self.width)

    def loss_gradient(self, theta: np.ndarray, X: np.ndarray, r: np.ndarray) -> tuple[float, np.ndarray]:
        """Mean squared loss 1/(2n) sum (f(x) - r)^2 of one network (p,) and its gradient (p,)."""
        _, w2, H, A = self._hidden(theta, X)
        err = (w2 @ A - r) / len(r)
        grad_w2 = A @ err
        grad_W1 = ((w2[:, None] * (H > 0)) * err[None, :]) @ X
        return 0.5 * len(r) * float(err @ err), np.concatenate([grad_W1.ravel(), grad_w2])

    def sgd(self, theta: np.ndarray, X: np.ndarray, r: np.ndarray, *, steps: int, lr: float,
            batch: int, rng: np.random.Generator) -> np.ndarray:
        """``steps`` SGD steps on mini-batches drawn with replacement, from ``theta`` (returns a new array)."""
        theta = theta.copy()
        n = len(r)
        for _ in range(steps):
            rows = rng.integers(n, size=batch) if n > batch else slice(None)
            theta -= lr * self.loss_gradient(theta, X[rows], r[rows])[1]
        return theta
