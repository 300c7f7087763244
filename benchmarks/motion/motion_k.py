"""Choosing the number of motions K: Hopkins155 by cross-validation, and synthetic scenes.

Usage::

    python benchmarks/motion/motion_k.py [--data DIR] [--cache DIR] [--skip-pool] [--seeds 3]
        [--fold-seeds 0 1 2 3 4] [--inner-repeats 5] [--extra-forms] [--min-fraction]
        [--smooth W]

``--seeds 0`` skips the synthetic scenes. ``--extra-forms`` adds four rules to the plain and the
nested CV (writing ``benchmarks/results/motion/motion_k_extra.json``): ``log g_K + mu log q_K + nu
log x_K + lam pen`` with x_K the mean epipolar residual (:func:`epipolar_residual`, a fundamental
matrix per cluster: the perspective rigid-motion model) of the lowest-cost labelling, the lowest
such residual over all labellings of K, or the fraction of trajectories at the robust cost's cap
(:func:`capped_fraction`); and a conditional logit over K on the robust-cost quantities
(``log g_K`` on the whole grid, ``log q_K``, the penalty, the epipolar residual of the
lowest-cost labelling and the capped fraction).
``--min-fraction`` adds (writing ``benchmarks/results/motion/motion_k_minfrac.json``) the default
rule over the labellings whose smallest cluster holds at least phi P trajectories
(:func:`cvfs.motion.kselect.large_clusters`), phi in ``PHI_GRID`` fitted with the robust cost's
cell, ``lam`` and ``mu``: a few tracks carried off the background by an occluder form a small
cluster that the robust cost takes for a motion.

1. Hopkins155 (155 sequences, K = 2 or 3): the labellings
   :func:`cvfs.motion.kselect.k_residuals` fits (:func:`~cvfs.motion.kselect.k_labellings`,
   best of 20 seeded K-subspaces restarts and, for K = 2, 3, the spectral candidates; K = 2..5)
   and the spectra of the candidates' affinity, cached per sequence in
   ``out/motion_k_labellings/``. Candidate K rules (:func:`k_forms`: ``log r_K + lam K log(P)/P``
   with one more term, the affinity's eigengap, a conditional logit over K, the robust
   GRIC-form cost ``g_K`` of :func:`cvfs.motion.kselect.capped_cost` with the noise level of
   :func:`~cvfs.motion.kselect.noise_variance`, and the default ``log g_K + mu log q_K + lam
   K log(P)/P`` with its constants fitted by a conditional logit over K,
   :func:`logit_variants`) are scored by
   10-fold cross-validation by video (the folds of Table VII, fold seed 0; each rule's
   parameters fitted on the nine training folds at the centre of the best ``--smooth``-wide
   neighbourhood of training accuracy on their grid), and by a nested cross-validation: in each
   outer fold the rule is picked by a 9-fold CV on the training folds, refitted on them and
   scored on the held-out fold.
2. Synthetic rigid motions (:func:`cvfs.motion.synthetic.make_rigid_motions`, 40 points per
   motion, 20 frames, noise 0.002), K = 2..6, ``--seeds`` problems each: error with K given
   (:func:`cvfs.motion.segment`), the oracle (best candidate) of the spectral pool alone
   and with the seeded K-subspaces candidates, the error of the lowest-residual K-subspaces
   candidate, and the rate at which K is chosen correctly.
3. Hopkins155 three-motion sequences (unless ``--skip-pool``): the same oracle / lowest-residual
   errors for K = 3 (the ranked pool there has no K-subspaces candidates).

K chosen on the five shared videos: ``benchmarks/motion/motion_videos.py``.

Writes ``benchmarks/results/motion/motion_k.json``.
"""

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy.linalg import eigh
from threadpoolctl import threadpool_limits
from tqdm import tqdm

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))

from benchmarks._bench import format_table, limit_threads, result_path, write_json
from cvfs.datasets.hopkins155 import load_hopkins155
from cvfs.motion import normalise_points, segment
from cvfs.motion.candidates import (
    generate_candidates,
    ksubspace_candidates,
    velocity_matrix,
    whitened_basis,
)
from cvfs.motion.evaluate import misclassification, video_folds
from cvfs.motion.kselect import (
    CAPPED_CAP,
    CAPPED_DIM_COST,
    CAPPED_LAMBDA,
    CAPPED_MU,
    DEFAULT_LAMBDA,
    DEFAULT_MU,
    FIT_SMOOTH,
    _neighbourhood_mean,
    choose_k_capped,
    choose_k_penalised,
    cluster_capped_cost,
    k_capped_costs,
    k_labellings,
    k_residuals,
    noise_variance,
    subspace_residual,
)
from cvfs.motion.synthetic import make_rigid_motions

K_RANGE = range(2, 6)
# the rule of segment with K not given (cvfs.motion.kselect.choose_k_capped): log g_K + mu log q_K
# + lam pen with (cap, dim_cost, lam, mu) fitted by a conditional logit over K; the same rule
# fitted by the grid search of the training accuracy; and the residual rule
DEFAULT_FORM = "g + mu q + lam pen, logit fit"
GRID_FORM = "g + mu q + lam pen"
PLANAR_FORM = "r + mu q + lam pen"
# L2 weights of the default rule's logit fit (chosen with the cell by training accuracy)
LOGIT_C = (0.01, 0.1, 1.0)
MINFRAC_FORM = "g + mu q + lam pen, smallest cluster >= phi P"


