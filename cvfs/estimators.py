"""scikit-learn estimators on the shared core: FSAClassifier, FSARegressor, FSARanker,
SBLRegressor.

``__init__`` only stores parameters; ``fit`` validates them and the data, calls
:func:`cvfs.core.fsa.fsa_fit`, and stores fitted state in attributes ending in ``_``.
The FSA estimators are also feature selectors (``get_support`` / ``transform``).
"""

import numbers

import numpy as np
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.feature_selection import SelectorMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from cvfs.core.fsa import decision_function, fsa_fit, is_out_of_core
from cvfs.core.losses import get_loss
from cvfs.core.priors import get_prior

__all__ = ["FGMClassifier", "FSAClassifier", "FSARanker", "FSARegressor", "SBLRegressor",
           "ranking_pairs"]

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
        if self.loss not in self._losses:
            raise ValueError(f"loss must be one of {list(self._losses)}, got {self.loss!r}")
        return get_prior(self.prior, self.shrinkage, self.smoothness)

    def _validate_X_y(self, X, y, y_numeric):
        """Arrays are validated by scikit-learn; memmaps and HDF5 datasets are only checked for
        shape (their values are checked block by block during the fit)."""
        if is_out_of_core(X):
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
                             ensure_all_finite=False)

    def _fit_core(self, X, y, loss, pairs=None, fit_intercept=True):
        prior = self._check_params()
        res = fsa_fit(
            X, y, self.k, loss=loss, bins=self.bins, prior=prior, n_iter=self.n_iter,
            mu=self.mu, learning_rate=self.learning_rate, annealing_boost=self.annealing_boost,
            fit_intercept=fit_intercept,
            pairs=pairs, max_memory=self.max_memory, random_state=self.random_state,
            verbose=self.verbose,
        )
        self.support_ = res.support
        self.coef_ = res.coef[:, 0] if res.bins == 0 else res.coef
        self.intercept_ = res.intercept
        self.response_table_ = res.table
        self.history_ = res.history
        return self

    def _get_support_mask(self):
        check_is_fitted(self, "support_")
        mask = np.zeros(self.n_features_in_, dtype=bool)
        mask[self.support_] = True
        return mask

    def _decision(self, X):
        """Scores f(x) = intercept_ + sum over selected features of their responses.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray of shape (n_samples,)
        """
        check_is_fitted(self, "support_")
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        coef = self.coef_.reshape(self.support_.size, -1)
        bins = 0 if self.bins is None else self.bins
        return decision_function(X, self.support_, self.response_table_, bins, coef,
                                 self.intercept_)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
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
        row blocks (default: a quarter of physical memory).
    random_state : None, int or Generator, default=None
        Seeds the power-iteration start vector; None uses a fixed seed (fits are deterministic).
    verbose : bool, default=False
        Progress bar.
"""

_DOC_ATTRS = """
    Attributes
    ----------
    support_ : ndarray of shape (k,)
        Sorted indices of the selected columns of X.
    coef_ : ndarray of shape (k,) or (k, bins + 1)
        Coefficients on the raw feature values (linear) or the response at the B + 1 knots.
    intercept_ : float
    response_table_ : ndarray of shape (k, 2 + G)
        Bin offset and scale of each selected feature (piecewise linear).
    history_ : dict
        Per-iteration ``loss``, ``n_kept``, ``lr``, ``width`` and ``data_passes``, ``time``.
    n_features_in_ : int
