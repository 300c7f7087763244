"""Sparse SV Infinite Push: a linear ranker pushing positives above the top negative.
"""


import numpy as np
from sklearn.base import BaseEstimator
from sklearn.feature_selection import SelectorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from cvfs.estimators._common import check_int, check_real

__all__ = ["InfinitePushRanker"]

class InfinitePushRanker(SelectorMixin, BaseEstimator):
    """Support vector Infinite Push: a linear scorer that pushes positives to the top of a list.

    Minimises ``lam * Omega(w) + (1/Q) sum_q max_j (1/m_q) sum_i [1 - w.(x+_i - x-_j)]_+``: per
    query q, the mean hinge of its m_q positives against its highest-scoring negative, averaged
    over the Q queries (one query without ``groups``). ADMM with the proximal operator of the loss
    (:mod:`cvfs.core.infinite_push`). There is no intercept: scores only order samples.

    Parameters
    ----------
    lam : float, default=0.01
        Weight of the penalty Omega (larger: fewer features, or smaller weights for ``"l2"``).
    penalty : {"l1", "l1_l2", "l2"}, default="l1"
        Omega: the l1 norm (sparse SV Infinite Push), the group norm sum_g ||w_g||_2 over
        ``feature_groups``, or (1/2)||w||^2 (the classical SVM Infinite Push of Agarwal 2011,
        with C = 1 / lam; every feature is kept).
    feature_groups : array-like of shape (n_features,) or None, default=None
        Group label of each feature (``penalty="l1_l2"`` only); None there makes every feature
        its own group (the l1 norm).
    rho : float, default=1.0
        Initial ADMM penalty (adapted by residual balancing over the first iterations).
    max_iter : int, default=1000
        Maximum ADMM iterations.
    tol : float, default=1e-3
        Relative tolerance on the ADMM primal and dual residuals.
    groups : array-like of shape (n_features,) or None, default=None
        Deprecated alias of ``feature_groups`` (a FutureWarning; removed in the next release).
        Query groups are passed to :meth:`fit`.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        Weights of the scoring function ``X @ coef_`` (zero outside the support).
    support_ : ndarray of bool of shape (n_features,)
        Mask of the features with a non-zero weight (``get_support(indices=True)``: their
        indices).
    objective_ : ndarray of shape (n_iter_,)
        Objective after every ADMM iteration.
    n_iter_ : int
    n_queries_ : int
        Queries with at least one pair (a positive and a negative).
    n_features_in_ : int

    Notes
    -----
    Unlike :class:`FSARanker`, whose ``coef_`` holds only the selected features, ``coef_`` here
    has one entry per feature, as in scikit-learn's linear models; ``support_`` is the same in
    both (the boolean mask of the selected columns). With ``groups`` in :meth:`fit` the loss is
    the mean (not the sum) over queries, as ranking metrics average over queries; lam then has
    the same scale whatever the number of queries.

    References
    ----------
    Rakotomamonjy, Sparse support vector infinite push, ICML 2012, eqs. (2), (4)-(7);
    Agarwal, The infinite push, SDM 2011.
    """

    def __init__(self, lam=0.01, penalty="l1", feature_groups=None, rho=1.0, max_iter=1000,
                 tol=1e-3, groups=None):
        self.lam = lam
        self.penalty = penalty
        self.feature_groups = feature_groups
        self.rho = rho
        self.max_iter = max_iter
        self.tol = tol
        self.groups = groups

    def _check_params(self, n_features):
        check_real("lam", self.lam, 0.0)
        check_real("rho", self.rho, 0.0, strict=True)
        check_real("tol", self.tol, 0.0, strict=True)
        check_int("max_iter", self.max_iter, 1)
        if self.penalty not in ("l1", "l1_l2", "l2"):
            raise ValueError(f"penalty must be 'l1', 'l1_l2' or 'l2', got {self.penalty!r}")
        feature_groups = self.feature_groups
        if self.groups is not None:
            import warnings

            if feature_groups is not None:
                raise ValueError("pass feature groups as feature_groups= only (groups= is its "
                                 "deprecated alias)")
            warnings.warn("InfinitePushRanker(groups=...) is deprecated and will be removed in "
                          "the next release: use feature_groups=...; query groups go to "
                          "fit(X, y, groups=...)", FutureWarning, stacklevel=3)
            feature_groups = self.groups
        if feature_groups is None:
            return None
        if self.penalty != "l1_l2":
            raise ValueError("feature_groups is only used with penalty='l1_l2'")
        labels = np.asarray(feature_groups)
        if labels.ndim != 1 or labels.shape[0] != n_features:
            raise ValueError(f"feature_groups must be 1-D with one label per feature "
                             f"({n_features}), got shape {labels.shape}")
        _, inv = np.unique(labels, return_inverse=True)
        return [np.flatnonzero(inv == g) for g in range(inv.max() + 1)]

    def fit(self, X, y, groups=None):
        """Fit the scorer.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Relevance: within each query the samples with the query's largest value are the
            positives to put on top, all others negatives (binary relevance is the usual case).
        groups : array-like of shape (n_samples,) or None, default=None
            Query of each sample: pairs never cross queries, and the loss is the mean over
            queries of each query's top-of-list loss. A query whose samples all share one
            relevance (no positive or no negative) contributes nothing. None: one query.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            On bad parameters, NaN or infinite input, mismatched shapes, a constant ``y``, or
            ``groups`` of the wrong length or with no query holding two relevance levels.
        """
        from cvfs.core.infinite_push import infinite_push_admm, query_blocks

        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        feature_groups = self._check_params(X.shape[1])
        if np.unique(y).size < 2:
            raise ValueError("InfinitePushRanker needs y with at least two distinct values "
                             "(relevant and not), got 1 class")
        if groups is not None:
            groups = np.asarray(groups)
            if groups.ndim != 1 or groups.shape[0] != X.shape[0]:
                raise ValueError(f"groups must be 1-D with X.shape[0]={X.shape[0]} entries, "
                                 f"got shape {groups.shape}")
        P, N, pb, nb, _ = query_blocks(X, y, groups)
        if pb.size < 2:
            raise ValueError("InfinitePushRanker: no query of groups has two distinct y "
                             "values (a positive and a negative), so there is no pair")
        res = infinite_push_admm(P, N, float(self.lam), penalty=self.penalty,
                                 feature_groups=feature_groups, p_bounds=pb, n_bounds=nb,
                                 rho=float(self.rho), max_iter=self.max_iter,
                                 tol=float(self.tol))
        self.coef_ = res.coef
        self.support_ = res.coef != 0
        self.objective_ = np.asarray(res.objective)
        self.n_iter_ = res.n_iter
        self.n_queries_ = int(pb.size - 1)
        return self

    def _get_support_mask(self):
        check_is_fitted(self, "support_")
        return self.support_

    def decision_function(self, X):
        """Scores ``X @ coef_`` (higher = nearer the top), ndarray of shape (n_samples,)."""
        check_is_fitted(self, "coef_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return X @ self.coef_

    def predict(self, X):
        """Scores ``X @ coef_`` (higher = nearer the top), ndarray of shape (n_samples,)."""
        return self.decision_function(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags
