"""Feature spaces for FGM: implicit second-order products, additive-kernel maps, overlapping groups.

:class:`Poly2Space` is the degree-2 polynomial expansion of X (the linear terms ``x_j`` and all
products ``x_j x_k``, ``j <= k``) without forming it: the worst-case analysis scores product
``(j, k)`` by ``|sum_i r_i x_ij x_ik|``, an entry of ``X' diag(r) X``, computed one block of rows
at a time while only the B best entries are kept (section 5.3 of the paper); the chosen products
are materialised only for the subproblem cache. A feature is identified by the integer code
``j * (m + 1) + k + 1`` (``k = -1`` for the linear term ``x_j``).

:func:`additive_map` expands every input feature by an explicit additive-kernel map (the additive
chi-squared map of scikit-learn's :class:`~sklearn.kernel_approximation.AdditiveChi2Sampler`)
and groups the components of each input feature, so FGM's group selection picks input features
of the additive kernel (section 4.4).

:class:`OverlapSpace` handles overlapping (or tree-structured) groups by the duplicated-column
construction of section 2.4 (the latent group lasso): every membership is a virtual column, a copy
of its input column, so the groups become disjoint; the copies are never formed for the search
(the group scores come from one ``X' r``) and only the chosen ones enter the cache.

References
----------
Tan, Tsang, Wang, "Towards Large-scale and Ultrahigh Dimensional Feature Selection via Feature
Generation", sections 2.4, 4.4, 5.3 and 6.4. Vedaldi, Zisserman, "Efficient additive kernels via
explicit feature maps", CVPR 2010.
"""

import numpy as np
import scipy.sparse as sp

from cvfs.core.fgm import ColumnSpace, top_units

__all__ = ["OverlapSpace", "Poly2Space", "additive_map", "poly2_top"]

# Cells of one block of X' diag(r) X (32 MB of float64): bounds the search's working memory.
BLOCK_CELLS = 1 << 22


def _keep_top(idx, val, B):
    """The B entries of largest |val| (all of them when there are at most B)."""
    if val.size <= B:
        return idx, val
    top = np.argpartition(-np.abs(val), B - 1)[:B]
    return idx[top], val[top]


