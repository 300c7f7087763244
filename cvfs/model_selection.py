"""Choosing FSA's number of features k by cross-validation: :class:`FSAClassifierCV`,
:class:`FSARegressorCV`.

Per fold, one staircase runs down the grid of k (largest first): the largest k is annealed from
all features; every smaller k starts from the support of the previous one and runs a quarter of
the iterations: half of them fit all of its columns (so features are dropped by converged
coefficients, not by the first gradient), half anneal down to k. The supports are nested and each
later step works on at most the previous k columns. The fold's validation score of every k comes
from that one pass; the chosen ``k_`` is refitted on all the data.
"""

import numbers
import time

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, clone
from sklearn.metrics import check_scoring
from sklearn.model_selection import check_cv
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted, validate_data

from cvfs.core.fsa import check_sample_weight
from cvfs.core.losses import is_probabilistic
from cvfs.estimators import FSAClassifier, FSARegressor

__all__ = ["FSAClassifierCV", "FSARegressorCV"]


class _OnColumns:
    """A fitted FSA estimator seen through a column subset, for scoring on full-width data."""

    def __init__(self, est, cols):
        self.est, self.cols = est, cols
        self.classes_ = getattr(est, "classes_", None)
        self._estimator_type = getattr(est, "_estimator_type", None)

    def __sklearn_tags__(self):
        return self.est.__sklearn_tags__()

    def decision_function(self, X):
        return self.est.decision_function(X[:, self.cols])

    def predict(self, X):
        return self.est.predict(X[:, self.cols])

    def predict_proba(self, X):
        return self.est.predict_proba(X[:, self.cols])

    def score(self, X, y):
        return self.est.score(X[:, self.cols], y)


def staircase(estimator, X, y, ks, sample_weight=None):
    """Fit ``estimator`` (an FSA estimator) at every k of ``ks`` in one pass down the grid.

    Parameters
    ----------
    estimator : FSAClassifier or FSARegressor
        Its parameters other than ``k`` are used.
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    ks : sequence of int
        Decreasing.
    sample_weight : ndarray of shape (n_samples,) or None
        Row weights passed to every fit.

    Returns
    -------
    fits : list of (k, fitted estimator, columns)
        The estimator at k was fitted on ``X[:, columns]`` (the previous k's support).
    """
    from cvfs.core.schedules import annealing_schedule

    cols = np.arange(X.shape[1])
    fits = []
    n_iter = int(estimator.get_params()["n_iter"])
    for step, k in enumerate(ks):
        est = clone(estimator).set_params(k=int(k))
        if step > 0:
            # a quarter of the iterations suffices on the previous support: half of them hold
            # every column, half anneal down to k
            n_step = max(n_iter // 4, 2)
            hold = n_step // 2
            est.set_params(schedule=np.r_[np.full(hold, cols.size, np.int64),
                                          annealing_schedule(cols.size, int(k), n_step - hold,
                                                             estimator.get_params()["mu"])])
        # no copy of the full matrix
        est.fit(X if step == 0 else X[:, cols], y, sample_weight=sample_weight)
        fits.append((int(k), est, cols))
        cols = cols[est.get_support(indices=True)]
    return fits


class _FSACVBase(BaseEstimator):
    """Shared fit of the CV estimators; subclasses give ``_make_estimator``."""

    _is_classifier = False

    def _check_ks(self, n_features):
        ks = np.asarray(self.ks)
        if ks.ndim != 1 or ks.size == 0 or not all(
                isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in ks.tolist()):
            raise ValueError(f"ks must be a non-empty sequence of ints; got {self.ks!r}")
        ks = np.unique(ks.astype(np.int64))[::-1]
        if ks[-1] < 1:
            raise ValueError(f"ks must be >= 1; got {ks[-1]}")
        if ks[-1] > n_features:
            raise ValueError(f"every k of ks exceeds n_features={n_features}; got {self.ks!r}")
        return ks[ks <= n_features]

    def fit(self, X, y, sample_weight=None):
        """Cross-validate every k of ``ks``, keep the best mean validation score, refit.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,) or None
            Row weights of every fit (the training rows of each fold, all rows in the refit);
            the validation scores are unweighted.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            On a bad ``ks`` (empty, not ints, below 1, all above n_features) and as the base
            estimator.
        """
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=not self._is_classifier)
        ks = self._check_ks(X.shape[1])
        sw = check_sample_weight(sample_weight, X.shape[0])
        base = self._make_estimator()
        cv = check_cv(self.cv, y, classifier=self._is_classifier)
        scorer = check_scoring(base, scoring=self.scoring)
        scores, times = [], []
        for train, test in cv.split(X, y):
            t0 = time.perf_counter()
            fits = staircase(base, X[train], y[train], ks,
                             None if sw is None else sw[train])
            times.append(time.perf_counter() - t0)
            scores.append([scorer(_OnColumns(est, cols), X[test], y[test])
                           for _, est, cols in fits])
        scores = np.array(scores)  # (n_splits, n_ks)
        mean, std = scores.mean(axis=0), scores.std(axis=0)
        rank = np.empty(ks.size, dtype=np.int32)
        rank[np.lexsort((ks, -mean))] = np.arange(1, ks.size + 1)  # ties: the smaller k first
        self.cv_results_ = {"param_k": ks.copy(), "mean_test_score": mean,
                            "std_test_score": std, "rank_test_score": rank,
                            "mean_fold_seconds": float(np.mean(times)),
                            **{f"split{i}_test_score": s for i, s in enumerate(scores)}}
        best = int(np.argmin(rank))
        self.k_ = int(ks[best])
        self.best_score_ = float(mean[best])
        self.best_estimator_ = clone(base).set_params(k=self.k_).fit(X, y, sample_weight=sw)
        for name in ("support_", "coef_", "intercept_", "classes_"):
            if hasattr(self.best_estimator_, name):
                setattr(self, name, getattr(self.best_estimator_, name))
        return self

    def predict(self, X):
        """Predictions of the refitted best estimator."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.predict(X)

    def get_support(self, indices=False):
        """Selected features of the refitted best estimator (as ``SelectorMixin``)."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.get_support(indices=indices)


