"""scikit-learn estimators on the shared core: FSAClassifier, FSARegressor, FSARanker,
SBLRegressor, SBLClassifier.

``__init__`` only stores parameters; ``fit`` validates them and the data, calls
:func:`cvfs.core.fsa.fsa_fit`, and stores fitted state in attributes ending in ``_``.
The FSA estimators are also feature selectors (``get_support`` / ``transform``).
"""

import numbers

import numpy as np
import scipy.sparse as sp
from scipy.special import expit, softmax
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.feature_selection import SelectorMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from cvfs.core._dask_layout import is_dask_array
from cvfs.core.fsa import (
    _physical_memory,
    check_sample_weight,
    decision_function,
    fsa_fit,
    is_out_of_core,
)
from cvfs.core.fsa_multiclass import fsa_multiclass_fit
from cvfs.core.losses import get_loss
from cvfs.core.priors import get_prior

__all__ = ["FGMClassifier", "FSAClassifier", "FSARanker", "FSARegressor", "InfinitePushRanker",
           "SBLClassifier", "SBLRegressor", "ranking_pairs"]

_CLASSIFICATION_LOSSES = ("logistic", "lorenz", "svm")


def _check_int(name, value, low):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


def _check_real(name, value, low, strict=False):
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and np.isfinite(value)
    if not ok or value < low or (strict and value == low):
        rel = ">" if strict else ">="
        raise ValueError(f"{name} must be a finite number {rel} {low}, got {value!r}")


def ranking_pairs(y, groups=None, weights="uniform", min_gap=None):
    """All pairs (i, j), i < j, within each group, with r_ij = 1 if y_i > y_j, 1/2 if equal,
    0 if lower (higher y = better).

    Parameters
    ----------
    y : ndarray of shape (N,)
    groups : ndarray of shape (N,), optional
        Group label per sample; pairs never cross groups. None: one group.
    weights : {"uniform", "group"}, default="uniform"
        Pair weights (summing to 1): equal for every pair, or equal total weight per group (a
        group of n samples has n (n - 1) / 2 pairs; "group" keeps large groups from dominating).
    min_gap : float or None, default=None
        None keeps every pair (ties with r = 1/2, the paper); a number g >= 0 keeps only the
        pairs with ``|y_i - y_j| > g`` (no ties, and near-ties dropped as label noise).

    Returns
    -------
    i, j : ndarray of shape (P,), int64
    r : ndarray of shape (P,), float64
    w : ndarray of shape (P,), float64
    """
    if weights not in ("uniform", "group"):
        raise ValueError(f"pair weights must be 'uniform' or 'group', got {weights!r}")
    if min_gap is not None and not (isinstance(min_gap, numbers.Real) and min_gap >= 0):
        raise ValueError(f"min_gap must be None or a number >= 0, got {min_gap!r}")
    y = np.asarray(y, dtype=np.float64)
    groups = np.zeros(y.size, dtype=np.int64) if groups is None else np.asarray(groups)
    order = np.argsort(groups, kind="stable")
    _, starts, counts = np.unique(groups[order], return_index=True, return_counts=True)
    pi, pj, pw = [], [], []
    for s, c in zip(starts, counts):
        if c < 2:
            continue
        a, b = np.triu_indices(c, 1)
        if min_gap is not None:
            keep = np.abs(y[order[s + a]] - y[order[s + b]]) > min_gap
            a, b = a[keep], b[keep]
            if a.size == 0:
                continue
        pi.append(order[s + a])
        pj.append(order[s + b])
        pw.append(np.full(a.size, 1.0 / a.size if weights == "group" else 1.0))
    if not pi:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0)
    pi = np.concatenate(pi).astype(np.int64)
    pj = np.concatenate(pj).astype(np.int64)
    pw = np.concatenate(pw)
    r = np.where(y[pi] > y[pj], 1.0, np.where(y[pi] < y[pj], 0.0, 0.5))
    return pi, pj, r, pw / pw.sum()


def _repeated_pairs(y, groups, weights, min_gap, sw):
    """The pairs of :func:`ranking_pairs` for rows with sample weights ``sw``, as the rows
    repeated by integer weights give them: base weights that the solver multiplies by
    sw_i sw_j, the ties among the copies of a row as self pairs (i, i, 1/2) of base weight
    (sw_i - 1) / (2 sw_i) (zero gradient and curvature, they count only in the normalisation;
    ``min_gap=None`` only), and ``weights="group"`` dividing by each group's repeated pair
    mass."""
    if weights not in ("uniform", "group"):
        raise ValueError(f"pair weights must be 'uniform' or 'group', got {weights!r}")
    y = np.asarray(y, dtype=np.float64)
    pi, pj, r, _ = ranking_pairs(y, groups, "uniform", min_gap)
    base = np.ones(pi.size)
    if min_gap is None:
        rows = np.flatnonzero(sw > 1)
        pi, pj = np.r_[pi, rows], np.r_[pj, rows]
        r = np.r_[r, np.full(rows.size, 0.5)]
        base = np.r_[base, (sw[rows] - 1.0) / (2.0 * sw[rows])]
    if pi.size == 0:
        return pi, pj, r, base
    if weights == "group":
        g = (np.zeros(y.size, np.int64) if groups is None
             else np.unique(np.asarray(groups), return_inverse=True)[1].ravel())
        mass = np.bincount(g[pi], sw[pi] * sw[pj] * base, minlength=g.max() + 1)
        base = base / np.where(mass > 0, mass, 1.0)[g[pi]]
    return pi, pj, r, base / base.sum()


def _binary_classes(y):
    """The two sorted labels of binary targets y (1-D). Numeric labels with two finite integral
    values are what scikit-learn's ``type_of_target`` calls binary and take a direct path (that
    check costs ~0.4 ms, 3% of a 1000 x 1000 fit); anything else goes through
    ``check_classification_targets`` and its error messages."""
    numeric = y.dtype.kind in "biuf"
    classes = np.unique(y) if numeric else None
    if numeric and classes.size == 2 and (y.dtype.kind != "f" or (
            np.all(np.isfinite(classes)) and np.all(classes == np.floor(classes)))):
        return classes
    check_classification_targets(y)
    if classes is None:
        classes = np.unique(y)
    if classes.size != 2:
        raise ValueError(
            f"Only binary classification is supported: y must have exactly 2 classes, "
            f"got {classes.size} class(es)"
        )
    return classes


def _multiclass_classes(y):
    """The sorted labels of y if it has more than two classes (checked by scikit-learn's
    ``check_classification_targets``), else None (binary targets go through
    :func:`_binary_classes` unchanged)."""
    if y.dtype.kind in "biuf" and np.unique(y).size <= 2:
        return None
    check_classification_targets(y)
    classes = np.unique(y)
    return classes if classes.size > 2 else None


