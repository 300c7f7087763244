"""Losses on the score matrix Z = X B + b (N, C) of multiclass FSA
(:mod:`cvfs.core.fsa_multiclass`).

- :class:`Multinomial`: softmax cross-entropy, curvature bound 1/2 (the largest eigenvalue of
  diag(p) - p p^T); the multiclass form of the logistic loss, probabilistic;
- :class:`OneVsRest`: the sum over classes of any binary margin loss
  (:class:`cvfs.core.losses.MarginLoss`) of the one-vs-rest labels; its curvature is the binary
  loss's; the multiclass form of every other margin loss;
- :class:`BinaryMargin`: one score column and a binary margin loss (C = 2).

A loss here gives ``n_scores(n_classes)``, ``value_gradient(Z, codes, w)``,
``init_intercept(codes, w, n_classes)``, ``curvature`` and ``annealing_boost`` (and ``proba``
if ``probabilistic``).
"""

import numpy as np
from scipy.special import log_softmax, softmax

from cvfs.core.losses import get_loss

__all__ = ["BinaryMargin", "Multinomial", "OneVsRest", "get_multiclass_loss"]


class Multinomial:
    """Softmax cross-entropy -log p_{i, y_i}, p_i = softmax(z_i), on scores Z of shape (N, C).

    Attributes
    ----------
    curvature : float
        1/2, an upper bound of the largest eigenvalue of the Hessian diag(p) - p p^T.
    annealing_boost : float
        Step multiplier while features are being removed (4, as the binary logistic loss).
    """

    name = "multinomial"
    curvature = 0.5
    annealing_boost = 4.0
    probabilistic = True

    def n_scores(self, n_classes):
        """Score columns: one per class."""
        return n_classes

    def value_gradient(self, Z, codes, w):
        """Weighted sum of the row losses and its gradient with respect to Z.

        Parameters
        ----------
        Z : ndarray of shape (N, C)
        codes : ndarray of shape (N,), int64
            Class index of each row.
        w : ndarray of shape (N,)
            Row weights (summing to 1 for a mean loss).

        Returns
        -------
        value : float
        grad : ndarray of shape (N, C)
        """
        rows = np.arange(Z.shape[0])
        logp = log_softmax(Z, axis=1)
        value = -float(w @ logp[rows, codes])
        grad = np.exp(logp)
        grad[rows, codes] -= 1.0
        grad *= w[:, None]
        return value, grad

    def init_intercept(self, codes, w, n_classes):
        """Log class frequencies (centred): the minimiser over constant scores."""
        freq = np.bincount(codes, weights=w, minlength=n_classes) / w.sum()
        b = np.log(np.clip(freq, 1e-12, None))
        return b - b.mean()

    def proba(self, Z):
        """Class probabilities, ndarray of shape (N, C)."""
        return softmax(Z, axis=1)


class OneVsRest:
    """Sum over classes c of a binary margin loss phi(y_ic z_ic), y_ic = +1 if row i is of
    class c, else -1.

    Parameters
    ----------
    loss : str or MarginLoss
        A margin loss of :mod:`cvfs.core.losses` (a name or an object, built-in or the user's).
    """

    def __init__(self, loss):
        self.binary = get_loss(loss, "classifier")
        self.name = f"ovr_{self.binary.name}"
        self.probabilistic = False
        self.curvature = float(self.binary.curvature)
        self.annealing_boost = float(self.binary.annealing_boost)

    def n_scores(self, n_classes):
        """Score columns: one per class."""
        return n_classes

    @staticmethod
    def _signs(codes, n_classes):
        Y = -np.ones((codes.size, n_classes))
        Y[np.arange(codes.size), codes] = 1.0
        return Y

    def value_gradient(self, Z, codes, w):
        """As :meth:`Multinomial.value_gradient`."""
        Y = self._signs(codes, Z.shape[1])
        value = float(w @ self.binary.value(Z, Y).sum(axis=1))
        return value, self.binary.gradient(Z, Y) * w[:, None]

    def init_intercept(self, codes, w, n_classes):
        """The binary loss's starting intercept of each one-vs-rest problem."""
        return self.binary.init_intercepts(self._signs(codes, n_classes), w)


class BinaryMargin(OneVsRest):
    """A binary margin loss phi(y_i z_i) on one score column, y_i = +1 for class 1, -1 for
    class 0 (two classes).

    Parameters
    ----------
    loss : str or MarginLoss
        A margin loss (name or object).
    """

    def __init__(self, loss):
        super().__init__(loss)
        self.name = self.binary.name

    def n_scores(self, n_classes):
        """One score column (positive: class 1)."""
        if n_classes != 2:
            raise ValueError(f"a binary loss needs n_classes=2, got {n_classes}")
        return 1

    def value_gradient(self, Z, codes, w):
        """As :meth:`Multinomial.value_gradient`, Z of shape (N, 1)."""
        y = np.where(codes == 1, 1.0, -1.0)[:, None]
        value = float(w @ self.binary.value(Z, y)[:, 0])
        return value, self.binary.gradient(Z, y) * w[:, None]

    def init_intercept(self, codes, w, n_classes):
        """The binary loss's starting intercept (weighted class frequency for logistic)."""
        return super().init_intercept(codes, w, 2)[1:]


def get_multiclass_loss(loss):
    """The loss of a multiclass fit: a margin loss's :meth:`~cvfs.core.losses.MarginLoss.multiclass`
    form (:class:`Multinomial` for the logistic loss, :class:`OneVsRest` for the others), from a
    name or a loss object; ``"multinomial"`` names :class:`Multinomial`; objects with
    ``value_gradient`` (a loss on the score matrix) pass through.

    Raises
    ------
    ValueError
        If the name is unknown or the loss is not a margin loss.
    """
    if isinstance(loss, str) and loss == "multinomial":
        return Multinomial()
    if not isinstance(loss, str) and hasattr(loss, "value_gradient") and hasattr(loss,
                                                                                 "curvature"):
        return loss
    return get_loss(loss, "classifier").multiclass()
