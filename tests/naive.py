"""Slow, obviously-correct NumPy twins of the numba kernels (tests compare against them)."""

import numpy as np
from scipy.special import expit

from cvfs.core.losses import get_loss
from cvfs.core.responses import get_response
from cvfs.motion.tracking import PatchTemplates

# ---- losses (cvfs.core.losses) ----


def loss_value_grad(loss, z, y):
    """Per-sample value and d / dz of a built-in row loss (a :class:`cvfs.core.losses.Loss`)."""
    z = np.asarray(z, dtype=float)
    if loss.name == "squared":
        return 0.5 * (z - y) ** 2, z - y
    u = y * z
    if loss.name == "logistic":
        return np.logaddexp(0.0, -u), -y * expit(-u)
    if loss.name == "lorenz":
        t = np.minimum(u - 1.0, 0.0)
        return np.log1p(t * t), y * 2.0 * t / (1.0 + t * t)
    if loss.name == "squared_hinge":
        xi = np.maximum(0.0, 1.0 - u)
        return 0.5 * xi * xi, -y * xi
    h = loss.h  # Huber SVM
    val = np.where(u > 1 + h, 0.0, np.where(u < 1 - h, 1.0 - u, (1 + h - u) ** 2 / (4 * h)))
    d = np.where(u > 1 + h, 0.0, np.where(u < 1 - h, -1.0, -(1 + h - u) / (2 * h)))
    return val, y * d


def rank_value_grad(z, pairs):
    """Weighted mean pair loss of the ranking loss and its gradient d / dz."""
    i, j, r = pairs[:3]
    w = np.full(len(i), 1.0) if len(pairs) < 4 else np.asarray(pairs[3], float)
    w = w / w.sum()
    z = np.asarray(z, dtype=float)
    d = z[i] - z[j]
    s = (expit(d) - r) * w
    g = np.zeros_like(z)
    np.add.at(g, i, s)
    np.add.at(g, j, -s)
    return np.sum(w * (np.logaddexp(0.0, d) - r * d)), g


# ---- FSA ----


def centred_basis(X, fp, bins):
    """The dense centred basis U_c (N, m * G) that the kernels never build."""
    U = get_response(None if bins == 0 else bins).basis(X, fp)
    return U - fp[:, 2:].reshape(1, -1)


def fsa_gradient(X, y, fp, bins, beta, intercept, loss, pairs=None, sample_weight=None):
    """Mean loss and its gradient on the centred basis (m, G) and the intercept; with
    ``sample_weight`` w the weighted mean sum_i w_i loss_i / sum_i w_i."""
    U = centred_basis(X, fp, bins)
    z = U @ beta.ravel() + intercept
    loss = get_loss(loss)
    if loss.name == "rank":
        val, d = rank_value_grad(z, pairs)
        return val, (U.T @ d).reshape(beta.shape), 0.0
    val, d = loss_value_grad(loss, z, y)
    w = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, float)
    W = w.sum()
    return ((w @ val) / W, (U.T @ (w * d) / W).reshape(beta.shape), (w @ d) / W)


def curvature_operator(X, fp, bins, pairs=None, sample_weight=None):
    """U_c^T U_c / N (U_c^T diag(w) U_c / sum w with ``sample_weight`` w), or
    U_c^T D^T D U_c / P for ranking pairs."""
    U = centred_basis(X, fp, bins)
    if pairs is None:
        if sample_weight is None:
            return U.T @ U / U.shape[0]
        w = np.asarray(sample_weight, float)
        return U.T @ (U * w[:, None]) / w.sum()
    i, j = pairs[:2]
    w = np.full(len(i), 1.0) if len(pairs) < 4 else np.asarray(pairs[3], float)
    D = U[i] - U[j]
    return D.T @ (D * (w / w.sum())[:, None])