"""


class FSAClassifier(ClassifierMixin, _FSABase):
    __doc__ = (
        """Binary classifier with Feature Selection with Annealing.

    Parameters
    ----------
    loss : {"logistic", "lorenz", "svm"}, default="logistic"
        Logistic (eq. 6), Lorenz (eq. 8, robust to label noise) or Huberised hinge (eq. 7,
        h = 0.5)."""
        + _DOC_PARAMS.format(k=10, n_iter=500, bins=None, shrinkage="1e-3")
        + _DOC_ATTRS
        + """    classes_ : ndarray of shape (2,)

    References
    ----------
    Barbu, She, Ding, Gramajo, "Feature Selection with Annealing for Computer Vision and Big
    Data Learning", IEEE TPAMI 2017.
    """
    )

    _losses = _CLASSIFICATION_LOSSES

    def __init__(self, k=10, loss="logistic", n_iter=500, mu=300, learning_rate=None,
                 annealing_boost=None, bins=None, prior="shrinkage", shrinkage=1e-3,
                 smoothness=0.0, max_memory=None, random_state=None, verbose=False):
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
        self.random_state = random_state
        self.verbose = verbose

    def fit(self, X, y):
        """Fit on X of shape (n_samples, n_features) (array, memmap or HDF5 dataset) and binary
        labels y of shape (n_samples,).

        Raises
        ------
        ValueError
            If y does not have exactly two classes, or a parameter is invalid.
        """
        X, y = self._validate_X_y(X, y, y_numeric=False)
        self.classes_ = _binary_classes(y)
        return self._fit_core(X, np.where(y == self.classes_[1], 1.0, -1.0),
                              get_loss(self.loss))

    def decision_function(self, X):
        """Scores (positive: ``classes_[1]``), ndarray of shape (n_samples,)."""
        return self._decision(X)

    def predict(self, X):
        """Class labels, ndarray of shape (n_samples,)."""
        check_is_fitted(self, "support_")
        return self.classes_[(self.decision_function(X) > 0).astype(np.int64)]

    @available_if(lambda self: self.loss == "logistic")
    def predict_proba(self, X):
        """Class probabilities (logistic loss only), ndarray of shape (n_samples, 2)."""
        p = expit(self.decision_function(X))
        return np.column_stack([1.0 - p, p])

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
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
                 smoothness=0.0, max_memory=None, random_state=None, verbose=False):
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
        self.random_state = random_state
        self.verbose = verbose

    def fit(self, X, y):
        """Fit on X of shape (n_samples, n_features) and real targets y of shape (n_samples,)."""
        X, y = self._validate_X_y(X, y, y_numeric=True)
        return self._fit_core(X, np.asarray(y, dtype=np.float64), get_loss(self.loss))

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
                 min_gap=None, max_memory=None, random_state=None, verbose=False):
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
        self.random_state = random_state
        self.verbose = verbose

    def fit(self, X, y, groups=None):
        """Fit on X of shape (n_samples, n_features), relevance y (higher = better) and an
        optional group label per sample (pairs never cross groups).

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
        pairs = ranking_pairs(y, groups, self.pair_weights, self.min_gap)
        if pairs[0].size == 0:
            raise ValueError("FSARanker needs at least one group with two or more samples"
                             + ("" if self.min_gap is None else
                                f" whose targets differ by more than min_gap={self.min_gap}"))
        return self._fit_core(X, np.asarray(y, dtype=np.float64), get_loss("rank"), pairs=pairs,
                              fit_intercept=False)

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
    lam : float, default=1e-2
        Noise variance lambda > 0; it also sets the L1 weights of each reweighted lasso (eq. 18).
    screening : {"wtht", "dome", "sphere", "gap", None}, default="wtht"
        Static safe test before each weighted lasso (W-THT, dome, sphere), dynamic gap-safe
        screening during it ("gap"), or none. Every rule returns the same solution.
    positive : bool, default=False
        Constrain the coefficients to be nonnegative.
    max_iter : int, default=20
        Reweighting steps.
    tol : float, default=1e-4
        Relative change of gamma at which the reweighting stops.
    lasso_tol : float, default=1e-8
        Relative duality gap of each weighted lasso.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        Posterior mean of theta.
    gamma_ : ndarray of shape (n_features,)
        Prior variances.
    screening_ : ndarray of shape (n_iter_,)
        Fraction of atoms removed at each reweighting step.
    dual_gaps_ : ndarray of shape (n_iter_,)
        Relative duality gap of each weighted lasso.
    n_iter_ : int
    n_features_in_ : int

    References
    ----------
    Jiang & Chen, "Accelerated sparse Bayesian learning via screening test", Alg. 1 and 2.

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

    def __init__(self, lam=1e-2, screening="wtht", positive=False, max_iter=20, tol=1e-4,
                 lasso_tol=1e-8):
        self.lam = lam
        self.screening = screening
        self.positive = positive
        self.max_iter = max_iter
        self.tol = tol
        self.lasso_tol = lasso_tol

    def _validate_params(self):
        from cvfs.core.sbl import SCREENING_RULES

        if not isinstance(self.lam, numbers.Real) or not self.lam > 0:
            raise ValueError(f"lam must be a positive float; got {self.lam!r}")
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
        X : array-like of shape (n_samples, n_features)
            The dictionary Phi (atoms in columns).
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
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        res = sbl_fit(self._nonzero_columns(X), y, float(self.lam), screening=self.screening,
                      positive=self.positive, max_iter=self.max_iter, tol=self.tol,
                      lasso_tol=self.lasso_tol)
        coef = np.zeros(X.shape[1])
        gamma = np.zeros(X.shape[1])
        coef[self._cols] = res.coef
        gamma[self._cols] = res.gamma
        self.coef_ = coef
        self.gamma_ = gamma
        self.intercept_ = 0.0
        self.screening_ = np.asarray(res.screening)
        self.dual_gaps_ = np.asarray(res.gaps)
        self.n_iter_ = res.n_iter
        del self._cols
        return self

    def _nonzero_columns(self, X):
        # all-zero atoms can never enter the solution; drop them so the weights stay finite
        self._cols = np.flatnonzero(np.any(X != 0, axis=0))
        return np.ascontiguousarray(X[:, self._cols])

    def predict(self, X):
        """Phi theta.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return X @ self.coef_


class FGMClassifier(ClassifierMixin, SelectorMixin, BaseEstimator):
    """Binary linear classifier with the Feature Generating Machine (cutting-plane selection).

    Each outer iteration adds the B most violated features (or groups) found by the worst-case
    analysis, then re-solves the squared-l1 regularised subproblem by accelerated proximal
    gradient (see :mod:`cvfs.core.fgm`). Dense and scipy.sparse X are accepted; sparse X is never
    densified (only the selected columns are cached).

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
    groups : array-like of shape (n_features,), optional
        Group label of each feature (non-overlapping groups); B then counts groups.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    support_ : ndarray of bool of shape (n_features,)
    blocks_ : list of ndarray of int
        Features of each generated constraint.
    feature_scaling_ : ndarray of shape (n_features,)
        Learned scaling ``d = sum_t mu_t d_t`` in [0, 1].
    history_ : dict
        Per iteration ``objective``, ``violation``, ``n_selected``, ``apg_iter``.
    n_iter_ : int
    classes_ : ndarray of shape (2,)
    n_features_in_ : int

    Raises
    ------
    ValueError
        From ``fit``: invalid parameters, non-finite values, no samples, B larger than the number
        of features (or groups), labels that are not binary.

    References
    ----------
    Tan, Tsang, Wang, "Towards Large-scale and Ultrahigh Dimensional Feature Selection via
    Feature Generation".
    """

    def __init__(self, B=10, C=10.0, loss="squared_hinge", max_iter=20, tol=1e-3, groups=None):
        self.B = B
        self.C = C
        self.loss = loss
        self.max_iter = max_iter
        self.tol = tol
        self.groups = groups

    def fit(self, X, y):
        """Fit on X (dense or CSR/CSC) of shape (n_samples, n_features) and binary y."""
        from cvfs.core.fgm import LOSSES, fgm_fit

        _check_int("B", self.B, 1)
        _check_real("C", self.C, 0.0, strict=True)
        _check_int("max_iter", self.max_iter, 1)
        _check_real("tol", self.tol, 0.0)
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {list(LOSSES)}, got {self.loss!r}")
        X, y = validate_data(self, X, y, accept_sparse=("csr", "csc"), dtype=np.float64,
                             ensure_all_finite=True)
        self.classes_ = _binary_classes(y)
        groups = None
        n_units = X.shape[1]
        if self.groups is not None:
            g = np.asarray(self.groups)
            if g.shape != (X.shape[1],):
                raise ValueError(f"groups must have shape ({X.shape[1]},) (one label per "
                                 f"feature), got {g.shape}")
            _, groups = np.unique(g, return_inverse=True)
            n_units = int(groups.max()) + 1
        if self.B > n_units:
            unit = "groups" if groups is not None else "features"
            raise ValueError(f"B must be <= the number of {unit} ({n_units}), got {self.B}")
        res = fgm_fit(X, np.where(y == self.classes_[1], 1.0, -1.0), B=self.B, C=float(self.C),
                      loss=self.loss, max_iter=self.max_iter, tol=float(self.tol),
                      groups=groups)
        self.coef_ = res.coef
        self.intercept_ = res.intercept
        self.support_ = res.coef != 0
        self.blocks_ = res.blocks
        total = res.block_norms.sum()
        scaling = np.zeros(X.shape[1])
        if total > 0:
            for blk, nrm in zip(res.blocks, res.block_norms):
                scaling[blk] += nrm / total
        self.feature_scaling_ = scaling
        self.history_ = res.history
        self.n_iter_ = len(res.blocks)
        return self

    def _get_support_mask(self):
        check_is_fitted(self, "support_")
        return self.support_

    def decision_function(self, X):
        """Scores (positive: ``classes_[1]``), ndarray of shape (n_samples,)."""
        check_is_fitted(self, "coef_")
        X = validate_data(self, X, accept_sparse=("csr", "csc"), dtype=np.float64, reset=False)
        return np.asarray(X @ self.coef_).ravel() + self.intercept_

    def predict(self, X):
        """Class labels, ndarray of shape (n_samples,)."""
        check_is_fitted(self, "coef_")
        return self.classes_[(self.decision_function(X) > 0).astype(np.int64)]

    @available_if(lambda self: self.loss == "logistic")
    def predict_proba(self, X):
        """Class probabilities (logistic loss only), ndarray of shape (n_samples, 2)."""
        p = expit(self.decision_function(X))
        return np.column_stack([1.0 - p, p])

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        tags.input_tags.sparse = True
        return tags
