"""Screened sparse Bayesian learning: SBLRegressor and the sparse-representation
classifier SBLClassifier.
"""

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from cvfs.estimators._common import check_int

__all__ = ["SBLClassifier", "SBLRegressor"]

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
            check_int("n_atoms", self.n_atoms, 1)
        if self.rule not in ("abs", "residual"):
            raise ValueError(f"rule must be 'abs' or 'residual'; got {self.rule!r}")
        check_int("max_reweight", self.max_reweight, 1)
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