def fsa_reference(X, y, k, schedule, fp, bins, loss, lr, shrink, intercept=0.0,
                  fit_intercept=True, curv=None):
    """Algorithm 1 with a fixed step, written plainly on the dense centred basis."""
    G = 1 if bins == 0 else bins + 1
    M = X.shape[1]
    kept = np.arange(M)
    beta = np.zeros((M, G))
    for n_keep in schedule:
        _, g, gi = fsa_gradient(X[:, kept], y, fp[kept], bins, beta, intercept, loss)
        beta = beta - lr * (g + 2 * shrink * beta)
        if fit_intercept:
            intercept -= min(lr, 1.0 / curv) * gi
        if n_keep < kept.size:
            norms = np.linalg.norm(beta, axis=1)
            order = np.lexsort((np.arange(kept.size), -norms))[:n_keep]
            keep = np.sort(order)
            kept, beta = kept[keep], beta[keep]
    return kept, beta, intercept


# ---- FSA on sparse input (cvfs.core._sparse_kernels) ----


def sparse_column_stats(X, d):
    """shift (row 0), s1, s2 and raw gradient sums sum_i d_i x_ij of a scipy.sparse X."""
    A = X.toarray().astype(np.float64)
    shift = np.where(np.isfinite(A[0]), A[0], 0.0)
    E = A - shift
    return shift, E.sum(axis=0), (E * E).sum(axis=0), d @ A


def sparse_scores(X, cols, a, b, z, t):
    """z + X[:, cols] a and t + X[:, cols] b."""
    A = X.toarray()[:, cols].astype(np.float64)
    return z + A @ a, t + A @ b


def sparse_dots(X, cols, d, t):
    """X[:, cols]^T d and X[:, cols]^T t, each of shape (m, 1)."""
    A = X.toarray()[:, cols].astype(np.float64)
    return (A.T @ d)[:, None], (A.T @ t)[:, None]


def sparse_pl_basis(X, fp, bins):
    """Uncentred piecewise-linear basis of every column of a scipy.sparse X, (N, M, bins + 1)."""
    U = get_response(bins).basis(X.toarray(), fp)
    return U.reshape(X.shape[0], X.shape[1], bins + 1)


# ---- SBL ----


def gram_cd_epoch(G, b, pen, t, q, positive):
    """Twin of ``cvfs.core._lasso_kernels.gram_cd_epoch``: returns new (t, q)."""
    t = t.copy()
    for j in range(t.size):
        if G[j, j] <= 0:
            continue
        z = t[j] + (b[j] - G[j] @ t) / G[j, j]
        thr = pen[j] / G[j, j]
        t[j] = max(z - thr, 0.0) if positive else np.sign(z) * max(abs(z) - thr, 0.0)
    return t, G @ t


def gram_gap(b, pen, t, q, yy, positive):
    """Twin of ``gram_gap``: primal value and gap of the working-set problem."""
    corr = b - q
    c = corr if positive else np.abs(corr)
    scale = max(1.0, np.max(c / pen))
    rr = yy - 2 * b @ t + t @ q
    primal = 0.5 * rr + pen @ np.abs(t)
    # dual at eta = r / scale: 1/2 ||y||^2 - 1/2 ||y - eta||^2 with y^T r = yy - b^T t
    dual = 0.5 * yy - 0.5 * (yy - 2 * (yy - b @ t) / scale + rr / scale**2)
    return primal, primal - dual


def weighted_lasso_objective(Phi, y, pen, theta):
    """1/2 ||y - Phi theta||^2 + sum pen |theta|."""
    r = y - Phi @ theta
    return 0.5 * r @ r + pen @ np.abs(theta)


def gram_cd_solve(G, b, pen, t, yy, tol, max_epochs, positive):
    """Twin of ``gram_cd_solve`` without extrapolation: plain epochs until the gap is <= tol."""
    gap, epoch = np.inf, 0
    while epoch < max_epochs and gap > tol:
        epoch += 1
        t, q = gram_cd_epoch(G, b, pen, t, G @ t, positive)
        _, gap = gram_gap(b, pen, t, q, yy, positive)
    return t, epoch, gap


# ---- vision ----