def _fmt(rows):
    return [[f"{c:.2f}" if isinstance(c, float) else str(c) for c in r] for r in rows]


AFFINITY_DIMS = (4, 6, 8, 10, 12)
AFFINITY_ALPHAS = (1.0, 2.0, 4.0, 8.0)


def affinity_eigenvalues(points, n_eig=10):
    """Top eigenvalues of the normalised angular affinity ``D^-1/2 A D^-1/2`` of the candidates
    (whitened projection to d dimensions, exponent alpha), for every (d, alpha) of the grid."""
    V, _ = whitened_basis(points, max(AFFINITY_DIMS))
    out = {}
    with threadpool_limits(limits=1, user_api="blas"):
        for d in AFFINITY_DIMS:
            X = V[:, :min(d, V.shape[1])]
            X = X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12)
            cos = X @ X.T
            for a in AFFINITY_ALPHAS:
                A = (cos * cos) ** a
                inv = 1.0 / np.sqrt(np.maximum(A.sum(axis=1), 1e-12))
                M = A * inv[:, None] * inv[None, :]
                n = M.shape[0]
                out[f"eig_d{d}_a{int(a)}"] = eigh(M, eigvals_only=True,
                                                  subset_by_index=[n - n_eig, n - 1])[::-1]
    return out


def sequence_cache(points, ks=K_RANGE):
    """What the K rules need of one sequence: ``lab{K}`` (the labellings
    :func:`~cvfs.motion.kselect.k_residuals` fits) and the affinity spectra."""
    pts = normalise_points(points, per_axis=True)
    out = {f"lab{k}": lab.astype(np.int8) for k, lab in k_labellings(pts, ks).items()}
    out.update(affinity_eigenvalues(pts))
    return out


def hopkins_cache(seqs, cache):
    """:func:`sequence_cache` of every sequence, one ``.npz`` per sequence in ``cache``."""
    cache.mkdir(parents=True, exist_ok=True)
    for s in tqdm([s for s in seqs if not (cache / f"{s.name}.npz").is_file()],
                  desc="Hopkins155 K labellings"):
        np.savez_compressed(cache / f"{s.name}.npz", **sequence_cache(s.points))
    return [dict(np.load(cache / f"{s.name}.npz")) for s in seqs]


# the robust cost's grid (cvfs.motion.kselect.capped_cost): cap, dimension cost
CAP_GRID = (3.0, 5.0, 8.0, 13.0)
DIM_COST_GRID = (1.0, 10.0, 50.0)
#: The grid as arrays broadcasting to (len(CAP_GRID), len(DIM_COST_GRID)).
CAP_COLUMN, DIM_COST_ROW = np.asarray(CAP_GRID)[:, None], np.asarray(DIM_COST_GRID)[None, :]
# --min-fraction: the smallest cluster, as a fraction of the trajectories, a labelling may have
PHI_GRID = (0.0, 0.01, 0.02, 0.03, 0.04, 0.05)
# the grid cell of the default cost (kselect.CAPPED_CAP, CAPPED_DIM_COST)
DEFAULT_CELL = (CAP_GRID.index(CAPPED_CAP), DIM_COST_GRID.index(CAPPED_DIM_COST))


