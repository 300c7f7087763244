"""The Feature Generating Machine: cutting-plane feature selection for ultrahigh
dimensions.
"""


import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.feature_selection import SelectorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from cvfs.estimators._common import BinaryScores, binary_classes, check_int, check_real

__all__ = ["FGMClassifier"]

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


class FGMClassifier(BinaryScores, ClassifierMixin, SelectorMixin, BaseEstimator):
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
    loss : str or MarginLoss, default="squared_hinge"
        A margin loss of :mod:`cvfs.core.losses` by name ("squared_hinge", "logistic", ...) or
        object (a user's :class:`~cvfs.core.losses.MarginLoss` included); ``predict_proba``
        exists for probabilistic losses (the logistic).
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
        from cvfs.core.fgm import fgm_fit

        check_int("B", self.B, 1)
        check_real("C", self.C, 0.0, strict=True)
        check_int("max_iter", self.max_iter, 1)
        check_real("tol", self.tol, 0.0)
        loss = self._loss_object()
        if self.mapping not in (None, "poly2", "additive"):
            raise ValueError(f"mapping must be one of [None, 'poly2', 'additive'], "
                             f"got {self.mapping!r}")
        if self.mapping == "additive" and self.sample_steps not in (1, 2, 3):
            raise ValueError(f"sample_steps must be 1, 2 or 3, got {self.sample_steps!r}")
        if self.mapping == "poly2" and self.groups is not None:
            raise ValueError("groups must be None with mapping='poly2' (products have no group)")
        X, y = validate_data(self, X, y, accept_sparse=("csr", "csc"), dtype=np.float64,
                             ensure_all_finite=True)
        self.classes_ = binary_classes(y)
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
                      loss=loss, max_iter=self.max_iter, tol=float(self.tol),
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