_DOC = """
    Parameters
    ----------
    ks : sequence of int, default=(1, 2, 5, 10, 20, 50)
        The grid of k (numbers of selected features); values above n_features are left out
        (an error when none remains).
    cv : int, cross-validation generator or iterable, default=5
        As :func:`sklearn.model_selection.check_cv` (stratified folds for the classifier).
    scoring : str or callable, optional
        As :func:`sklearn.metrics.check_scoring`; default the estimator's ``score``.
    {params}
        As the base estimator.

    Attributes
    ----------
    k_ : int
        The k of the best mean validation score (ties: the smaller k).
    best_score_ : float
    cv_results_ : dict
        ``param_k`` (decreasing), ``split<i>_test_score``, ``mean_test_score``,
        ``std_test_score``, ``rank_test_score``, ``mean_fold_seconds``.
    best_estimator_ : estimator
        Refitted at ``k_`` on all the data; ``support_``, ``coef_``, ``intercept_`` (and
        ``classes_``) are copied from it.
    """


class FSAClassifierCV(ClassifierMixin, _FSACVBase):
    __doc__ = (""":class:`cvfs.FSAClassifier` (binary or multiclass) with k chosen by
    cross-validation (one staircase of fits down the grid of k per fold; see
    :mod:`cvfs.model_selection`)."""
               + _DOC.format(params="loss, n_iter, mu, bins, prior, shrinkage, random_state"))

    _is_classifier = True

    def __init__(self, ks=(1, 2, 5, 10, 20, 50), cv=5, scoring=None, loss="logistic",
                 n_iter=500, mu=300, bins=None, prior="shrinkage", shrinkage=1e-3,
                 random_state=None):
        self.ks = ks
        self.cv = cv
        self.scoring = scoring
        self.loss = loss
        self.n_iter = n_iter
        self.mu = mu
        self.bins = bins
        self.prior = prior
        self.shrinkage = shrinkage
        self.random_state = random_state

    def _make_estimator(self):
        return FSAClassifier(loss=self.loss, n_iter=self.n_iter, mu=self.mu, bins=self.bins,
                             prior=self.prior, shrinkage=self.shrinkage,
                             random_state=self.random_state)

    def decision_function(self, X):
        """Scores of the refitted best estimator (binary: positive ``classes_[1]``; multiclass:
        shape (n_samples, n_classes))."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.decision_function(X)

    @available_if(lambda self: is_probabilistic(self.loss))
    def predict_proba(self, X):
        """Class probabilities of the refitted best estimator (probabilistic losses)."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.predict_proba(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = self.bins is None
        return tags


class FSARegressorCV(RegressorMixin, _FSACVBase):
    __doc__ = (""":class:`cvfs.FSARegressor` with k chosen by cross-validation (one staircase of
    fits down the grid of k per fold; see :mod:`cvfs.model_selection`)."""
               + _DOC.format(params="n_iter, mu, bins, prior, shrinkage, random_state"))

    def __init__(self, ks=(1, 2, 5, 10, 20, 50), cv=5, scoring=None, n_iter=500, mu=300,
                 bins=None, prior="shrinkage", shrinkage=1e-3, random_state=None):
        self.ks = ks
        self.cv = cv
        self.scoring = scoring
        self.n_iter = n_iter
        self.mu = mu
        self.bins = bins
        self.prior = prior
        self.shrinkage = shrinkage
        self.random_state = random_state

    def _make_estimator(self):
        return FSARegressor(n_iter=self.n_iter, mu=self.mu, bins=self.bins, prior=self.prior,
                            shrinkage=self.shrinkage, random_state=self.random_state)