def epipolar_residual(points, labels, min_points=12):
    """Per trajectory: mean Sampson distance, over the frame pairs (0, F//3), (0, 2F//3) and
    (0, F-1), to its cluster's fundamental matrix (8-point least squares on the normalised
    points, rank 2 enforced): a perspective rigid-motion model, under which a static background
    seen by a rotating and translating camera is one motion. NaN in clusters under
    ``min_points`` trajectories."""
    F = points.shape[1]
    pairs = [(0, f) for f in sorted({F // 3, (2 * F) // 3, F - 1}) if f > 0]
    out = np.full(len(points), np.nan)
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        if len(idx) < min_points:
            continue
        e = np.zeros(len(idx))
        for a, b in pairs:
            h1 = np.column_stack([points[idx, a], np.ones(len(idx))])
            h2 = np.column_stack([points[idx, b], np.ones(len(idx))])
            A = (h2[:, :, None] * h1[:, None, :]).reshape(len(idx), 9)
            fm = np.linalg.svd(A, full_matrices=False)[2][-1].reshape(3, 3)
            u, s, vt = np.linalg.svd(fm)
            fm = (u * np.array([s[0], s[1], 0.0])) @ vt
            l1, l2 = h1 @ fm.T, h2 @ fm
            num = np.einsum("ij,ij->i", h2, l1) ** 2
            e += num / np.maximum(l1[:, 0] ** 2 + l1[:, 1] ** 2 + l2[:, 0] ** 2
                                  + l2[:, 1] ** 2, 1e-300)
        out[idx] = e / len(pairs)
    return out


def capped_fraction(Y, labels, sigma2, cap=CAPPED_CAP, dim_cost=CAPPED_DIM_COST, dims=(2, 3, 4)):
    """Fraction of trajectories whose residual reaches the cap of
    :func:`cvfs.motion.kselect.capped_cost` (each cluster at its cost-minimising dimension):
    the points no cluster of the labelling explains."""
    over = sum(cluster_capped_cost(Y[labels == c], sigma2, dims, cap, dim_cost)[1]
               for c in np.unique(labels))
    return over / len(Y)


def k_statistics(points, cached, ks=K_RANGE, *, extra=False, min_fraction=False):
    """Per K: residuals of the lowest-``r_K`` labelling (affine 3-D ``r``, 2-D ``q``, 4-D
    ``r4``, largest per-cluster mean ``maxc``, smallest cluster fraction ``minfrac``), the
    lowest 2-D residual over all labellings ``qmin`` and the lowest robust cost ``g``
    (:func:`cvfs.motion.kselect.capped_cost`, dimensions 2-4) over all labellings on the grid
    ``CAP_GRID`` x ``DIM_COST_GRID``; also P and the affinity spectra. ``extra`` adds, for the
    labelling of lowest robust cost at the default ``cap``, ``dim_cost``: its mean
    :func:`epipolar_residual` ``fg`` and :func:`capped_fraction` ``frac`` (+ 1/P), and the lowest
    mean epipolar residual over all labellings ``fmin`` (NaN where a cluster is too small).
    ``min_fraction`` adds, per smallest-cluster fraction phi of ``PHI_GRID``, ``phi{i}``: the
    lowest robust cost on the grid and the planar residual ``q`` of the lowest-``r`` labelling
    among the labellings whose every cluster holds at least phi P trajectories (None when no
    labelling of K does)."""
    pts = normalise_points(points, per_axis=True)
    Y = velocity_matrix(pts).T
    P = Y.shape[0]
    sigma2 = noise_variance(Y)
    stats = {}
    with threadpool_limits(limits=1, user_api="blas"):
        for k in ks:
            if f"lab{k}" not in cached:
                continue
            rows, gmin = [], np.full((len(CAP_GRID), len(DIM_COST_GRID)), np.inf)
            glist = []
            for lab in cached[f"lab{k}"]:
                tot, per, sizes = np.zeros(3), [], []
                g = np.zeros_like(gmin)
                for c in np.unique(lab):
                    m = Y[lab == c]
                    R = m - m.mean(axis=0)
                    s2 = np.linalg.svd(R, compute_uv=False) ** 2
                    rr = np.array([s2[2:].sum(), s2[3:].sum(), s2[4:].sum()])
                    tot += rr
                    per.append(rr[1] / len(m))
                    sizes.append(len(m))
                    g += cluster_capped_cost(m, sigma2, (2, 3, 4), CAP_COLUMN, DIM_COST_ROW)[0]
                rows.append((tot / P, max(per), min(sizes) / P, g[DEFAULT_CELL] / P))
                gmin = np.minimum(gmin, g / P)
                glist.append(g / P)
            b = int(np.argmin([r[0][1] for r in rows]))
            (q, r, r4), mx, mn, _ = rows[b]
            stats[k] = {"r": r, "q": q, "r4": r4, "maxc": mx, "minfrac": mn,
                        "qmin": min(row[0][0] for row in rows), "g": gmin}
            if min_fraction:
                # g and q over the labellings whose every cluster holds >= phi P trajectories
                # (None where no labelling of K does)
                small = np.array([row[2] for row in rows])
                rq = np.array([row[0][1] for row in rows])
                for i, phi in enumerate(PHI_GRID):
                    ok = np.flatnonzero(small >= phi - 1e-12)
                    stats[k][f"phi{i}"] = None if not len(ok) else (
                        np.min([glist[j] for j in ok], axis=0),
                        rows[ok[int(np.argmin(rq[ok]))]][0][0])
            if extra:
                labs = cached[f"lab{k}"]
                best = labs[int(np.argmin([row[3] for row in rows]))]
                fmean = np.array([np.mean(epipolar_residual(pts, lab)) for lab in labs])
                stats[k].update(fg=float(np.mean(epipolar_residual(pts, best))),
                                fmin=float(np.nanmin(fmean)) if np.isfinite(fmean).any()
                                else np.nan,
                                frac=capped_fraction(Y, best, sigma2) + 1.0 / P)
    return {"P": P, "K": stats, "eig": {n: v for n, v in cached.items() if n.startswith("eig_")}}


def form_tables(stats, ks=K_RANGE):
    """(n, len(ks)) arrays per quantity: logs of the residual statistics, the penalty
    ``K log(P) / P``, ``-log`` of each spectrum's eigengap after K, and the valid-K mask."""
    n = len(stats)
    T = {}
    for name in ("r", "q", "r4", "maxc", "minfrac", "qmin"):
        a = np.full((n, len(ks)), np.nan)
        for i, st in enumerate(stats):
            for j, k in enumerate(ks):
                if k in st["K"]:
                    a[i, j] = np.log(max(st["K"][k][name], 1e-300))
        T[name] = a
    P = np.array([st["P"] for st in stats], float)
    T["pen"] = np.asarray(ks, float)[None, :] * (np.log(P) / P)[:, None]
    T["valid"] = ~np.isnan(T["r"])
    for a in range(len(CAP_GRID)):
        for b in range(len(DIM_COST_GRID)):
            g = np.full((n, len(ks)), np.nan)
            for i, st in enumerate(stats):
                for j, k in enumerate(ks):
                    if k in st["K"]:
                        g[i, j] = np.log(max(st["K"][k]["g"][a, b], 1e-300))
            T[f"g:{a}:{b}"] = g
    if "phi0" in stats[0]["K"][min(stats[0]["K"])]:
        # a K with no labelling at phi gets an infinite cost (never chosen)
        for i in range(len(PHI_GRID)):
            q = np.zeros((n, len(ks)))
            g = np.full((n, len(ks), len(CAP_GRID), len(DIM_COST_GRID)), np.inf)
            for s, st in enumerate(stats):
                for j, k in enumerate(ks):
                    v = st["K"].get(k, {}).get(f"phi{i}")
                    if v is not None:
                        g[s, j] = np.log(np.maximum(v[0], 1e-300))
                        q[s, j] = np.log(max(v[1], 1e-300))
            T[f"qphi{i}"] = q
            for a in range(len(CAP_GRID)):
                for b in range(len(DIM_COST_GRID)):
                    T[f"gphi:{a}:{b}:{i}"] = g[:, :, a, b]
    for name in ("fg", "fmin", "frac"):
        if name not in stats[0]["K"][min(stats[0]["K"])]:
            continue
        a = np.full((n, len(ks)), np.nan)
        for i, st in enumerate(stats):
            for j, k in enumerate(ks):
                if k in st["K"] and np.isfinite(st["K"][k][name]):
                    a[i, j] = np.log(max(st["K"][k][name], 1e-300))
        # an epipolar residual missing (a cluster too small to fit) counts as the sequence's
        # worst; missing at every K, the term is 0 (no say in that sequence's K)
        worst = np.max(np.where(np.isnan(a), -np.inf, a), axis=1, keepdims=True)
        worst = np.where(np.isfinite(worst), worst, 0.0)
        T[name] = np.where(np.isnan(a) & T["valid"], worst, a)
    for key in stats[0]["eig"]:
        e = np.array([st["eig"][key] for st in stats])
        gap = np.stack([e[:, k - 1] - e[:, k] for k in ks], axis=1)
        T["gap:" + key] = -np.log(np.maximum(gap, 1e-12))
    return T


# the grids of cvfs.motion.kselect.fit_penalty
LAM_GRID = np.geomspace(1.0, 1000.0, 120)
MU_GRID = np.concatenate([-np.geomspace(0.01, 10.0, 30)[::-1], [0.0],
                          np.geomspace(0.01, 10.0, 30)])
NU_GRID = np.concatenate([[0.0], np.geomspace(0.01, 10.0, 20)])
# width of the neighbourhood over which _fit_variant averages the training accuracy, as
# kselect.fit_penalty does (--smooth; 1: the single best grid point)
SMOOTH = FIT_SMOOTH
# the three-parameter forms of --extra-forms
LAM_GRID3 = np.geomspace(1.0, 1000.0, 24)
MU_GRID3 = np.concatenate([-np.geomspace(0.01, 10.0, 5)[::-1], [0.0],
                           np.geomspace(0.01, 10.0, 5)])
NU_GRID3 = np.concatenate([-np.geomspace(0.01, 3.0, 3)[::-1], [0.0], np.geomspace(0.01, 3.0, 3)])


def logit_variants(T):
    """The default rule's variants: per cell of the robust cost's grid and L2 weight in
    ``LOGIT_C``, a conditional logit over K on ``(log g_K, log q_K, pen)``, whose weights
    ``(w_g, w_q, w_pen)`` give ``lam = w_pen / w_g``, ``mu = w_q / w_g`` (:func:`logit_rule`)."""
    valid = T["valid"]
    return [("logit", np.stack([np.where(valid, T[n], 0.0) for n in (f"g:{a}:{b}", "q", "pen")],
                               axis=2), c)
            for a in range(len(CAP_GRID)) for b in range(len(DIM_COST_GRID)) for c in LOGIT_C]


def k_forms(T):
    """The candidate rules: name -> list of variants ``(base, terms, grids)``; a rule's K is the
    argmin of ``base + sum theta_i term_i``, with theta on ``grids`` fitted on training sequences
    (and, for the eigengap rules, the affinity's (d, alpha) chosen among the variants too)."""
    gaps = [k for k in T if k.startswith("gap:")]
    out = {"r + lam pen": [(T["r"], [T["pen"]], [LAM_GRID])]}
    for extra in ("q", "r4", "maxc", "minfrac", "qmin"):
        out[f"r + mu {extra} + lam pen"] = [(T["r"], [T["pen"], T[extra]], [LAM_GRID, MU_GRID])]
    grics = [k for k in T if k.startswith("g:")]
    out["g + lam pen"] = [(T[g], [T["pen"]], [LAM_GRID]) for g in grics]
    out[GRID_FORM] = [(T[g], [T["pen"], T["q"]], [LAM_GRID, MU_GRID]) for g in grics]
    out[DEFAULT_FORM] = logit_variants(T)
    if "qphi0" in T:
        # --min-fraction: the default rule over the labellings whose smallest cluster holds
        # >= phi P trajectories, phi fitted with the cell, lam and mu
        out[MINFRAC_FORM] = [(T[g], [T["pen"], T["qphi" + g.rsplit(":", 1)[1]]],
                              [LAM_GRID, MU_GRID]) for g in T if g.startswith("gphi:")]
    out["eigengap"] = [(T[g], [], []) for g in gaps]
    # conditional logit over K on every quantity (a learned K ranker); C = L2 weight
    X = np.stack([np.where(T["valid"], T[n], 0.0)
                  for n in ("r", "q", "r4", "maxc", "minfrac", "qmin", "pen", *gaps)], axis=2)
    out["conditional logit"] = [("logit", X, c) for c in (0.1, 1.0, 10.0)]
    out["r + nu gap + lam pen"] = [(T["r"], [T["pen"], T[g]], [LAM_GRID, NU_GRID]) for g in gaps]
    if "fg" in T:
        # --extra-forms: a third term on the robust-cost rule (coarser grids: three parameters),
        # the epipolar residual of the lowest-cost labelling / the lowest over all labellings
        # (perspective model) or the fraction of points at the cap; and a conditional logit over
        # K on the robust-cost quantities
        for extra in ("fg", "fmin", "frac"):
            out[f"g + mu q + nu {extra} + lam pen"] = [
                (T[g], [T["pen"], T["q"], T[extra]], [LAM_GRID3, MU_GRID3, NU_GRID3])
                for g in grics]
        Xg = np.stack([np.where(T["valid"], T[n], 0.0)
                       for n in (*grics, "q", "pen", "fg", "frac")], axis=2)
        out["conditional logit (robust cost)"] = [("logit", Xg, c) for c in (0.1, 1.0, 10.0)]
    return out


def _fit_logit(X, valid, y, c, ks=K_RANGE):
    """Weights of a conditional logit ``p(K) ~ exp(-x_K w)`` (L2 weight ``c``), standardised."""
    from scipy.optimize import minimize

    mu = X[valid].mean(axis=0)
    sd = X[valid].std(axis=0) + 1e-12
    Z = (X - mu) / sd
    target = (np.asarray(ks)[None, :] == y[:, None]).astype(float)

    def loss(w):
        s = np.where(valid, -(Z @ w), -np.inf)
        m = s.max(axis=1, keepdims=True)
        e = np.exp(s - m)
        p = e / e.sum(axis=1, keepdims=True)
        nll = -np.sum(target * np.where(valid, s - m - np.log(e.sum(axis=1, keepdims=True)),
                                        0.0))
        grad = np.einsum("ik,ikj->j", target - p, np.where(valid[..., None], Z, 0.0))
        return nll / len(y) + c * w @ w / len(y), grad / len(y) + 2 * c * w / len(y)

    w = minimize(loss, np.zeros(X.shape[2]), jac=True, method="L-BFGS-B").x
    return w / sd, mu @ (w / sd)


def _choose(base, terms, theta, valid, ks=K_RANGE):
    s = base + sum(v * t for v, t in zip(theta, terms, strict=True)) if terms else base
    return np.asarray(ks)[np.argmin(np.where(valid, s, np.inf), axis=1)]


def _fit_variant(base, terms, grids, valid, y, ks=K_RANGE):
    """Grid point at the centre of the best ``SMOOTH``-wide neighbourhood: the training accuracy
    (share of sequences given their true K) averaged over each point's neighbours along every
    parameter's grid (edges repeated), the best average returned (middle of the ties)."""
    g = len(grids)
    s = np.where(valid, base, np.inf)[(None,) * g]
    for a, (t, grid) in enumerate(zip(terms, grids, strict=True)):
        shape = [1] * g + [1, 1]
        shape[a] = len(grid)
        s = s + np.asarray(grid).reshape(shape) * np.where(valid, t, 0.0)[(None,) * g]
    acc = np.mean(np.asarray(ks)[np.argmin(s, axis=-1)] == y, axis=-1)
    acc = _neighbourhood_mean(acc, SMOOTH)
    top = np.argwhere(acc == acc.max())
    m = top[len(top) // 2]
    return tuple(float(grid[i]) for grid, i in zip(grids, m, strict=True)), float(acc.max())


def fit_form(variants, idx, valid, y):
    """(variant index, theta, training accuracy) of a rule fitted on the sequences ``idx``."""
    best = (-1.0, 0, ())
    if isinstance(variants[0][0], str):
        for v, (_, X, c) in enumerate(variants):
            w, _ = _fit_logit(X[idx], valid[idx], y[idx], c)
            acc = float(np.mean(_choose(X[idx] @ w, [], (), valid[idx]) == y[idx]))
            if acc > best[0]:
                best = (acc, v, tuple(w))
        return best[1], best[2], best[0]
    for v, (base, terms, grids) in enumerate(variants):
        theta, acc = _fit_variant(base[idx], [t[idx] for t in terms], grids, valid[idx], y[idx])
        if acc > best[0]:
            best = (acc, v, theta)
    return best[1], best[2], best[0]


def predict_form(variants, fitted, idx, valid):
    v, theta, _ = fitted
    if isinstance(variants[v][0], str):
        return _choose(variants[v][1][idx] @ np.asarray(theta), [], (), valid[idx])
    base, terms, _ = variants[v]
    return _choose(base[idx], [t[idx] for t in terms], theta, valid[idx])


def cv_forms(forms, idx, folds, valid, y):
    """K chosen for the sequences ``idx`` by every rule, fitted on the other folds."""
    pred = {name: np.zeros(len(idx), int) for name in forms}
    for f in np.unique(folds):
        tr, te = idx[folds != f], idx[folds == f]
        for name, variants in forms.items():
            pred[name][folds == f] = predict_form(variants, fit_form(variants, tr, valid, y),
                                                  te, valid)
    return pred


def hopkins_cv(seqs, stats, fold_seed=0, inner_repeats=1):
    """Plain 10-fold CV by video of every rule, and the nested CV: in each outer fold the rule
    (form) is picked by a 9-fold CV on the training folds, then fitted on them. With
    ``inner_repeats`` > 1 the inner accuracy is the mean over that many 9-fold splits of the
    training sequences by video (the first: the outer folds themselves)."""
    videos, raw = [s.video for s in seqs], [s.raw_footage for s in seqs]
    folds = video_folds(videos, raw, 10, fold_seed)
    y = np.array([s.n_motions for s in seqs])
    T = form_tables(stats)
    forms = k_forms(T)
    valid = T["valid"]
    everything = np.arange(len(seqs))
    plain = cv_forms(forms, everything, folds, valid, y)
    nested = np.zeros(len(seqs), int)
    picked = []
    for f in tqdm(range(10), desc="nested CV"):
        tr, te = np.flatnonzero(folds != f), np.flatnonzero(folds == f)
        splits = [folds[tr]] + [
            video_folds([videos[i] for i in tr], [raw[i] for i in tr], 9,
                        np.random.default_rng([fold_seed, f, r]))
            for r in range(1, inner_repeats)]
        acc = {name: 0.0 for name in forms}
        for split in splits:
            for name, p in cv_forms(forms, tr, split, valid, y).items():
                acc[name] += float(np.mean(p == y[tr])) / len(splits)
        best = max(forms, key=lambda n: acc[n])  # first in the listed order on ties
        fitted = fit_form(forms[best], tr, valid, y)
        nested[te] = predict_form(forms[best], fitted, te, valid)
        picked.append({"fold": f, "form": best, "inner_accuracy": acc[best],
                       "variant": fitted[0], "theta": list(fitted[1])})

    def row(name, pred):
        return [name] + [100 * float(np.mean(pred[m] == y[m]))
                         for m in (y == 2, y == 3, np.ones_like(y, bool))]

    rows = [row(n, p) for n, p in plain.items()] + [row("nested: form picked per fold", nested)]
    fitted_all = {n: fit_form(v, everything, valid, y) for n, v in forms.items()}
    names = [s.name for s in seqs]
    default = plain[DEFAULT_FORM]
    miss = [(names[i], int(y[i]), int(default[i]), seqs[i].category, int(len(seqs[i].points)))
            for i in np.flatnonzero(default != y)]
    info = {"picked": picked, "nested_chosen": dict(zip(names, nested.tolist(), strict=True)),
            "default_rule_misses": miss,
            "fitted_all": {n: {"variant": int(v), "variant_name": _variant_name(forms[n], v, T),
                               "theta": list(th), "train_accuracy": a}
                           for n, (v, th, a) in fitted_all.items()},
            "n": [int(np.sum(y == 2)), int(np.sum(y == 3)), len(y)]}
    return rows, info


def logit_rule(variant, theta):
    """``(cap, dim_cost, lam, mu)`` of the default rule's logit fit (variant index, weights)."""
    cell, w = divmod(int(variant), len(LOGIT_C))[0], theta
    a, b = divmod(cell, len(DIM_COST_GRID))
    return CAP_GRID[a], DIM_COST_GRID[b], float(w[2] / w[0]), float(w[1] / w[0])


def _variant_name(variants, v, T):
    for prefix in ("gap:", "g:", "gphi:"):
        keys = [k for k in T if k.startswith(prefix)]
        if len(variants) == len(keys) and len(variants) > 1:
            if prefix == "gphi:":
                a, b, i = (int(j) for j in keys[v].split(":")[1:])
                return f"cap {CAP_GRID[a]}, dim_cost {DIM_COST_GRID[b]}, phi {PHI_GRID[i]}"
            if prefix == "g:":
                a, b = (int(i) for i in keys[v].split(":")[1:])
                return f"cap {CAP_GRID[a]}, dim_cost {DIM_COST_GRID[b]}"
            return keys[v]
    return ""


def pool_errors(points, truth, k):
    """Oracle of the spectral pool, of the pool with K-subspaces, and the lowest-residual error."""
    pts = normalise_points(points)
    spectral = generate_candidates(pts, k, ksubspaces=0).labels
    Y = velocity_matrix(pts).T
    ksub = ksubspace_candidates(Y, k)
    both = np.vstack([spectral, ksub]) if len(ksub) else spectral
    res = [subspace_residual(Y, lab) for lab in both]
    return (misclassification(spectral, truth).min(), misclassification(both, truth).min(),
            misclassification(both[int(np.argmin(res))], truth))


def synthetic_rows(seeds, lam, mu):
    """Per K: errors with K given, the pools' oracles, and K chosen correctly by the default
    rule (:func:`~cvfs.motion.kselect.choose_k_capped`) and by ``log r_K + mu log q_K +
    lam pen`` with ``lam``, ``mu`` fitted on Hopkins155."""
    rows = []
    for k in tqdm(range(2, 7), desc="synthetic"):
        errs, hits, hits_r, pools = [], [], [], []
        for seed in range(seeds):
            pts, truth = make_rigid_motions(k, 40 * k, 20, noise=0.002, random_state=seed)
            labels = segment(pts, k)
            errs.append(misclassification(labels, truth))
            pools.append(pool_errors(pts, truth, k))
            npts = normalise_points(pts, per_axis=True)
            labs = k_labellings(npts, range(2, k + 2))
            res, planar = k_residuals(npts, range(2, k + 2), return_planar=True, labellings=labs)
            costs = k_capped_costs(npts, labellings=labs, cap=CAPPED_CAP,
                                   dim_cost=CAPPED_DIM_COST)
            hits.append(choose_k_capped(costs, planar, len(pts)) == k)
            hits_r.append(choose_k_penalised(res, len(pts), lam, planar=planar, mu=mu) == k)
        pools = 100 * np.mean(pools, axis=0)
        rows.append([k, seeds, 100 * float(np.mean(errs)), 100 * float(np.max(errs)),
                     float(pools[0]), float(pools[1]), float(pools[2]),
                     100 * float(np.mean(hits)), 100 * float(np.mean(hits_r))])
    return rows


def hopkins_pool_rows(seqs):
    three = [s for s in seqs if s.n_motions == 3]
    errs = np.array([pool_errors(s.points, s.labels, 3)
                     for s in tqdm(three, desc="Hopkins155 K=3 pools")])
    return [["3 motions", len(three)] + [float(v) for v in 100 * errs.mean(axis=0)]
            + [float(v) for v in 100 * np.median(errs, axis=0)]]


def main(argv=None):
    global SMOOTH
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None)
    ap.add_argument("--cache", default=str(REPO / "out" / "motion_k_labellings"))
    ap.add_argument("--skip-pool", action="store_true")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--fold-seeds", type=int, nargs="+", default=[0],
                    help="fold seeds of the CV (the tables use the first; the others print "
                         "the nested and default-rule accuracy)")
    ap.add_argument("--min-fraction", action="store_true",
                    help="also the default rule over the labellings whose smallest cluster holds "
                         "at least phi P trajectories, phi in PHI_GRID fitted in the training "
                         "folds (in the nested CV's choice too)")
    ap.add_argument("--inner-repeats", type=int, default=1,
                    help="9-fold splits of the training sequences averaged in the nested CV's "
                         "choice of the rule (1: the outer training folds only)")
    ap.add_argument("--smooth", type=int, default=SMOOTH,
                    help="each rule's parameters at the centre of the best neighbourhood of this "
                         "width on its grid (1: the single best grid point)")
    ap.add_argument("--extra-forms", action="store_true",
                    help="also the epipolar-residual, capped-fraction and robust-cost logit rules "
                         "(in the nested CV's choice too)")
    args = ap.parse_args(argv)
    if args.smooth < 1:
        ap.error(f"--smooth must be >= 1; got {args.smooth}")
    SMOOTH = args.smooth
    limit_threads()
    from cvfs.datasets._home import data_home

    data = Path(args.data) if args.data else Path(data_home())
    seqs = load_hopkins155(data / "hopkins155")
    cached = hopkins_cache(seqs, Path(args.cache))
    stats = [k_statistics(s.points, c, extra=args.extra_forms, min_fraction=args.min_fraction)
             for s, c in zip(tqdm(seqs, desc="K statistics"), cached, strict=True)]
    cv_rows, cv_info = hopkins_cv(seqs, stats, args.fold_seeds[0], args.inner_repeats)

    def seed_row(rows):
        acc = {r[0]: r[-1] for r in rows}
        # default, planar, nested (all, two motions, three motions)
        return [acc[DEFAULT_FORM], acc[PLANAR_FORM], rows[-1][-1], rows[-1][1], rows[-1][2],
                acc.get(MINFRAC_FORM, float("nan"))]

    rows_by_seed = {args.fold_seeds[0]: cv_rows}
    for seed in args.fold_seeds[1:]:
        rows_by_seed[seed] = hopkins_cv(seqs, stats, seed, args.inner_repeats)[0]
    by_seed = {seed: seed_row(rows) for seed, rows in rows_by_seed.items()}
    cv_info["by_fold_seed"] = by_seed
    # K right per rule over the fold seeds: mean and sd (2 motions, 3 motions, all)
    summary = []
    for name in (DEFAULT_FORM, GRID_FORM, PLANAR_FORM, "nested: form picked per fold"):
        acc = np.array([next(r[1:] for r in rows if r[0] == name)
                        for rows in rows_by_seed.values()])
        sd = acc.std(axis=0, ddof=1) if len(acc) > 1 else np.zeros(3)
        summary.append([name] + [f"{m:.2f} ± {d:.2f}" for m, d in zip(acc.mean(axis=0), sd,
                                                                       strict=True)])
    cv_info["fold_seed_summary"] = {r[0]: r[1:] for r in summary}
    print("Hopkins155: K chosen correctly %, 10-fold CV by video (each rule's parameters fitted "
          "on the training folds); last row: nested CV (the rule also picked on the training "
          "folds)")
    print(format_table(["rule", "2 motions", "3 motions", "all"], _fmt(cv_rows)))
    for seed, (plain, planar, nest, two, three, minfrac) in by_seed.items():
        print(f"fold seed {seed}: {DEFAULT_FORM} {plain:.1f}%, {PLANAR_FORM} {planar:.1f}%, "
              f"nested {nest:.1f}% (2 motions {two:.1f}%, 3 motions {three:.1f}%)"
              + (f", {MINFRAC_FORM} {minfrac:.1f}%" if args.min_fraction else ""))
    if len(by_seed) > 1:
        print("mean over fold seeds: " + ", ".join(
            f"{n} {np.mean([v[i] for v in by_seed.values()]):.1f}%"
            for i, n in enumerate((DEFAULT_FORM, PLANAR_FORM, "nested", "nested 2 motions",
                                   "nested 3 motions", MINFRAC_FORM)[:6 if args.min_fraction
                                                                       else 5])))
    print(f"K chosen correctly %, 10-fold CV by video, mean ± sd over fold seeds "
          f"{list(rows_by_seed)}")
    print(format_table(["rule", "2 motions", "3 motions", "all"], summary))
    for p in cv_info["picked"]:
        print(f"  fold {p['fold']}: {p['form']} (inner CV {100 * p['inner_accuracy']:.1f}%), "
              f"theta {np.round(p['theta'], 3).tolist()}")
    print(f"{DEFAULT_FORM} (default), 10-fold CV, sequences given a wrong K (name, K, chosen, "
          "category, P):")
    for m in cv_info["default_rule_misses"]:
        print("  ", *m)
    fit = cv_info["fitted_all"][DEFAULT_FORM]
    cap, dim_cost, lam, mu = logit_rule(fit["variant"], fit["theta"])
    print(f"{DEFAULT_FORM} on all 155: cap {cap}, dim_cost {dim_cost}, lam {lam:.2f}, mu {mu:.3f}, "
          f"train accuracy {100 * fit['train_accuracy']:.1f}% (kselect.CAPPED_*: cap {CAPPED_CAP}, "
          f"dim_cost {CAPPED_DIM_COST}, lam {CAPPED_LAMBDA}, mu {CAPPED_MU})")
    fit = cv_info["fitted_all"][GRID_FORM]
    print(f"{GRID_FORM} on all 155: {fit['variant_name']}, lam {fit['theta'][0]:.2f}, "
          f"mu {fit['theta'][1]:.3f}, train accuracy {100 * fit['train_accuracy']:.1f}%")
    if args.min_fraction:
        fit = cv_info["fitted_all"][MINFRAC_FORM]
        print(f"{MINFRAC_FORM} on all 155: {fit['variant_name']}, lam {fit['theta'][0]:.2f}, "
              f"mu {fit['theta'][1]:.3f}, train accuracy {100 * fit['train_accuracy']:.1f}%")
    penal = cv_info["fitted_all"][PLANAR_FORM]
    lam, mu = penal["theta"]
    print(f"{PLANAR_FORM} on all 155: lam {lam:.2f}, mu {mu:.3f} (DEFAULT_LAMBDA "
          f"{DEFAULT_LAMBDA}, DEFAULT_MU {DEFAULT_MU})")
    syn = synthetic_rows(args.seeds, lam, mu) if args.seeds else []
    if syn:
        print("Synthetic rigid motions (40 points per motion, 20 frames, noise 0.002)")
        print(format_table(["K", "problems", "mean error % (K given)", "max error %",
                            "oracle spectral %", "oracle + K-subspaces %",
                            "lowest residual %", "K correct % (default)",
                            "K correct % (r + mu q + lam pen)"], _fmt(syn)))
    pool = [] if args.skip_pool else hopkins_pool_rows(seqs)
    if pool:
        print("Hopkins155 three motions, K = 3: mean (median) error %")
        print(format_table(["sequences", "n", "oracle spectral", "oracle + K-subspaces",
                            "lowest residual", "median oracle spectral",
                            "median oracle + K-subspaces", "median lowest residual"],
                           _fmt(pool)))
    name = ("motion_k_extra" if args.extra_forms
            else "motion_k_minfrac" if args.min_fraction else None)
    write_json(result_path(__file__, name),
               {"hopkins_cv": cv_rows, "hopkins_info": cv_info, "synthetic": syn,
                "hopkins_pool_k3": pool})


if __name__ == "__main__":
    main()
