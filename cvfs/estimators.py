"""Estimators with the scikit-learn API on top of the shared core."""

import numbers

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

__all__ = ["SBLRegressor"]


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