class _FSABase(SelectorMixin, BaseEstimator):
    """Parameter checks, data handling and the fitted state shared by the FSA estimators."""

    _losses = ()

    def _check_params(self):
        _check_int("k", self.k, 1)
        _check_int("n_iter", self.n_iter, 1)
        _check_real("mu", self.mu, 0.0)
        if self.learning_rate is not None:
            _check_real("learning_rate", self.learning_rate, 0.0, strict=True)
        if self.annealing_boost is not None:
            _check_real("annealing_boost", self.annealing_boost, 0.0, strict=True)
        if self.bins is not None:
            _check_int("bins", self.bins, 1)
        _check_real("shrinkage", self.shrinkage, 0.0)
        _check_real("smoothness", self.smoothness, 0.0)
        if self.max_memory is not None:
            _check_int("max_memory", self.max_memory, 1)
        if self.worker_memory is not None:
            _check_int("worker_memory", self.worker_memory, 1)
        if self.loss not in self._losses:
            raise ValueError(f"loss must be one of {list(self._losses)}, got {self.loss!r}")
        return get_prior(self.prior, self.shrinkage, self.smoothness)

    def _validate_X_y(self, X, y, y_numeric):
        """Arrays and scipy.sparse matrices (CSR/CSC kept, other formats become CSR) are
        validated by scikit-learn; memmaps, HDF5 datasets and Dask arrays are only checked for
        shape (their values are checked block by block during the fit; a Dask ``y`` is
        computed)."""
        if is_out_of_core(X) or is_dask_array(X):
            if len(X.shape) != 2:
                raise ValueError(f"X must be 2-D, got shape {X.shape}")
            y = np.asarray(y)
            if y.ndim != 1 or y.shape[0] != X.shape[0]:
                raise ValueError(
                    f"y must be 1-D with X.shape[0]={X.shape[0]} entries, got shape {y.shape}"
                )
            if y_numeric and not np.all(np.isfinite(y.astype(np.float64))):
                raise ValueError("y contains NaN or infinity")
            self.n_features_in_ = X.shape[1]
            return X, y
        # X's values are checked by the solver's statistics pass (NaN/inf: a ValueError naming
        # the first bad row), so the scikit-learn check would only read X once more
        return validate_data(self, X, y, dtype=[np.float64, np.float32], y_numeric=y_numeric,
                             ensure_all_finite=False, accept_sparse=("csr", "csc"))

    def _fit_core(self, X, y, loss, pairs=None, fit_intercept=True, sample_weight=None):
        prior = self._check_params()
        # a schedule set by cvfs.model_selection.staircase (a fit warm on a previous support)
        schedule = getattr(self, "_schedule", None)
        res = fsa_fit(
            X, y, self.k, loss=loss, bins=self.bins, prior=prior, n_iter=self.n_iter,
            mu=self.mu, schedule=schedule, learning_rate=self.learning_rate,
            annealing_boost=self.annealing_boost, fit_intercept=fit_intercept,
            pairs=pairs, sample_weight=sample_weight, max_memory=self.max_memory,
            worker_memory=self.worker_memory, random_state=self.random_state,
            verbose=self.verbose,
        )
        self._set_support(res.support)
        self.coef_ = res.coef[:, 0] if res.bins == 0 else res.coef
        self.intercept_ = res.intercept
        self.response_table_ = res.table
        self.history_ = res.history
        self.n_iter_ = len(res.history["loss"])
        return self

    def _set_support(self, indices):
        """``support_``: the boolean mask of the sorted selected ``indices``."""
        self.support_ = np.zeros(self.n_features_in_, dtype=bool)
        self.support_[indices] = True

    def _get_support_mask(self):
        check_is_fitted(self, "support_")
        return self.support_

    def _decision(self, X):
        """Scores f(x) = intercept_ + sum over selected features of their responses.

        Parameters
        ----------
        X : array-like, scipy.sparse matrix or dask.array.Array of shape (n_samples, n_features)
            Sparse and Dask X are read only at the selected columns.

        Returns
        -------
        scores : ndarray of shape (n_samples,)
        """
        support = self.get_support(indices=True)
        coef = self.coef_.reshape(support.size, -1)
        bins = 0 if self.bins is None else self.bins
        if is_dask_array(X):  # per row chunk, reading only the selected columns
            if X.ndim != 2 or X.shape[1] != self.n_features_in_:
                raise ValueError(f"X has shape {X.shape}, but {type(self).__name__} is "
                                 f"expecting {self.n_features_in_} features as input")
            cols = np.arange(support.size)
            Xs = X[:, support].rechunk({1: -1})
            scores = Xs.map_blocks(decision_function, cols, self.response_table_, bins, coef,
                                   self.intercept_, drop_axis=1, dtype=np.float64)
            return scores.compute()
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False,
                          accept_sparse=("csr", "csc"))
        return decision_function(X, support, self.response_table_, bins, coef,
                                 self.intercept_)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.input_tags.sparse = True
        return tags


_DOC_PARAMS = """
    k : int, default={k}
        Number of features to select (capped at the number of columns).
    n_iter : int, default={n_iter}
        Iterations N_iter.
    mu : float, default=300
        Annealing parameter of the schedule, paper eq. (3).
    learning_rate : float or None, default=None
        Fixed step size; None derives a stable step from a Lipschitz estimate on the kept
        columns (see :mod:`cvfs.core.fsa`).
    annealing_boost : float or None, default=None
        Factor kappa by which the automatic step is lengthened while features are being
        removed; None: the loss's default (logistic 4, Lorenz 10, hinge 10, squared and ranking
        1; chosen on the paper's synthetic tables); 1: the plain 1/L step throughout.
    bins : int or None, default={bins}
        None: linear responses; an int B: piecewise-linear responses with B bins per feature.
    prior : {{"shrinkage", "second_order"}}, default="shrinkage"
        Shrinkage s ||beta_j||^2, or eq. (13) with the smoothness term.
    shrinkage : float, default={shrinkage}
        s (the paper's lambda).
    smoothness : float, default=0.0
        c of eq. (13) (``prior="second_order"`` only).
    max_memory : int or None, default=None
        Bytes the kept columns may use when X is an ``np.memmap`` or ``h5py.Dataset`` read in
        row blocks, made dense from a scipy.sparse X (CSR/CSC, see :mod:`cvfs.core.fsa_sparse`),
        or gathered from a ``dask.array.Array`` (default: a quarter of physical memory).
    worker_memory : int or None, default=None
        Dask X only: bytes the kept columns may use in the workers' memory; larger kept sets are
        written to the workers' local disk after the first drop (default: a quarter of the
        workers' memory limits, or of physical memory without a ``distributed.Client``).
    random_state : None, int or Generator, default=None
        Seeds the power-iteration start vector; None uses a fixed seed (fits are deterministic).
    verbose : bool, default=False
        Progress bar.
"""

_DOC_ATTRS = """
    Attributes
    ----------
    support_ : ndarray of bool of shape (n_features_in_,)
        Mask of the selected columns of X, as scikit-learn's selectors
        (``get_support(indices=True)``: their sorted indices, the order of ``coef_``'s rows).
    coef_ : ndarray of shape (k,) or (k, bins + 1)
        Coefficients on the raw feature values (linear) or the response at the B + 1 knots.
    intercept_ : float
    response_table_ : ndarray of shape (k, 2 + G)
        Bin offset and scale of each selected feature (piecewise linear).
    history_ : dict
        Per-iteration ``loss``, ``n_kept``, ``lr``, ``width`` and ``data_passes``, ``time``.
    n_iter_ : int
        Iterations run.
    n_features_in_ : int
"""