def poly2_top(X, r, B, block_cells=BLOCK_CELLS):
    """The B second-order features with the largest ``|sum_i r_i phi_i|``, searched blockwise.

    The candidates are the m linear terms (``X' r``) and the ``m (m + 1) / 2`` products
    ``x_j x_k``, ``j <= k`` (the upper triangle of ``X' diag(r) X``). Rows of that matrix are
    formed a block at a time (at most ``block_cells`` entries), so neither the m x m matrix nor
    the n x m^2 features are materialised.

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n_samples, m)
    r : ndarray of shape (n_samples,)
        ``alpha * y``.
    B : int
    block_cells : int, optional

    Returns
    -------
    pairs : ndarray of int of shape (B', 2)
        ``(j, k)`` of the chosen features, ``k = -1`` for a linear term, sorted by code;
        ``B' = min(B, number of candidates)``.
    omega : ndarray of shape (B',)
        Their correlations ``sum_i r_i phi_i``.
    """
    n, m = X.shape
    lin = np.asarray(X.T @ r).ravel()
    idx, val = _keep_top(np.arange(m, dtype=np.int64) * (m + 1), lin, B)
    Xr = X.multiply(r[:, None]).tocsc() if sp.issparse(X) else X * r[:, None]
    Xc = X.tocsc() if sp.issparse(X) else X
    j0 = 0
    while j0 < m:
        width = m - j0  # columns k >= j0
        j1 = min(m, j0 + max(1, block_cells // width))
        G = Xr[:, j0:j1].T @ Xc[:, j0:]
        G = G.toarray() if sp.issparse(G) else np.asarray(G)
        G[np.tril_indices(j1 - j0, -1, width)] = 0.0  # k < j: the lower triangle repeats
        flat = G.ravel()
        cand = np.argpartition(-np.abs(flat), B - 1)[:B] if flat.size > B else np.arange(flat.size)
        cand = cand[flat[cand] != 0]
        j = j0 + cand // width
        k = j0 + cand % width
        idx, val = _keep_top(np.concatenate([idx, j * (m + 1) + k + 1]),
                             np.concatenate([val, flat[cand]]), B)
        j0 = j1
    order = np.argsort(idx)
    idx, val = idx[order], val[order]
    return np.column_stack([idx // (m + 1), idx % (m + 1) - 1]), val


class Poly2Space:
    """The implicit second-order polynomial expansion of X as FGM's feature space.

    Features are the linear terms ``x_j`` and the products ``x_j x_k`` (``j <= k``), with
    integer codes ``j * (m + 1) + k + 1`` (``k = -1``: linear). Only chosen features are formed.

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n_samples, m)
    """

    dense_coef = False

    def __init__(self, X):
        self.X = X
        self.m = X.shape[1]
        self.n_features = self.m + self.m * (self.m + 1) // 2

    def decode(self, codes):
        """``(j, k)`` pairs of feature codes, ndarray of int of shape (len(codes), 2)."""
        codes = np.asarray(codes, dtype=np.int64)
        return np.column_stack([codes // (self.m + 1), codes % (self.m + 1) - 1])

    def encode(self, pairs):
        """Feature codes of ``(j, k)`` pairs (``k = -1``: linear), ndarray of int."""
        pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        return pairs[:, 0] * (self.m + 1) + pairs[:, 1] + 1

    def worst_case(self, r, B):
        """Algorithm 2 over the expansion: the codes of the B best features and their summed
        scores ``sum omega^2``."""
        pairs, omega = poly2_top(self.X, r, B)
        return self.encode(pairs), float(omega @ omega)

    def columns(self, codes):
        """Materialised features ``codes``, ndarray of shape (n_samples, len(codes))."""
        pairs = self.decode(codes)
        cols = np.unique(pairs[pairs >= 0])
        if sp.issparse(self.X):
            sub = np.asarray(self.X[:, cols].toarray(), dtype=np.float64)
        else:
            sub = np.asarray(self.X[:, cols], dtype=np.float64)
        pos = np.searchsorted(cols, np.maximum(pairs, 0))
        out = sub[:, pos[:, 0]].copy()
        quad = pairs[:, 1] >= 0
        out[:, quad] *= sub[:, pos[quad, 1]]
        return out


def additive_map(sample_steps=2):
    """The explicit additive chi-squared feature map with its component layout.

    Parameters
    ----------
    sample_steps : int, default=2
        Sampling points of the kernel's spectrum; every input feature becomes
        ``2 * sample_steps - 1`` components.

    Returns
    -------
    sampler : AdditiveChi2Sampler
        Stateless transformer (X must be non-negative).
    n_components : int
        Components per input feature; column ``c`` of the map belongs to input feature
        ``c % m`` (scikit-learn stacks the components component by component).
    """
    from sklearn.kernel_approximation import AdditiveChi2Sampler

    return AdditiveChi2Sampler(sample_steps=sample_steps), 2 * sample_steps - 1


class OverlapSpace:
    """Overlapping groups as disjoint groups of virtual (duplicated) columns.

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n_samples, n_features)
    members : ndarray of int of shape (n_memberships,)
        Input column of each virtual column (group by group).
    group_of : ndarray of int of shape (n_memberships,)
        Group of each virtual column, in [0, n_groups).
    """

    dense_coef = True

    def __init__(self, X, members, group_of):
        self.X = X
        self.members = np.asarray(members, dtype=np.int64)
        self.group_of = np.asarray(group_of, dtype=np.int64)
        self.n_features = self.members.size

    def worst_case(self, r, B):
        """Algorithm 2 over the groups: indices of the virtual columns of the B groups with the
        largest ``||X_G' r||^2`` (sorted) and the sum of their scores."""
        return top_units(np.asarray(self.X.T @ r).ravel()[self.members], B, self.group_of)

    def columns(self, idx):
        """Dense float64 copies of the input columns behind virtual columns ``idx``."""
        return ColumnSpace(self.X).columns(self.members[idx])
