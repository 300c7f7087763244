"""FSA estimators: FSAClassifier (binary and multiclass), FSARegressor, FSARanker.

``__init__`` only stores parameters; ``fit`` validates them and the data, calls
:func:`cvfs.core.fsa.fsa_fit` (:func:`cvfs.core.fsa_multiclass.fsa_multiclass_fit` for more
than two classes), and stores fitted state in attributes ending in ``_``. They are feature
selectors (``support_`` mask, ``get_support`` / ``transform``).
"""

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.feature_selection import SelectorMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted, validate_data

from cvfs.core.fsa import (
    _physical_memory,
    check_sample_weight,
    decision_function,
    fsa_fit,
    is_out_of_core,
)
from cvfs.core.fsa_multiclass import fsa_multiclass_fit, get_multiclass_loss
from cvfs.core.layouts.dask import is_dask_array
from cvfs.core.losses import get_loss, is_probabilistic
from cvfs.core.priors import get_prior
from cvfs.estimators._common import (
    BinaryScores,
    binary_classes,
    check_int,
    check_real,
    multiclass_classes,
)

__all__ = ["FSAClassifier", "FSARanker", "FSARegressor", "ranking_pairs"]


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


class _FSABase(SelectorMixin, BaseEstimator):
    """Parameter checks, data handling and the fitted state shared by the FSA estimators."""

    _role = None  # the role a loss must serve: cvfs.core.losses.get_loss

    def _loss_object(self):
        """The loss object of ``self.loss`` (a name or a loss object), checked for the role."""
        return get_loss(self.loss, self._role)

    def _check_params(self):
        check_int("k", self.k, 1)
        check_int("n_iter", self.n_iter, 1)
        check_real("mu", self.mu, 0.0)
        if self.learning_rate is not None:
            check_real("learning_rate", self.learning_rate, 0.0, strict=True)
        if self.annealing_boost is not None:
            check_real("annealing_boost", self.annealing_boost, 0.0, strict=True)
        if self.bins is not None:
            check_int("bins", self.bins, 1)
        check_real("shrinkage", self.shrinkage, 0.0)
        check_real("smoothness", self.smoothness, 0.0)
        if self.max_memory is not None:
            check_int("max_memory", self.max_memory, 1)
        if self.worker_memory is not None:
            check_int("worker_memory", self.worker_memory, 1)
        self._loss_object()
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
        res = fsa_fit(
            X, y, self.k, loss=loss, bins=self.bins, prior=prior, n_iter=self.n_iter,
            mu=self.mu, schedule=self.schedule, learning_rate=self.learning_rate,
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
        row blocks, made dense from a scipy.sparse X (CSR/CSC, see :mod:`cvfs.core.layouts.sparse`),
        or gathered from a ``dask.array.Array`` (default: a quarter of physical memory).
    worker_memory : int or None, default=None
        Dask X only: bytes the kept columns may use in the workers' memory; larger kept sets are
        written to the workers' local disk after the first drop (default: a quarter of the
        workers' memory limits, or of physical memory without a ``distributed.Client``).
    random_state : None, int or Generator, default=None
        Seeds the power-iteration start vector; None uses a fixed seed (fits are deterministic).
    verbose : bool, default=False
        Progress bar.
    schedule : array-like of int or None, default=None
        Kept features per iteration M_1..M_n (non-increasing, ending at ``k``), replacing the
        annealing schedule of ``mu`` and ``n_iter`` (:func:`cvfs.model_selection.staircase`
        uses it to fit warm on a previous support).
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


class FSAClassifier(BinaryScores, ClassifierMixin, _FSABase):
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
    loss : str or MarginLoss, default="logistic"
        A margin loss (:class:`cvfs.core.losses.MarginLoss`) or its name in
        :data:`cvfs.core.losses.LOSSES`: "logistic" (eq. 6; softmax for more than two classes),
        "lorenz" (eq. 8, robust to label noise), "svm" (Huberised hinge, eq. 7, h = 0.5),
        "squared_hinge"; a user's loss object (``docs/losses.md``). More than two classes: the
        loss's multiclass form (one-vs-rest for all but the logistic). ``predict_proba`` exists
        for probabilistic losses (the logistic)."""
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

    _role = "classifier"

    def __init__(self, k=10, loss="logistic", n_iter=500, mu=300, learning_rate=None,
                 annealing_boost=None, bins=None, prior="shrinkage", shrinkage=1e-3,
                 smoothness=0.0, max_memory=None, worker_memory=None, random_state=None,
                 verbose=False, class_weight=None, schedule=None):
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
        self.schedule = schedule

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
        classes = multiclass_classes(y)
        if classes is None:
            self.classes_ = binary_classes(y)
            return self._fit_core(X, np.where(y == self.classes_[1], 1.0, -1.0),
                                  self._loss_object(), sample_weight=weight)
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
            n_iter=self.n_iter, mu=self.mu, schedule=self.schedule,
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

    @available_if(lambda self: is_probabilistic(self.loss))
    def predict_proba(self, X):
        """Class probabilities (probabilistic losses only: the loss's ``proba``; the softmax
        for more than two classes), ndarray of shape (n_samples, n_classes)."""
        if not self._multiclass():
            return super().predict_proba(X)
        mloss = get_multiclass_loss(self.loss)
        if not getattr(mloss, "probabilistic", False):
            raise AttributeError(f"the multiclass form of the {mloss.name!r} loss gives no "
                                 f"probabilities")
        return mloss.proba(self.decision_function(X))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = self.bins is None
        return tags


class FSARegressor(RegressorMixin, _FSABase):
    __doc__ = (
        """Regression with Feature Selection with Annealing (squared loss, paper eq. 4).

    Parameters
    ----------
    loss : str or Loss, default="squared"
        "squared": 1/2 (f(x) - y)^2; or a regression loss object (neither margin nor pairwise,
        e.g. a user's Poisson loss, ``docs/losses.md``)."""
        + _DOC_PARAMS.format(k=10, n_iter=500, bins=None, shrinkage="1e-3")
        + _DOC_ATTRS
        + """
    References
    ----------
    Barbu et al., TPAMI 2017.
    """
    )

    _role = "regressor"

    def __init__(self, k=10, loss="squared", n_iter=500, mu=300, learning_rate=None,
                 annealing_boost=None, bins=None, prior="shrinkage", shrinkage=1e-3,
                 smoothness=0.0, max_memory=None, worker_memory=None, random_state=None,
                 verbose=False, schedule=None):
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
        self.schedule = schedule

    def fit(self, X, y, sample_weight=None):
        """Fit on X of shape (n_samples, n_features) and real targets y of shape (n_samples,);
        ``sample_weight`` (n_samples,): non-negative row weights of the loss, the column
        statistics and the curvature estimate (not for a Dask X)."""
        X, y = self._validate_X_y(X, y, y_numeric=True)
        weight = check_sample_weight(sample_weight, X.shape[0])
        return self._fit_core(X, np.asarray(y, dtype=np.float64), self._loss_object(),
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

    _role = "ranker"
    loss = "rank"

    def __init__(self, k=40, n_iter=300, mu=300, learning_rate=None, annealing_boost=None, bins=4,
                 prior="shrinkage", shrinkage=0.01, smoothness=0.0, pair_weights="uniform",
                 min_gap=None, max_memory=None, worker_memory=None, random_state=None,
                 verbose=False, schedule=None):
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
        self.schedule = schedule

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
        return self._fit_core(X, np.asarray(y, dtype=np.float64), self._loss_object(), pairs=pairs,
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