def naive_hog_cells(channel):
    """Cell histograms of a 2-D channel at every top-left pixel, skimage's conventions.

    Returns an array of shape (H - 5, W - 5, 8): direct loops over each 6x6 cell.
    """
    img = channel.astype(np.float64)
    g_row = np.zeros_like(img)
    g_col = np.zeros_like(img)
    g_row[1:-1, :] = img[2:, :] - img[:-2, :]
    g_col[:, 1:-1] = img[:, 2:] - img[:, :-2]
    mag = np.hypot(g_col, g_row)
    orient = np.rad2deg(np.arctan2(g_row, g_col)) % 180
    h, w = img.shape
    out = np.zeros((h - 5, w - 5, 8))
    for r in range(h - 5):
        for c in range(w - 5):
            o = orient[r:r + 6, c:c + 6]
            m = mag[r:r + 6, c:c + 6]
            for b in range(8):
                sel = (o >= 22.5 * b) & (o < 22.5 * (b + 1))
                out[r, c, b] = m[sel].sum() / 36.0
    return out


def naive_haar(window, feature):
    """Value of one Haar feature (type, x, y, w, h) on a 2-D window, from explicit means."""
    t, x, y, w, h = (int(feature[k]) for k in ("type", "x", "y", "w", "h"))
    r = window[y:y + h, x:x + w].astype(np.float64)
    if t == 0:  # edge_x: left - right
        return r[:, : w // 2].mean() - r[:, w // 2:].mean()
    if t == 1:  # edge_y: top - bottom
        return r[: h // 2].mean() - r[h // 2:].mean()
    if t == 2:  # line_x: outer thirds - middle third
        a = w // 3
        return np.concatenate([r[:, :a], r[:, 2 * a:]], axis=1).mean() - r[:, a:2 * a].mean()
    if t == 3:  # line_y
        a = h // 3
        return np.concatenate([r[:a], r[2 * a:]], axis=0).mean() - r[a:2 * a].mean()
    # quad: top-left and bottom-right minus top-right and bottom-left
    hh, hw = h // 2, w // 2
    pos = np.concatenate([r[:hh, :hw].ravel(), r[hh:, hw:].ravel()])
    neg = np.concatenate([r[:hh, hw:].ravel(), r[hh:, :hw].ravel()])
    return pos.mean() - neg.mean()


# ---- motion ----


def cut_fractions(labels, neighbors, ks):
    """Twin of :func:`cvfs.motion.features.cut_fractions`."""
    out = np.zeros((labels.shape[0], len(ks)))
    for c, lab in enumerate(labels):
        for t, k in enumerate(ks):
            cut = lab[neighbors[:, :k]] != lab[:, None]
            out[c, t] = cut.mean()
    return out


def stump_gains(bins, v, n_bins):
    """Twin of :func:`cvfs.motion.ranking.stump_gains`."""
    out = np.zeros((bins.shape[1], n_bins))
    for m in range(bins.shape[1]):
        for t in range(n_bins):
            out[m, t] = v[bins[:, m] > t].sum()
    return out


# ---- keypoints ----


def keypoints_additive_scores(X, lo, scale, table, step, intercept):
    """Additive piecewise model scores, one row and one feature at a time."""
    X = np.asarray(X, dtype=np.float64)
    B = table.shape[1] if step else table.shape[1] - 1
    out = np.full(X.shape[0], float(intercept))
    for i in range(X.shape[0]):
        for j in range(X.shape[1]):
            s = min(max((X[i, j] - lo[j]) * scale[j], 0.0), B)
            b = min(int(np.floor(s)), B - 1)
            if step:
                out[i] += table[j, b]
            else:
                a = s - b
                out[i] += (1 - a) * table[j, b] + a * table[j, b + 1]
    return out


def keypoints_lattice_neighbours(seed, row0, stride, n_rows, n_cols):
    """Candidates (windows within ``stride - 1`` of a seed of the lattice) and the row-major
    top-left windows of the candidates and their 8 neighbours, by shifting masks."""
    candidate = np.zeros((n_rows, n_cols), dtype=bool)
    for i, j in np.argwhere(seed):
        r, c = row0 + i * stride, j * stride
        candidate[max(r - stride + 1, 0):r + stride, max(c - stride + 1, 0):c + stride] = True
    scored = np.zeros_like(candidate)
    for r, c in np.argwhere(candidate):
        scored[max(r - 1, 0):r + 2, max(c - 1, 0):c + 2] = True
    return candidate, np.argwhere(scored).astype(np.int64)


def keypoints_logitboost(X, y01, n_rounds, bins):
    """LogitBoost with every feature tried at each round (sample_fraction=1): the chosen
    features and the final scores F."""
    X = np.asarray(X, dtype=np.float64)
    n, m = X.shape
    lo, hi = X.min(axis=0), X.max(axis=0)
    scale = np.where(hi > lo, bins / np.where(hi > lo, hi - lo, 1.0), 0.0)
    codes = np.clip(np.floor(np.maximum((X - lo) * scale, 0.0)), 0, bins - 1).astype(int)
    F = np.zeros(n)
    chosen = []
    for _ in range(n_rounds):
        p = 1 / (1 + np.exp(-2 * F))
        w = np.maximum(p * (1 - p), 1e-12)
        z = np.clip((y01 - p) / w, -4, 4)
        best = (-1.0, None, None)
        for j in range(m):
            sw = np.bincount(codes[:, j], weights=w, minlength=bins)
            swz = np.bincount(codes[:, j], weights=w * z, minlength=bins)
            nz = sw > 0
            gain = np.sum(swz[nz] ** 2 / sw[nz])
            if gain > best[0]:
                vals = np.where(nz, swz / np.where(nz, sw, 1), 0.0)
                best = (gain, j, vals)
        chosen.append(best[1])
        F += 0.5 * best[2][codes[:, best[1]]]
    return np.array(chosen), F


# ---- keypoint context ----


def pair_rescore(left, right, spacing, sigma, weight, tau, cap, gate):
    """Double loop over (detection, partner): the best partner value inside the gate and the
    capped penalty of :func:`cvfs.keypoints.context.pair_rescore`."""
    out = []
    for a, b, d in ((left, right, 1.0), (right, left, -1.0)):
        s = np.empty(len(a))
        for i in range(len(a)):
            unit = spacing / a[i, 3]
            ex, ey = a[i, 0] + d * unit, a[i, 1]
            best = -np.inf
            for j in range(len(b)):
                r = np.hypot(b[j, 0] - ex, b[j, 1] - ey) / (sigma * unit)
                if r <= gate:
                    best = max(best, b[j, 2] - 0.5 * r * r)
            s[i] = a[i, 2] - weight * min(cap, max(0.0, tau - best))
        out.append(s)
    return out


def ipush_pairs(P, N, p_bounds=None, n_bounds=None):
    """The pair matrix A (rows p_i - q_j within each query, row-major per query block)."""
    if p_bounds is None:
        p_bounds, n_bounds = [0, len(P)], [0, len(N)]
    blocks = [(P[p0:p1][:, None, :] - N[n0:n1][None, :, :]).reshape(-1, P.shape[1])
              for p0, p1, n0, n1 in zip(p_bounds[:-1], p_bounds[1:], n_bounds[:-1], n_bounds[1:],
                                        strict=True)]
    return np.vstack(blocks)


def ipush_wstep(P, N, b, w, rho, lam, groups, n_iter, p_bounds=None, n_bounds=None):
    """Twin of ``cvfs.core._ipush_kernels.fista_wstep`` (A formed explicitly, fixed iterations)."""
    A = ipush_pairs(P, N, p_bounds, n_bounds)
    step = 1.0 / (rho * np.linalg.norm(A, 2) ** 2)
    w_old, y, t = w.copy(), w.copy(), 1.0
    for _ in range(n_iter):
        z = y - step * rho * (A.T @ (A @ y) - b)
        w_new = np.zeros_like(z)
        for g in groups:
            nrm = np.linalg.norm(z[g])
            if nrm > step * lam:
                w_new[g] = (1.0 - step * lam / nrm) * z[g]
        t_next = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        y = w_new + (t - 1.0) / t_next * (w_new - w_old)
        w_old, t = w_new, t_next
    return w_old


def ipush_blocks(v, p_bounds, n_bounds):
    """The m_q x n_q blocks of a flat pair vector."""
    out, k = [], 0
    for q in range(len(p_bounds) - 1):
        m, n = p_bounds[q + 1] - p_bounds[q], n_bounds[q + 1] - n_bounds[q]
        out.append(v[k:k + m * n].reshape(m, n))
        k += m * n
    return out


def ipush_pair_margins(sp, sn, p_bounds, n_bounds):
    """Twin of ``pair_margins``: sp[i] - sn[j] over each query's block, flattened."""
    return np.concatenate([(sp[p0:p1][:, None] - sn[n0:n1][None, :]).ravel()
                           for p0, p1, n0, n1 in zip(p_bounds[:-1], p_bounds[1:], n_bounds[:-1],
                                                     n_bounds[1:], strict=True)])


def ipush_pair_sums(c, p_bounds, n_bounds):
    """Twin of ``pair_sums``: row sums (per positive) and column sums (per negative)."""
    blocks = ipush_blocks(c, p_bounds, n_bounds)
    return (np.concatenate([B.sum(axis=1) for B in blocks]),
            np.concatenate([B.sum(axis=0) for B in blocks]))


def ipush_blocks_loss(a, p_bounds, n_bounds):
    """Twin of ``blocks_loss``: max_j mean_i [1 - a_ij]_+ of every block."""
    return np.array([np.max(np.mean(np.maximum(0.0, 1.0 - B), axis=0))
                     for B in ipush_blocks(a, p_bounds, n_bounds)])


def ipush_project(B, radius):
    """Twin of ``project_l1inf_kernel``: theta bisected until its active sets are identified,
    then solved exactly on them (Quattoni et al. 2009)."""
    Bp = np.maximum(B, 0.0)
    if Bp.max(axis=0).sum() <= radius:
        return Bp
    m = Bp.shape[0]
    b = -np.sort(-Bp, axis=0)
    S = np.cumsum(b, axis=0)
    k = np.arange(1, m + 1, dtype=np.float64)[:, None]
    c = S - k * b
    total = S[-1]
    cols = np.arange(S.shape[1])

    def caps(theta):
        kk = np.sum(c <= theta, axis=0)
        mu = np.maximum((S[kk - 1, cols] - theta) / kk, 0.0)
        mu[total <= theta] = 0.0
        return mu, kk

    lo, hi = 0.0, float(total.max())
    mu = None
    for _ in range(200):
        theta = 0.5 * (lo + hi)
        mu, kk = caps(theta)
        active = mu > 0
        if np.any(active):
            s_k = S[kk - 1, cols]
            th = (np.sum(s_k[active] / kk[active]) - radius) / np.sum(1.0 / kk[active])
            c_next = np.where(kk < m, c[np.minimum(kk, m - 1), cols], np.inf)
            if (np.all(c[kk - 1, cols][active] <= th + 1e-12)
                    and np.all(th <= c_next[active] + 1e-12)
                    and np.all(total[~active] <= th + 1e-12)
                    and np.all(s_k[active] > th - 1e-12) and th >= 0):
                mu = np.zeros_like(mu)
                mu[active] = np.maximum((s_k[active] - th) / kk[active], 0.0)
                break
        lo, hi = (theta, hi) if mu.sum() > radius else (lo, theta)
    return np.minimum(Bp, mu[None, :])


def ipush_prox_blocks(v, t, p_bounds, n_bounds):
    """Twin of ``prox_blocks``: per block, v + t_q P_K((1 - v) / t_q), K of radius 1 / m_q."""
    return np.concatenate([(B + t[q] * ipush_project((1.0 - B) / t[q], 1.0 / B.shape[0])).ravel()
                           for q, B in enumerate(ipush_blocks(v, p_bounds, n_bounds))])


# ---- appearance check of the point tracker (cvfs.motion._patch_align) ----


def patch_residuals(cur, mx, my, T, mu, sig, seen, shape):
    """Twin of ``_patch_align.residuals`` (templates already gathered to the rows of ``cur``)."""
    from cvfs.motion.tracking import _inside

    m, s = cur.mean(axis=1, keepdims=True), cur.std(axis=1, keepdims=True)
    err = (cur - m) * (sig / np.maximum(s, 1e-6)) + (mu - T)
    err[~(seen & _inside(shape, mx, my))] = 0.0
    return err


def patch_step_matrices(dp, A, d, lin, shift, tol):
    """Twin of ``_patch_align.step_matrices`` (``A``, ``d`` already the active rows): the
    clipped step, the step's and the current warp as 3x3 matrices, and which steps reach
    ``tol``."""
    dp = dp.copy()
    dp[:, :4] = np.clip(dp[:, :4], -lin, lin)
    dp[:, 4:] = np.clip(dp[:, 4:], -shift, shift)
    Wd = np.zeros((len(dp), 3, 3))
    Wd[:, :2, :2] = np.eye(2) + dp[:, :4].reshape(-1, 2, 2)
    Wd[:, :2, 2] = dp[:, 4:]
    Wd[:, 2, 2] = 1.0
    W = np.zeros_like(Wd)
    W[:, :2, :2], W[:, :2, 2], W[:, 2, 2] = A, d, 1.0
    return dp, Wd, W, np.abs(dp).max(axis=1) >= tol


class PatchTemplatesNumPy(PatchTemplates):
    """Twin of ``cvfs.motion.tracking.PatchTemplates`` in NumPy only: the templates in arrays
    concatenated on every ``extend``, the alignment in array expressions."""

    def __len__(self):
        return len(self._T)

    def extend(self, image, points):
        from cvfs.motion.tracking import _templates

        T, seen, J = _templates(image, points, self.size)
        n = len(T)
        eye = np.broadcast_to(np.eye(2), (n, 2, 2))
        self._T = np.concatenate([self._T, T])
        self._mu = np.concatenate([self._mu, T.mean(axis=1, keepdims=True)])
        self._sig = np.concatenate([self._sig, T.std(axis=1, keepdims=True)])
        self._seen = np.concatenate([self._seen, seen])
        self._J = np.concatenate([self._J, J.astype(np.float32)])
        self._A = np.concatenate([self._A, eye])
        self._d = np.concatenate([self._d, np.zeros((n, 2))])

    def align(self, image, points, index=None):
        from cvfs.motion.tracking import (
            _ALIGN_ITERS,
            _ALIGN_STEP,
            _ALIGN_TOL,
            _bound_warps,
            _inside,
            _ncc,
            _sample,
            _warp_maps,
        )

        image = np.asarray(image, np.float32)
        c = np.asarray(points, np.float64).reshape(-1, 2)
        idx = np.arange(len(self)) if index is None else np.asarray(index, np.int64)
        A, d = self._A[idx].copy(), self._d[idx].copy()
        T, mu, sig = self._T[idx], self._mu[idx], self._sig[idx]
        act = np.arange(len(idx))
        for _ in range(_ALIGN_ITERS):
            if act.size == 0:
                break
            ids = idx[act]
            mx, my = _warp_maps(c[act], A[act], d[act], self._u, self._v)
            err = patch_residuals(_sample(image, mx, my), mx, my, T[act], mu[act], sig[act],
                                  self._seen[ids], image.shape)
            dp = np.matmul(err[:, None, :], self._J[ids])[:, 0].astype(np.float64)
            dp, Wd, W, more = patch_step_matrices(dp, A[act], d[act], *_ALIGN_STEP, _ALIGN_TOL)
            W = W @ np.linalg.inv(Wd)
            A[act], d[act] = W[:, :2, :2], W[:, :2, 2]
            act = act[more]
        A, d = _bound_warps(A, d)
        self._A[idx], self._d[idx] = A, d
        mx, my = _warp_maps(c, A, d, self._u, self._v)
        return _ncc(T, _sample(image, mx, my), self._seen[idx] & _inside(image.shape, mx, my))


def poly2_top(X, r, B):
    """Twin of cvfs.core.fgm_spaces.poly2_top: materialise all n x (m + m(m+1)/2) second-order
    features, correlate with r, keep the B largest |omega|; rows (j, k), k = -1 for x_j."""
    m = X.shape[1]
    pairs = [(j, -1) for j in range(m)] + [(j, k) for j in range(m) for k in range(j, m)]
    Phi = np.column_stack([X[:, j] if k < 0 else X[:, j] * X[:, k] for j, k in pairs])
    omega = Phi.T @ r
    top = np.argsort(-np.abs(omega), kind="stable")[:B]
    code = np.array([j * (m + 1) + k + 1 for j, k in pairs])[top]
    order = np.argsort(code)
    return np.array(pairs, dtype=np.int64)[top][order], omega[top][order]


def gram_rows_dot(G, rows, w):
    """Twin of cvfs.core._lasso_kernels.gram_rows_dot: G[rows]^T w."""
    return G[rows].T @ w