class _BinaryScores:
    """``predict`` and (logistic loss) ``predict_proba`` of a binary classifier from its
    ``decision_function`` (positive: ``classes_[1]``)."""

    def predict(self, X):
        """Class labels, ndarray of shape (n_samples,)."""
        scores = self.decision_function(X)  # checks that the model is fitted
        return self.classes_[(scores > 0).astype(np.int64)]

    @available_if(lambda self: self.loss == "logistic")
    def predict_proba(self, X):
        """Class probabilities (logistic loss only), ndarray of shape (n_samples, 2)."""
        p = expit(self.decision_function(X))
        return np.column_stack([1.0 - p, p])


class FSAClassifier(_BinaryScores, ClassifierMixin, _FSABase):
    __doc__ = (
        """Classifier with Feature Selection with Annealing (binary or multiclass).

    Two classes: the binary solver of :mod:`cvfs.core.fsa`. More classes
    (:mod:`cvfs.core.fsa_multiclass`, linear responses, in-memory X): one coefficient row per
    feature across the C classes, kept or dropped for all classes at once by its norm; the
    logistic loss becomes the softmax cross-entropy, Lorenz and hinge become one-vs-rest sums
    with a shared support. ``coef_`` then has shape (C, k), ``intercept_`` shape (C,),
    ``decision_function`` shape (n_samples, C) and ``response_table_`` is None.
    ``sample_weight`` (in ``fit``) and ``class_weight`` weight the loss terms, the column
    statistics and the curvature estimate (their product when both are given): integer weights
    fit as rows repeated that many times.

    Parameters
    ----------
    loss : {"logistic", "lorenz", "svm"}, default="logistic"
        Logistic (eq. 6; softmax for more than two classes), Lorenz (eq. 8, robust to label
        noise) or Huberised hinge (eq. 7, h = 0.5)."""
        + _DOC_PARAMS.format(k=10, n_iter=500, bins=None, shrinkage="1e-3")
        + """    class_weight : dict, "balanced" or None, default=None
        Weights of the classes' loss terms, as scikit-learn's ``compute_sample_weight``
        ("balanced": inversely proportional to the class frequencies), multiplied into
        ``sample_weight``.
"""
        + _DOC_ATTRS
        + """    classes_ : ndarray of shape (n_classes,)

    References
    ----------
    Barbu, She, Ding, Gramajo, "Feature Selection with Annealing for Computer Vision and Big
    Data Learning", IEEE TPAMI 2017.
    """
    )

    _losses = _CLASSIFICATION_LOSSES

    def __init__(self, k=10, loss="logistic", n_iter=500, mu=300, learning_rate=None,
                 annealing_boost=None, bins=None, prior="shrinkage", shrinkage=1e-3,
                 smoothness=0.0, max_memory=None, worker_memory=None, random_state=None,
                 verbose=False,
                 class_weight=None):
        self.k = k
        self.loss = loss
        self.n_iter = n_iter
        self.mu = mu
        self.learning_rate = learning_rate
        self.annealing_boost = annealing_boost
        self.bins = bins
        self.prior = prior
        self.shrinkage = shrinkage
        self.smoothness = smoothness
        self.max_memory = max_memory
        self.worker_memory = worker_memory
        self.random_state = random_state
        self.verbose = verbose
        self.class_weight = class_weight

    def fit(self, X, y, sample_weight=None):
        """Fit on X of shape (n_samples, n_features) and labels y of shape (n_samples,).

        Two classes: the binary FSA solver (X an array, memmap, HDF5 dataset, scipy.sparse
        matrix or Dask array). More classes: the solver of :mod:`cvfs.core.fsa_multiclass` on a
        dense in-memory X, linear responses. ``sample_weight`` (n_samples,): non-negative row
        weights, times the ``class_weight`` of each row's class (not for a Dask X).

        Raises
        ------
        ValueError
            If y has fewer than two classes, a parameter or the weights are invalid, or y has
            more than two classes with ``bins`` set or X an HDF5 dataset.
        NotImplementedError
            For weights with a Dask X.
        """
        from sklearn.utils.class_weight import compute_sample_weight

        X, y = self._validate_X_y(X, y, y_numeric=False)
        weight = check_sample_weight(sample_weight, X.shape[0])
        if self.class_weight is not None:
            cw = compute_sample_weight(self.class_weight, y)
            weight = cw if weight is None else weight * cw
        classes = _multiclass_classes(y)
        if classes is None:
            self.classes_ = _binary_classes(y)
            return self._fit_core(X, np.where(y == self.classes_[1], 1.0, -1.0),
                                  get_loss(self.loss), sample_weight=weight)
        return self._fit_multiclass(X, y, classes, weight)

    def _fit_multiclass(self, X, y, classes, weight):
        prior = self._check_params()
        what = f"y has {classes.size} classes"
        if self.bins is not None:
            raise ValueError(f"Only binary classification is supported with piecewise-linear "
                             f"responses (bins={self.bins!r}); {what} (use bins=None)")
        if sp.issparse(X):  # the multiclass solver is dense: densified when that fits
            limit = self.max_memory if self.max_memory is not None else _physical_memory() // 4
            dense_bytes = X.shape[0] * X.shape[1] * X.dtype.itemsize
            if dense_bytes > limit:
                raise ValueError(f"{what}: multiclass FSA makes a sparse X dense, "
                                 f"which needs {dense_bytes} bytes > max_memory={limit}")
            X = X.toarray()
        if is_dask_array(X) or (not isinstance(X, np.ndarray) and is_out_of_core(X)):
            kind = "a Dask array" if is_dask_array(X) else "an HDF5 dataset"
            raise ValueError(f"{what}: multiclass FSA needs X in memory (an ndarray or "
                             f"np.memmap), got {kind}")
        res = fsa_multiclass_fit(
            X, np.searchsorted(classes, y), classes.size, self.k, loss=self.loss, prior=prior,
            n_iter=self.n_iter, mu=self.mu, schedule=getattr(self, "_schedule", None),
            learning_rate=self.learning_rate, annealing_boost=self.annealing_boost,
            sample_weight=weight, random_state=self.random_state, verbose=self.verbose)
        self.classes_ = classes
        self._set_support(res.support)
        self.coef_ = np.ascontiguousarray(res.coef.T)
        self.intercept_ = res.intercept
        self.response_table_ = None
        self.history_ = res.history
        self.n_iter_ = len(res.history["loss"])
        return self

    def _multiclass(self):
        return getattr(self, "classes_", np.zeros(0)).size > 2

    def decision_function(self, X):
        """Scores: ndarray of shape (n_samples,) for two classes (positive: ``classes_[1]``),
        of shape (n_samples, n_classes) for more."""
        if not self._multiclass():
            return self._decision(X)
        check_is_fitted(self, "support_")
        if is_dask_array(X):
            if X.ndim != 2 or X.shape[1] != self.n_features_in_:
                raise ValueError(f"X has shape {X.shape}, but FSAClassifier is expecting "
                                 f"{self.n_features_in_} features as input")
        else:
            X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False,
                              accept_sparse=("csr", "csc"))
        Xs = X[:, self.get_support(indices=True)]  # only the selected columns are read
        Xs = Xs.toarray() if sp.issparse(Xs) else np.asarray(Xs)
        return Xs.astype(np.float64, copy=False) @ self.coef_.T + self.intercept_

    def predict(self, X):
        """Class labels, ndarray of shape (n_samples,)."""
        if not self._multiclass():
            return super().predict(X)
        return self.classes_[np.argmax(self.decision_function(X), axis=1)]

    @available_if(lambda self: self.loss == "logistic")
    def predict_proba(self, X):
        """Class probabilities (logistic loss only; softmax for more than two classes),
        ndarray of shape (n_samples, n_classes)."""
        if not self._multiclass():
            return super().predict_proba(X)
        return softmax(self.decision_function(X), axis=1)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = self.bins is None
        return tags


