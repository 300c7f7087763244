"""K chosen for perspective footage: the per-K quantities of the two-view-geometry candidates on
KT3DMoSeg and Hopkins155, and the K rules cross-validated by sequence-split folds.

Usage::

    python benchmarks/motion/motion_perspective_k.py [--data DIR] [--sets kt3dmoseg hopkins]
                                                    [--limit N] [--seed 0] [--stats FILE]

Stage 1 (cached in ``--stats``, default ``out/motion_perspective_k_stats.json``): for every
sequence the affinities of :func:`cvfs.motion.geometry.geometric_affinities` (seed ``--seed``),
the leading eigenvalues of each normalised affinity, and for every K in 2..8 (4 tracks per
motion) the four candidates (spectral clustering of each affinity into K), their normalised cuts
on each affinity and their misclassification % (KT3DMoSeg: the never-observed track counts as
misclassified, as in ``motion_kt3dmoseg_geometry.py``; Hopkins155: the pixel tracks).

Stage 2: K rules over the per-K quantities (``cut_rise``:
:func:`cvfs.motion.geometry_k.choose_k_by_cuts`, the rule ``segment`` uses; ``two``: always
K = 2; the eigengap of the fused or of every normalised affinity; the lowest
``log s_K - c log K`` or ``s_K - c K``; the first jump ``s_(K+1) - s_K > c``; ...), each with
its constant fitted on the training folds (the grid value with the most sequences given their
true K, each set weighted equally, ties to the middle of the best run) and tested on the
held-out fold; then every constant fitted on all the sequences. Folds: KT3DMoSeg by KITTI
sequence (``SeqNNN``: 15 folds of whole sequences), Hopkins155 by video (shared raw footage
together, 10 folds); fitted on both, fold f is held out of both sets together with fold
f mod 10, so no test sequence's KITTI sequence or video is in its training set.

Writes ``benchmarks/results/motion/motion_perspective_k.json``.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))

from benchmarks._bench import format_table, limit_threads, result_path, write_json
from cvfs.motion.candidates import canonical_labels
from cvfs.motion.evaluate import misclassification
from cvfs.motion.geometry import geometric_affinities, normalised_cut, spectral_labels_sparse
from cvfs.motion.geometry_k import choose_k_by_cuts

K_RANGE = tuple(range(2, 9))


def affinity_eigenvalues(A, n):
    """The ``n`` largest eigenvalues of the normalised affinity ``D^-1/2 A D^-1/2``, descending
    (the eigengap rules' input)."""
    from scipy import sparse
    from scipy.linalg import eigh
    from scipy.sparse.linalg import eigsh

    A = sparse.csr_matrix(A, dtype=np.float64)
    inv = 1.0 / np.sqrt(np.maximum(np.asarray(A.sum(axis=1)).ravel(), 1e-12))
    M = sparse.diags(inv) @ A @ sparse.diags(inv)
    P = M.shape[0]
    n = min(int(n), P)
    if P > 1500:
        val = eigsh(M, k=n, which="LA", tol=1e-8, return_eigenvectors=False,
                    v0=np.random.default_rng(0).standard_normal(P))
    else:
        val = eigh(M.toarray(), subset_by_index=[P - n, P - 1], eigvals_only=True)
    return np.sort(val)[::-1]


def sequence_stats(points, visible, truth, n_dropped=0, seed=0):
    """Eigenvalues and per-K candidates' cuts and errors (%) of one sequence."""
    t = time.process_time()
    aff = geometric_affinities(points, visible, random_state=seed)
    names = list(aff)
    n_all = points.shape[0] + n_dropped
    out = {"names": names, "P": int(points.shape[0]),
           "eig": {n: affinity_eigenvalues(aff[n], 10).tolist() for n in names}, "K": {}}
    for k in K_RANGE:
        if 4 * k > points.shape[0]:
            continue
        labs = np.vstack([canonical_labels(spectral_labels_sparse(aff[n], k, random_state=seed))
                          for n in names])
        cuts = [[normalised_cut(aff[m], lab) for m in names] for lab in labs]
        err = misclassification(labs, truth)
        err = 100.0 * (err * points.shape[0] + n_dropped) / n_all
        out["K"][str(k)] = {"cuts": cuts, "err": np.asarray(err).tolist()}
    out["cpu_s"] = time.process_time() - t
    return out


def kt3dmoseg_stats(data, seed, limit=None):
    from cvfs.datasets.kt3dmoseg import load_kt3dmoseg
    from cvfs.motion.missing import MIN_OBSERVED

    rows = {}
    for clip in tqdm(load_kt3dmoseg(data)[:limit], desc="KT3DMoSeg"):
        ok = clip.visible.sum(axis=1) >= MIN_OBSERVED
        s = sequence_stats(clip.points[ok], clip.visible[ok], clip.labels[ok],
                           int((~ok).sum()), seed)
        s.update(true_k=int(clip.n_motions), group=clip.name.split("_")[0])
        rows[clip.name] = s
    return rows


def hopkins_stats(data, seed, limit=None):
    from cvfs.datasets.hopkins155 import list_sequences, load_hopkins155

    names = list_sequences(data)[:limit]
    rows = {}
    for s in tqdm(load_hopkins155(data, names=names), desc="Hopkins155"):
        vis = np.ones(s.pixels.shape[:2], dtype=bool)
        st = sequence_stats(s.pixels, vis, s.labels, 0, seed)
        st.update(true_k=int(s.n_motions), group=s.raw_footage, video=s.video)
        rows[s.name] = st
    return rows


_FLOOR = 1e-6  # geometry._CUT_FLOOR


def per_k(row):
    """(ks, best score s_K, error % of that labelling) of one sequence's statistics."""
    if "_per_k" in row:
        return row["_per_k"]
    ks = sorted(int(k) for k in row["K"])
    best, err = [], []
    for k in ks:
        cuts = np.asarray(row["K"][str(k)]["cuts"])
        s = np.exp(np.log(cuts + _FLOOR).mean(axis=1))
        i = int(np.argmin(s))
        best.append(float(s[i]))
        err.append(float(row["K"][str(k)]["err"][i]))
    row["_per_k"] = np.array(ks), np.array(best), np.array(err)
    return row["_per_k"]


def _gaps(row, names=("fused",)):
    lam = np.mean([row["eig"][n] for n in names], axis=0)
    return lam  # descending, lam[0] ~ 1


def rule_values(row, rule, c):
    """The K of ``rule`` with constant ``c`` on one sequence."""
    ks, s, _ = per_k(row)
    if rule == "eigengap_fused" or rule == "eigengap_all":
        names = ("fused",) if rule == "eigengap_fused" else tuple(row["names"])
        lam = _gaps(row, names)
        g = np.array([lam[k - 1] - lam[k] for k in ks])
        return int(ks[int(np.argmax(g - c * ks))])
    if rule == "cut_pow":
        return int(ks[int(np.argmin(np.log(s + _FLOOR) - c * np.log(ks)))])
    if rule == "cut_lin":
        return int(ks[int(np.argmin(s - c * ks))])
    if rule == "cut_jump":
        full = np.r_[s, np.inf]
        for i, k in enumerate(ks):
            if full[i + 1] - full[i] > c:
                return int(k)
        return int(ks[-1])
    if rule == "cut_second":
        prev = np.r_[0.0, s[:-1]] if ks[0] == 2 else None
        nxt = np.r_[s[1:], np.nan]
        d2 = (nxt - s) - (s - prev)
        d2 = np.where(np.isfinite(d2), d2, -np.inf)
        return int(ks[int(np.argmax(d2 - c * ks))])
    if rule == "cut_rise":
        return choose_k_by_cuts(dict(zip(ks.tolist(), s.tolist())), c)
    if rule == "two":
        return 2
    if rule == "gap_cut":
        lam = _gaps(row, ("fused",))
        g = np.array([lam[k - 1] - lam[k] for k in ks])
        return int(ks[int(np.argmax(np.log(np.maximum(g, 1e-9)) - c * np.log(s + _FLOOR)))])
    raise ValueError(rule)


RULES = {
    "cut_rise": np.linspace(0.0, 0.03, 61),  # steps of 0.0005
    "two": np.zeros(1),
    "eigengap_fused": np.r_[0.0, np.linspace(-0.02, 0.05, 29)],
    "eigengap_all": np.r_[0.0, np.linspace(-0.02, 0.05, 29)],
    "cut_pow": np.linspace(0.0, 6.0, 61),
    "cut_lin": np.linspace(0.0, 0.5, 51),
    "cut_jump": np.linspace(0.0, 0.6, 61),
    "cut_second": np.r_[0.0, np.linspace(-0.05, 0.1, 31)],
    "gap_cut": np.linspace(0.0, 2.0, 41),
}


def _fit(rows, rule, grid):
    """The constant of ``grid`` giving the most rows their true K, each set weighted equally
    (the sum over the sets of the fraction of their rows given their true K; ties: the middle of
    the longest best run)."""
    sets = [r["set"] for r in rows]
    weight = np.array([1.0 / sets.count(x) for x in sets])
    right = np.array([np.sum(weight * [rule_values(r, rule, c) == r["true_k"] for r in rows])
                      for c in grid])
    best = np.flatnonzero(right >= right.max() - 1e-12)
    runs = np.split(best, np.flatnonzero(np.diff(best) > 1) + 1)
    run = max(runs, key=len)
    return float(grid[run[len(run) // 2]])


def folds_of(stats):
    """Fold index per (set, name): KT3DMoSeg by KITTI sequence, Hopkins155 by video."""
    out = {}
    for key, rows in stats.items():
        groups = sorted({r["group"] for r in rows.values()})
        if key.startswith("hopkins"):
            from cvfs.motion.evaluate import video_folds

            names = list(rows)
            f = video_folds([rows[n]["video"] for n in names],
                            [rows[n]["group"] for n in names], 10, 0)
            out.update({(key, n): int(i) for n, i in zip(names, f)})
        else:
            out.update({(key, n): groups.index(r["group"]) for n, r in rows.items()})
    return out


def cross_validate(stats, train_sets, rule):
    """Per held-out sequence of every set: (K chosen, error %, constant), the constant fitted on
    the other folds of ``train_sets`` (fold f of one set is held out with fold f mod 10 of the
    other)."""
    folds = folds_of(stats)
    res = {}
    for f in sorted({v % 10 for v in folds.values()} | set(folds.values())):
        test = [(key, n) for key, rows in stats.items() for n in rows if folds[(key, n)] == f]
        if not test:
            continue
        train = [stats[k2][n2] for k2 in train_sets for n2 in stats[k2]
                 if folds[(k2, n2)] != f and folds[(k2, n2)] % 10 != f % 10]
        c = _fit(train, rule, RULES[rule]) if len(RULES[rule]) > 1 else 0.0
        for key, n in test:
            r = stats[key][n]
            k = rule_values(r, rule, c)
            ks, _, err = per_k(r)
            res[(key, n)] = (k, float(err[list(ks).index(k)]), c)
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None, help="data home (default: $CVFS_DATA)")
    ap.add_argument("--sets", nargs="+", default=["kt3dmoseg", "hopkins"],
                    choices=("kt3dmoseg", "hopkins"))
    ap.add_argument("--limit", type=int, default=None, help="only the first N sequences per set")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stats", default=str(REPO / "out" / "motion_perspective_k_stats.json"))
    ap.add_argument("--out", default=str(result_path(__file__)))
    args = ap.parse_args(argv)
    limit_threads()
    from cvfs.datasets import data_home

    data = Path(args.data) if args.data else Path(data_home())
    stats_path = Path(args.stats)
    stats = json.loads(stats_path.read_text()) if stats_path.is_file() else {}
    stats.pop("run", None)  # the run record write_json puts in front
    for name in args.sets:
        key = f"{name} seed {args.seed}"
        if key in stats and (args.limit is None or len(stats[key]) >= args.limit):
            continue
        if name == "kt3dmoseg":
            stats[key] = kt3dmoseg_stats(data / "motion_kt3dmoseg", args.seed, args.limit)
        else:
            stats[key] = hopkins_stats(data / "hopkins155", args.seed, args.limit)
        write_json(stats_path, stats)
    for key, rows in stats.items():
        for r in rows.values():
            r["set"] = key
    print(format_table(["set", "sequences", "CPU s"],
                       [[k, len(v), f"{sum(r['cpu_s'] for r in v.values()):.0f}"]
                        for k, v in stats.items()], title="per-K statistics"))
    rows_out, table = {}, []
    for rule in RULES:
        for train in [[k] for k in stats] + ([list(stats)] if len(stats) > 1 else []):
            res = cross_validate(stats, train, rule)
            for key, rows in stats.items():
                if len(train) == 1 and train[0] != key:
                    continue
                names = list(rows)
                right = sum(res[(key, n)][0] == rows[n]["true_k"] for n in names)
                err = np.mean([res[(key, n)][1] for n in names])
                cs = sorted({res[(key, n)][2] for n in names})
                table.append([rule, "+".join(t.split()[0] for t in train), key.split()[0],
                              f"{right}/{len(names)}", f"{err:.2f}",
                              f"{cs[0]:.3g}..{cs[-1]:.3g}"])
                rows_out[f"{rule} | {'+'.join(train)} | {key}"] = {
                    n: list(res[(key, n)]) for n in names}
    print(format_table(["rule", "fitted on", "tested on", "K right", "mean error %",
                        "constants"], table,
                       title="K chosen, cross-validated by sequence-split folds"))
    everything = [r for rows in stats.values() for r in rows.values()]
    fitted = {rule: _fit(everything, rule, grid) if len(grid) > 1 else 0.0
              for rule, grid in RULES.items()}
    print("constants fitted on every sequence: "
          + ", ".join(f"{rule} {c:.4g}" for rule, c in fitted.items()))
    table2 = []
    for key, rows in stats.items():
        truth = np.array([r["true_k"] for r in rows.values()])
        ks = np.array([rule_values(r, "cut_rise", fitted["cut_rise"]) for r in rows.values()])
        table2.append([key.split()[0], f"{np.sum(ks == truth)}/{truth.size}"]
                      + [f"{np.sum((ks == truth) & sel)}/{np.sum(sel)}"
                         for sel in (truth == 2, truth == 3, truth >= 4)])
    print(format_table(["set", "K right", "K = 2", "K = 3", "K = 4, 5"], table2,
                       title=f"cut_rise {fitted['cut_rise']:.4g} (fitted on every sequence)"))
    write_json(args.out, {"sets": list(stats), "table": table, "per_sequence": rows_out,
                          "fitted": fitted, "in_sample": table2})


if __name__ == "__main__":
    main()