class FSARegressor(RegressorMixin, _FSABase):
    __doc__ = (
        """Regression with Feature Selection with Annealing (squared loss, paper eq. 4).

    Parameters
    ----------
    loss : {"squared"}, default="squared"
        1/2 (f(x) - y)^2."""
        + _DOC_PARAMS.format(k=10, n_iter=500, bins=None, shrinkage="1e-3")
        + _DOC_ATTRS
        + """
    References
    ----------
    Barbu et al., TPAMI 2017.
    """
    )

    _losses = ("squared",)

    def __init__(self, k=10, loss="squared", n_iter=500, mu=300, learning_rate=None,
                 annealing_boost=None, bins=None, prior="shrinkage", shrinkage=1e-3,
                 smoothness=0.0, max_memory=None, worker_memory=None, random_state=None,
                 verbose=False):
        self.k = k
        self.loss = loss
        self.n_iter = n_iter
        self.mu = mu
        self.learning_rate = learning_rate
        self.annealing_boost = annealing_boost
        self.bins = bins
        self.prior = prior
        self.shrinkage = shrinkage
        self.smoothness = smoothness
        self.max_memory = max_memory
        self.worker_memory = worker_memory
        self.random_state = random_state
        self.verbose = verbose

    def fit(self, X, y, sample_weight=None):
        """Fit on X of shape (n_samples, n_features) and real targets y of shape (n_samples,);
        ``sample_weight`` (n_samples,): non-negative row weights of the loss, the column
        statistics and the curvature estimate (not for a Dask X)."""
        X, y = self._validate_X_y(X, y, y_numeric=True)
        weight = check_sample_weight(sample_weight, X.shape[0])
        return self._fit_core(X, np.asarray(y, dtype=np.float64), get_loss(self.loss),
                              sample_weight=weight)

    def predict(self, X):
        """Predictions, ndarray of shape (n_samples,)."""
        return self._decision(X)


class FSARanker(_FSABase):
    __doc__ = (
        """Learning to rank with Feature Selection with Annealing (pairwise loss, paper eq. 9).

    Pairs are formed only within a group (e.g. the candidates of one sequence), with target
    r_ij = 1 if y_i > y_j, 1/2 if equal, 0 otherwise; a higher score means better. The defaults
    are the paper's motion-segmentation settings (B = 4, k = 40, N_iter = 300, lambda = 0.01).

    Parameters
    ----------
    pair_weights : {"uniform", "group"}, default="uniform"
        The loss is the weighted mean over pairs: every pair alike (the paper), or every group
        alike (a group of n samples contributes n (n - 1) / 2 pairs, so large groups otherwise
        dominate).
    min_gap : float or None, default=None
        None: every pair within a group, ties included (r = 1/2, the paper). A number g >= 0:
        only pairs whose targets differ by more than g (see :func:`ranking_pairs`)."""
        + _DOC_PARAMS.format(k=40, n_iter=300, bins=4, shrinkage="0.01")
        + _DOC_ATTRS
        + """
    References
    ----------
    Barbu et al., TPAMI 2017, sections 2.5.2 and 3.4.
    """
    )

    _losses = ("rank",)
    loss = "rank"

    def __init__(self, k=40, n_iter=300, mu=300, learning_rate=None, annealing_boost=None, bins=4,
                 prior="shrinkage", shrinkage=0.01, smoothness=0.0, pair_weights="uniform",
                 min_gap=None, max_memory=None, worker_memory=None, random_state=None,
                 verbose=False):
        self.k = k
        self.pair_weights = pair_weights
        self.min_gap = min_gap
        self.n_iter = n_iter
        self.mu = mu
        self.learning_rate = learning_rate
        self.annealing_boost = annealing_boost
        self.bins = bins
        self.prior = prior
        self.shrinkage = shrinkage
        self.smoothness = smoothness
        self.max_memory = max_memory
        self.worker_memory = worker_memory
        self.random_state = random_state
        self.verbose = verbose

    def fit(self, X, y, groups=None, sample_weight=None):
        """Fit on X of shape (n_samples, n_features), relevance y (higher = better) and an
        optional group label per sample (pairs never cross groups). ``sample_weight``
        (n_samples,): non-negative row weights; pair (i, j) is weighted by w_i w_j (as when
        rows are repeated by integer weights) and the column statistics are weighted.

        Raises
        ------
        ValueError
            If ``groups`` has the wrong length or no group has two samples with any pair.
        """
        X, y = self._validate_X_y(X, y, y_numeric=True)
        if X.shape[0] < 2:
            raise ValueError(f"FSARanker needs n_samples >= 2 to form pairs, got "
                             f"n_samples={X.shape[0]}")
        if groups is not None:
            groups = np.asarray(groups)
            if groups.ndim != 1 or groups.shape[0] != X.shape[0]:
                raise ValueError(
                    f"groups must be 1-D with X.shape[0]={X.shape[0]} entries, "
                    f"got shape {groups.shape}"
                )
        weight = check_sample_weight(sample_weight, X.shape[0])
        if weight is None:
            pairs = ranking_pairs(y, groups, self.pair_weights, self.min_gap)
        else:
            pairs = _repeated_pairs(y, groups, self.pair_weights, self.min_gap, weight)
        if pairs[0].size == 0:
            raise ValueError("FSARanker needs at least one group with two or more samples"
                             + ("" if self.min_gap is None else
                                f" whose targets differ by more than min_gap={self.min_gap}"))
        return self._fit_core(X, np.asarray(y, dtype=np.float64), get_loss("rank"), pairs=pairs,
                              fit_intercept=False, sample_weight=weight)

    def decision_function(self, X):
        """Ranking scores (higher = better), ndarray of shape (n_samples,)."""
        return self._decision(X)

    def predict(self, X):
        """Ranking scores (higher = better), ndarray of shape (n_samples,)."""
        return self._decision(X)

    def score(self, X, y, groups=None):
        """Pairwise accuracy within groups: the fraction of pairs with different y that the
        scores order correctly (score ties count 1/2)."""
        s = self.decision_function(X)
        i, j, r, _ = ranking_pairs(y, groups)
        strict = r != 0.5
        if not strict.any():
            return 1.0
        d = s[i[strict]] - s[j[strict]]
        want = np.where(r[strict] == 1.0, 1.0, -1.0)
        return float(np.mean(np.where(d == 0, 0.5, (np.sign(d) == want).astype(float))))


# ---- SBL ----
class SBLRegressor(RegressorMixin, BaseEstimator):
    """Sparse Bayesian learning with safe screening (reweighted L1 around a weighted lasso).

    Model Y = Phi theta + V, V ~ N(0, lam I); the columns of ``X`` (= Phi) are the atoms.

    Parameters
    ----------
    lam : float or "auto", default=1e-2
        Noise variance lambda > 0; it also sets the L1 weights of each reweighted lasso (eq. 18).
        "auto" learns it first by maximising the evidence with the fast marginal-likelihood
        algorithm, guarded against pure-noise atoms so that it holds with more atoms than
        samples (:func:`cvfs.core.sbl_evidence.evidence_noise`), then fits at that value; the
        value found is ``noise_variance_``.
    screening : {"wtht", "dome", "sphere", "gap", None}, default="wtht"
        Static safe test before each weighted lasso (W-THT, dome, sphere), dynamic gap-safe
        screening during it ("gap"), or none. Every rule returns the same solution.
    positive : bool, default=False
        Constrain the coefficients to be nonnegative.
    max_iter : int, default=50
        Reweighting steps (with more atoms than samples the reweighting takes 20-30 steps to
        settle at a learned noise variance, ``benchmarks/sbl/sbl_noise.py``).
    tol : float, default=1e-4
        Relative change of gamma at which the reweighting stops.
    lasso_tol : float, default=1e-8
        Relative duality gap of each weighted lasso.
    fit_intercept : bool, default=False
        Centre X and y before the fit and estimate an intercept (False: the dictionary model
        y = Phi theta of the paper).

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        Posterior mean of theta.
    intercept_ : float
    gamma_ : ndarray of shape (n_features,)
        Prior variances.
    noise_variance_ : float
        lam used in the last step (the learned one with ``lam="auto"``).
    active_ : ndarray of shape (n_active,), int64
        Features with gamma > 0; all others have coefficient 0 and zero posterior variance.
    sigma_ : ndarray of shape (n_active, n_active)
        Posterior covariance of the coefficients of ``active_`` (eq. 9).
    X_offset_ : ndarray of shape (n_features,)
        Column means removed before the fit (zeros without ``fit_intercept``).
    screening_ : ndarray of shape (n_iter_,)
        Fraction of atoms removed at each reweighting step.
    dual_gaps_ : ndarray of shape (n_iter_,)
        Relative duality gap of each weighted lasso.
    n_iter_ : int
    n_features_in_ : int

    References
    ----------
    Jiang & Chen, "Accelerated sparse Bayesian learning via screening test", Alg. 1 and 2,
    eq. (9); Tipping & Faul, "Fast marginal likelihood maximisation for sparse Bayesian models",
    AISTATS 2003 (``lam="auto"``).

    Examples
    --------
    >>> import numpy as np
    >>> from cvfs import SBLRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((50, 200)); X /= np.linalg.norm(X, axis=0)
    >>> y = 3 * X[:, 5] - 2 * X[:, 17]
    >>> np.flatnonzero(SBLRegressor(lam=1e-4).fit(X, y).coef_).tolist()
    [5, 17]
    """

    def __init__(self, lam=1e-2, screening="wtht", positive=False, max_iter=50, tol=1e-4,
                 lasso_tol=1e-8, fit_intercept=False):
        self.lam = lam
        self.screening = screening
        self.positive = positive
        self.max_iter = max_iter
        self.tol = tol
        self.lasso_tol = lasso_tol
        self.fit_intercept = fit_intercept

    def _validate_params(self):
        from cvfs.core.sbl import SCREENING_RULES

        if not (isinstance(self.lam, str) and self.lam == "auto") and not (
                isinstance(self.lam, numbers.Real) and self.lam > 0):
            raise ValueError(f"lam must be a positive float or 'auto'; got {self.lam!r}")
        if self.screening not in SCREENING_RULES:
            raise ValueError(
                f"screening must be one of {SCREENING_RULES}; got {self.screening!r}"
            )
        if not isinstance(self.max_iter, numbers.Integral) or self.max_iter < 1:
            raise ValueError(f"max_iter must be a positive int; got {self.max_iter!r}")
        for name in ("tol", "lasso_tol"):
            v = getattr(self, name)
            if not isinstance(v, numbers.Real) or not v > 0:
                raise ValueError(f"{name} must be a positive float; got {v!r}")

    def fit(self, X, y):
        """Fit theta.

        Parameters
        ----------
        X : array-like or scipy.sparse matrix (CSR/CSC) of shape (n_samples, n_features)
            The dictionary Phi (atoms in columns). Sparse input is never densified: the solver
            works through a sparse operator, and with ``fit_intercept`` the centring is implicit
            (a rank-one correction of every product).
        y : array-like of shape (n_samples,)

        Returns
        -------
        self

        Raises
        ------
        ValueError
            On a non-positive ``lam``, an unknown ``screening``, bad ``max_iter``/``tol``, NaN
            or infinite input, or mismatched shapes.
        """
        from cvfs.core.sbl import sbl_fit

        self._validate_params()
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True,
                             accept_sparse=["csr", "csc"])
        x_off = np.asarray(X.mean(axis=0)).ravel() if self.fit_intercept else np.zeros(X.shape[1])
        y_off = float(y.mean()) if self.fit_intercept else 0.0
        if self.fit_intercept:
            y = y - y_off
            if not sp.issparse(X):
                X = X - x_off  # sparse X is centred implicitly by its operator
        auto = isinstance(self.lam, str)
        lam = float(self.lam) if not auto else max(1e-2 * float(np.var(y)), 1e-12)
        Phi = self._nonzero_columns(X, x_off)
        if Phi.shape[1] == 0:  # nothing to fit (all-zero X, e.g. one sample after centring)
            from cvfs.core.sbl import SBLResult

            res = SBLResult(coef=np.zeros(0), gamma=np.zeros(0), lam=lam)
        else:
            res = sbl_fit(Phi, y, lam, screening=self.screening, positive=self.positive,
                          max_iter=self.max_iter, tol=self.tol, lasso_tol=self.lasso_tol,
                          update_noise=auto)
        coef = np.zeros(X.shape[1])
        gamma = np.zeros(X.shape[1])
        coef[self._cols] = res.coef
        gamma[self._cols] = res.gamma
        self.coef_ = coef
        self.gamma_ = gamma
        self.intercept_ = y_off - float(x_off @ coef)
        self.noise_variance_ = res.lam
        self.active_ = self._cols[res.active].astype(np.int64)
        self.sigma_ = res.sigma
        self.X_offset_ = x_off
        self.screening_ = np.asarray(res.screening)
        self.dual_gaps_ = np.asarray(res.gaps)
        self.n_iter_ = res.n_iter
        del self._cols
        return self

    def _nonzero_columns(self, X, offset=None):
        # all-zero atoms can never enter the solution; drop them so the weights stay finite
        if sp.issparse(X):
            from cvfs.core.screening import SparseOperator

            op = SparseOperator(X, offset if self.fit_intercept else None)
            centred = op.column_norms() ** 2
            raw = centred + (X.shape[0] * offset**2 if self.fit_intercept else 0.0)
            self._cols = np.flatnonzero(centred > 1e-12 * raw)
            return op.subset(self._cols)
        self._cols = np.flatnonzero(np.any(X != 0, axis=0))
        return np.ascontiguousarray(X[:, self._cols])

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def predict(self, X, return_std=False):
        """Posterior predictive mean Phi theta + intercept, and optionally its standard deviation.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        return_std : bool, default=False
            Also return sqrt(x_S^T Sigma x_S + lam), the predictive standard deviation of a new
            observation (x centred by ``X_offset_``, S = ``active_``).

        Returns
        -------
        y_mean : ndarray of shape (n_samples,)
        y_std : ndarray of shape (n_samples,)
            Only with ``return_std``.
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False, accept_sparse=["csr", "csc"])
        mean = np.asarray(X @ self.coef_).ravel() + self.intercept_
        if not return_std:
            return mean
        Xa = X[:, self.active_]
        Xa = (Xa.toarray() if sp.issparse(Xa) else Xa) - self.X_offset_[self.active_]
        var = np.einsum("ij,ij->i", Xa @ self.sigma_, Xa) + self.noise_variance_
        return mean, np.sqrt(np.maximum(var, 0.0))


# the Gram matrix of up to 16,384 atoms takes at most 2 GiB (benchmarks/sbl/sbl_mnist.py)
_SBL_GRAM_MAX_ATOMS = 16_384


class SBLClassifier(ClassifierMixin, BaseEstimator):
    """Classification by sparse Bayesian coding over a dictionary of training samples.

    ``fit`` keeps (a class-balanced random subset of) the training samples, scaled to unit norm,
    as the atoms of a dictionary Phi. ``predict`` codes each test sample y (scaled to unit norm)
    by screened SBL, Y = Phi theta + V, and scores the classes from theta: the sum of |theta_i|
    over each class's atoms (``rule="abs"``, SBL paper eq. 60-61) or the residual left by each
    class's atoms alone (``rule="residual"``, sparse-representation classification).

    Parameters
    ----------
    lam : float, default=0.1
        lambda / lambda_max of each test sample: its noise variance is
        (lam * max_i |phi_i^T y|)^2 for the unit-norm y, which makes the first weighted lasso's
        L1 weight lam * lambda_max (the paper's lambda / lambda_max axis). lam >= 1 codes
        nothing (every sample gets uniform scores). Read at prediction time.
    screening : {"wtht", "dome", "sphere", "gap", None}, default="gap"
        Safe screening rule of each SBL fit (all give the same codes).
    n_atoms : int or None, default=10_000
        Dictionary size: a random subset of the training samples, as equal per class as the
        class sizes allow (the paper: 1,000 per digit); None keeps every sample.
    rule : {"abs", "residual"}, default="abs"
        Class score.
    max_reweight : int, default=3
        Reweighting steps of each SBL fit (a few suffice for the class scores; each step
        makes the code sparser, see ``docs/methods.md``).
    tol : float, default=1e-4
        Relative change of gamma at which the reweighting stops early.
    lasso_tol : float, default=1e-6
        Relative duality gap of each weighted lasso (looser than SBLRegressor's: the class
        scores do not need more, and near-collinear atoms make tight gaps slow).
    n_jobs : int or None, default=None
        Processes coding the test samples (joblib; None: 1, -1: all cores). With one process
        and at most 16,384 atoms the samples are coded in atom space over the dictionary's
        Gram matrix (n_atoms^2 float64, built by ``fit``, not pickled;
        :mod:`cvfs.core.sbl_batch`), which is several times faster than coding each sample
        through the dictionary; several processes code through the dictionary.
    random_state : None, int or numpy.random.Generator, default=None
        Draws the dictionary subset.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    dictionary_ : ndarray of shape (n_features, n_atoms)
        Unit-norm atoms (training samples in columns; all-zero samples are left out).
    atom_labels_ : ndarray of shape (n_atoms,), int64
        Index into ``classes_`` of each atom.
    atom_index_ : ndarray of shape (n_atoms,), int64
        Row of each atom in the training ``X``.
    n_features_in_ : int

    References
    ----------
    Jiang & Chen, "Accelerated sparse Bayesian learning via screening test", §4, eq. (59)-(61);
    Wright, Yang, Ganesh, Sastry & Ma, "Robust face recognition via sparse representation",
    IEEE TPAMI 31(2), 2009 (class residual).

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from cvfs import SBLClassifier
    >>> X, y = load_digits(return_X_y=True)
    >>> clf = SBLClassifier(lam=0.1, n_atoms=500, random_state=0).fit(X[:1000], y[:1000])
    >>> bool(clf.score(X[1000:1100], y[1000:1100]) > 0.9)
    True
    """

    def __init__(self, lam=0.1, screening="gap", n_atoms=10_000, rule="abs", max_reweight=3,
                 tol=1e-4, lasso_tol=1e-6, n_jobs=None, random_state=None):
        self.lam = lam
        self.screening = screening
        self.n_atoms = n_atoms
        self.rule = rule
        self.max_reweight = max_reweight
        self.tol = tol
        self.lasso_tol = lasso_tol
        self.n_jobs = n_jobs
        self.random_state = random_state

    def _validate_params(self):
        from cvfs.core.sbl import SCREENING_RULES

        if isinstance(self.lam, bool) or not isinstance(self.lam, numbers.Real) \
                or not (np.isfinite(self.lam) and self.lam > 0):
            raise ValueError(f"lam must be a positive float (lambda / lambda_max); "
                             f"got {self.lam!r}")
        if self.screening not in SCREENING_RULES:
            raise ValueError(f"screening must be one of {SCREENING_RULES}; "
                             f"got {self.screening!r}")
        if self.n_atoms is not None:
            _check_int("n_atoms", self.n_atoms, 1)
        if self.rule not in ("abs", "residual"):
            raise ValueError(f"rule must be 'abs' or 'residual'; got {self.rule!r}")
        _check_int("max_reweight", self.max_reweight, 1)
        for name in ("tol", "lasso_tol"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not v > 0:
                raise ValueError(f"{name} must be a positive float; got {v!r}")
        if self.n_jobs is not None and (isinstance(self.n_jobs, bool) or not isinstance(
                self.n_jobs, numbers.Integral) or self.n_jobs == 0):
            raise ValueError(f"n_jobs must be None or a nonzero int; got {self.n_jobs!r}")

    def fit(self, X, y):
        """Build the dictionary.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training samples (e.g. flattened images).
        y : array-like of shape (n_samples,)
            Class labels; at least two classes.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            On bad parameters, NaN or infinite X, mismatched shapes, fewer than two classes,
            or training samples that are all zero.
        """
        self._validate_params()
        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        classes, labels = np.unique(y, return_inverse=True)
        if classes.size < 2:
            raise ValueError(f"SBLClassifier needs samples of at least 2 classes; got "
                             f"{classes.size} class")
        norms = np.linalg.norm(X, axis=1)
        ok = np.flatnonzero(norms > 0)
        if ok.size == 0:
            raise ValueError("X has only all-zero samples: no atom for the dictionary")
        rng = np.random.default_rng(self.random_state)
        from cvfs.core.sbl_classify import balanced_subsample

        idx = ok[balanced_subsample(labels[ok], self.n_atoms, rng)]
        self.classes_ = classes
        self.dictionary_ = np.ascontiguousarray((X[idx] / norms[idx, None]).T)
        self._gram_dictionary = None
        if self.dictionary_.shape[1] <= _SBL_GRAM_MAX_ATOMS:
            self._gram()
        self.atom_labels_ = labels[idx].astype(np.int64)
        self.atom_index_ = idx
        return self

    def _gram(self):
        """The dictionary with its Gram matrix: built by ``fit``, rebuilt at the first prediction
        of an unpickled or loaded model (it is not stored)."""
        from cvfs.core.sbl_batch import GramDictionary

        gd = getattr(self, "_gram_dictionary", None)
        if gd is None or gd.Phi is not self.dictionary_:
            gd = self._gram_dictionary = GramDictionary(self.dictionary_)
        return gd

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_gram_dictionary", None)
        return state

    def _scores(self, X):
        from joblib import Parallel, delayed

        from cvfs.core.sbl_classify import class_scores, sbl_codes

        check_is_fitted(self)
        self._validate_params()
        X = validate_data(self, X, dtype=np.float64, reset=False)
        kw = dict(screening=self.screening, max_iter=self.max_reweight, tol=self.tol,
                  lasso_tol=self.lasso_tol)
        n_jobs = 1 if self.n_jobs is None else self.n_jobs
        if n_jobs == 1 and self.dictionary_.shape[1] <= _SBL_GRAM_MAX_ATOMS:
            codes, lams = sbl_codes(self.dictionary_, X, self.lam, gram=self._gram(), **kw)
        elif n_jobs == 1 or X.shape[0] < 2:
            codes, lams = sbl_codes(self.dictionary_, X, self.lam, **kw)
        else:
            parts = Parallel(n_jobs=n_jobs)(
                delayed(sbl_codes)(self.dictionary_, chunk, self.lam, **kw)
                for chunk in np.array_split(X, min(abs(n_jobs) * 4, X.shape[0])))
            codes = [c for p in parts for c in p[0]]
            lams = np.concatenate([p[1] for p in parts])
        return class_scores(self.dictionary_, X, codes, lams, self.atom_labels_,
                            self.classes_.size, self.rule)

    def decision_function(self, X):
        """Class scores: prob_k of eq. (61) (``"abs"``) or minus the class residual.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes), or (n_samples,) with two classes (score of
        ``classes_[1]`` minus score of ``classes_[0]``)
        """
        score = self._scores(X)[0]
        return score[:, 1] - score[:, 0] if score.shape[1] == 2 else score

    def predict_proba(self, X):
        """Class probabilities: ABS_k / sum_j ABS_j (``"abs"``) or the normalised Gaussian
        class likelihoods exp(-r_k^2 / (2 lam)) (``"residual"``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        return self._scores(X)[1]

    def predict(self, X):
        """The class with the largest score.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        score = self._scores(X)[0]
        return self.classes_[np.argmax(score, axis=1)]


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
        _check_real("lam", self.lam, 0.0)
        _check_real("rho", self.rho, 0.0, strict=True)
        _check_real("tol", self.tol, 0.0, strict=True)
        _check_int("max_iter", self.max_iter, 1)
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


def _is_group_list(groups):
    """True for groups given as a list of index arrays (possibly overlapping)."""
    return (isinstance(groups, list | tuple) and len(groups) > 0
            and all(np.ndim(g) == 1 for g in groups))


def _group_members(groups, n_features):
    """(members, group_of) of a list of index arrays: the virtual columns, group by group."""
    members = []
    for i, g in enumerate(groups):
        g = np.asarray(g)
        if g.size == 0 or g.dtype.kind not in "iu":
            raise ValueError(f"groups[{i}] must be a non-empty array of feature indices, got "
                             f"{g.size} entries of dtype {g.dtype}")
        if g.min() < 0 or g.max() >= n_features or np.unique(g).size != g.size:
            raise ValueError(f"groups[{i}] must hold distinct feature indices in "
                             f"[0, {n_features}), got {g.tolist()}")
        members.append(g.astype(np.int64))
    group_of = np.repeat(np.arange(len(members)), [g.size for g in members])
    return np.concatenate(members), group_of


class FGMClassifier(_BinaryScores, ClassifierMixin, SelectorMixin, BaseEstimator):
    """Binary classifier with the Feature Generating Machine (cutting-plane feature selection).

    Each outer iteration adds the B most violated features (or groups) found by the worst-case
    analysis, then re-solves the squared-l1 regularised subproblem by accelerated proximal
    gradient (see :mod:`cvfs.core.fgm`). Dense and scipy.sparse X are accepted; sparse X is never
    densified (only the selected columns are cached). With ``mapping`` the features are
    generated from a nonlinear map of X (:mod:`cvfs.core.fgm_spaces`); ``decision_function``
    applies the same map.

    Parameters
    ----------
    B : int, default=10
        Features (or groups) added per iteration; the model keeps between B and
        ``max_iter * B`` features.
    C : float, default=10.0
        Loss weight (larger: less regularisation).
    loss : {"squared_hinge", "logistic"}, default="squared_hinge"
    max_iter : int, default=20
        Maximum number of generated constraints (outer cutting-plane iterations).
    tol : float, default=1e-3
        Relative tolerance on the violation of a new constraint and on the objective decrease.
    groups : array-like of shape (n_features,) or list of array-like of int, optional
        Group label of each feature (non-overlapping groups), or a list of groups given by
        their feature indices, which may overlap (tree-structured groups included): each
        membership becomes a duplicated column (latent group lasso, section 2.4) and a feature's
        weight is the sum of its copies'. B then counts groups.
    mapping : {None, "poly2", "additive"}, default=None
        None: the features of X. ``"poly2"``: the second-order polynomial expansion, the terms
        ``x_j`` and ``x_j x_k`` (``j <= k``), searched implicitly (never formed beyond the chosen
        ones); ``groups`` must be None. ``"additive"``: the explicit additive chi-squared map
        (``2 * sample_steps - 1`` components per feature, X must be non-negative) with the
        components of each input feature (or of each group) as one group, so B counts input
        features (or groups).
    sample_steps : int, default=2
        Sampling points of the additive map (``mapping="additive"`` only).

    Attributes
    ----------
    coef_ : ndarray
        Weights of the mapped features: shape (n_features,) without mapping (with overlapping
        groups the sum of a feature's copies),
        (n_features * (2 * sample_steps - 1),) for ``"additive"`` (component ``c // n_features``
        of input feature ``c % n_features``), (n_terms,) for ``"poly2"`` (one per row of
        ``terms_``).
    intercept_ : float
    terms_ : ndarray of int of shape (n_terms, 2)
        ``"poly2"`` only: the selected terms as ``(j, k)`` for ``x_j x_k`` and ``(j, -1)`` for
        ``x_j``.
    latent_coef_ : ndarray of shape (n_memberships,)
        Overlapping groups only: the weight of every copy, group by group in the order given.
    support_ : ndarray of bool of shape (n_features,)
        Input features used by a non-zero weight.
    blocks_ : list of ndarray of int
        Features of each generated constraint (indices into ``coef_``'s feature space; for
        ``"poly2"`` the ``(j, k)`` rows of its terms; for overlapping groups input features).
    feature_scaling_ : ndarray
        Learned scaling ``d = sum_t mu_t d_t`` in [0, 1], one per entry of ``coef_`` (for
        overlapping groups the largest over a feature's copies).
    history_ : dict
        Per iteration ``objective``, ``violation``, ``n_selected``, ``apg_iter``.
    n_iter_ : int
    classes_ : ndarray of shape (2,)
    n_features_in_ : int

    Raises
    ------
    ValueError
        From ``fit``: invalid parameters, non-finite values, no samples, B larger than the number
        of features (or groups), labels that are not binary, an unknown ``mapping``, groups with
        ``"poly2"``, overlapping groups with a mapping, empty or out-of-range groups, negative
        values with ``"additive"``.

    References
    ----------
    Tan, Tsang, Wang, "Towards Large-scale and Ultrahigh Dimensional Feature Selection via
    Feature Generation" (sections 4.4 and 6.4 for the mappings).
    """

    def __init__(self, B=10, C=10.0, loss="squared_hinge", max_iter=20, tol=1e-3, groups=None,
                 mapping=None, sample_steps=2):
        self.B = B
        self.C = C
        self.loss = loss
        self.max_iter = max_iter
        self.tol = tol
        self.groups = groups
        self.mapping = mapping
        self.sample_steps = sample_steps

    def _space(self, X, groups):
        """FGM's feature space of validated X: (space, groups over its columns)."""
        from cvfs.core.fgm_spaces import Poly2Space, additive_map

        if self.mapping == "poly2":
            return Poly2Space(X), None
        if self.mapping == "additive":
            if (X.data if sp.issparse(X) else X).min(initial=0.0) < 0:
                raise ValueError("mapping='additive' needs non-negative X (the additive "
                                 "chi-squared map), got negative values")
            sampler, n_comp = additive_map(self.sample_steps)
            unit = np.arange(X.shape[1]) if groups is None else groups
            return sampler.fit_transform(X), np.tile(unit, n_comp)
        return X, groups

    def fit(self, X, y):
        """Fit on X (dense or CSR/CSC) of shape (n_samples, n_features) and binary y."""
        from cvfs.core.fgm import LOSSES, fgm_fit

        _check_int("B", self.B, 1)
        _check_real("C", self.C, 0.0, strict=True)
        _check_int("max_iter", self.max_iter, 1)
        _check_real("tol", self.tol, 0.0)
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {list(LOSSES)}, got {self.loss!r}")
        if self.mapping not in (None, "poly2", "additive"):
            raise ValueError(f"mapping must be one of [None, 'poly2', 'additive'], "
                             f"got {self.mapping!r}")
        if self.mapping == "additive" and self.sample_steps not in (1, 2, 3):
            raise ValueError(f"sample_steps must be 1, 2 or 3, got {self.sample_steps!r}")
        if self.mapping == "poly2" and self.groups is not None:
            raise ValueError("groups must be None with mapping='poly2' (products have no group)")
        X, y = validate_data(self, X, y, accept_sparse=("csr", "csc"), dtype=np.float64,
                             ensure_all_finite=True)
        self.classes_ = _binary_classes(y)
        groups = overlap = None
        n_units = X.shape[1]
        if _is_group_list(self.groups):
            if self.mapping is not None:
                raise ValueError("overlapping groups (a list of index arrays) need mapping=None, "
                                 f"got {self.mapping!r}")
            overlap = _group_members(self.groups, X.shape[1])
            n_units = len(self.groups)
        elif self.groups is not None:
            g = np.asarray(self.groups)
            if g.shape != (X.shape[1],):
                raise ValueError(f"groups must have shape ({X.shape[1]},) (one label per "
                                 f"feature), got {g.shape}")
            _, groups = np.unique(g, return_inverse=True)
            n_units = int(groups.max()) + 1
        if self.B > n_units:
            unit = "features" if groups is None and overlap is None else "groups"
            raise ValueError(f"B must be <= the number of {unit} ({n_units}), got {self.B}")
        if overlap is not None:
            from cvfs.core.fgm_spaces import OverlapSpace

            Z, zgroups = OverlapSpace(X, *overlap), None
        else:
            Z, zgroups = self._space(X, groups)
        res = fgm_fit(Z, np.where(y == self.classes_[1], 1.0, -1.0), B=self.B, C=float(self.C),
                      loss=self.loss, max_iter=self.max_iter, tol=float(self.tol),
                      groups=zgroups)
        m = X.shape[1]
        # the learned scaling d = sum_t mu_t d_t over the space's generated features
        index = [np.searchsorted(res.features, blk) for blk in res.blocks]
        scaling = np.zeros(res.features.size)
        total = res.block_norms.sum()
        if total > 0:
            for blk, nrm in zip(index, res.block_norms):
                scaling[blk] += nrm / total
        used = res.features[res.feature_coef != 0]
        if self.mapping == "poly2":
            keep = res.feature_coef != 0
            self.terms_ = Z.decode(res.features[keep])
            self.coef_ = res.feature_coef[keep]
            self.blocks_ = [Z.decode(blk) for blk in res.blocks]
            self.feature_scaling_ = scaling[keep]
            used = self.terms_[self.terms_ >= 0]
        elif overlap is not None:  # fold the copies back onto the input features
            members = overlap[0]
            self.latent_coef_ = res.coef
            self.coef_ = np.bincount(members, weights=res.coef, minlength=m)
            self.blocks_ = [members[blk] for blk in res.blocks]
            self.feature_scaling_ = np.zeros(m)
            np.maximum.at(self.feature_scaling_, members[res.features], scaling)
            used = members[used]
        else:
            self.coef_ = res.coef
            self.blocks_ = res.blocks
            self.feature_scaling_ = np.zeros(res.coef.size)
            self.feature_scaling_[res.features] = scaling
            used = used % m  # additive map: column c belongs to input feature c % m
        self.support_ = np.zeros(m, dtype=bool)
        self.support_[used] = True
        self.intercept_ = res.intercept
        self.history_ = res.history
        self.n_iter_ = len(res.blocks)
        return self

    def _get_support_mask(self):
        check_is_fitted(self, "support_")
        return self.support_

    def decision_function(self, X):
        """Scores (positive: ``classes_[1]``), ndarray of shape (n_samples,)."""
        from cvfs.core.fgm_spaces import Poly2Space

        check_is_fitted(self, "coef_")
        X = validate_data(self, X, accept_sparse=("csr", "csc"), dtype=np.float64, reset=False)
        if self.mapping == "poly2":
            space = Poly2Space(X)
            return space.columns(space.encode(self.terms_)) @ self.coef_ + self.intercept_
        if self.mapping == "additive":
            X, _ = self._space(X, None)
        return np.asarray(X @ self.coef_).ravel() + self.intercept_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        tags.input_tags.sparse = True
        return tags
