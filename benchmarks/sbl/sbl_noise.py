"""Learned noise variance of ``SBLRegressor(lam="auto")`` against scikit-learn's ARDRegression.

Gaussian dictionary Phi of shape (N, M), M = 400 atoms, N = ratio * M samples; 10 non-zero
coefficients drawn N(0, 3^2) on random atoms; y = Phi theta + sigma e with sigma set by the
amplitude SNR = ||Phi theta|| / (sqrt(N) sigma). For every (N / M, SNR) cell and seed: the learned
noise variance divided by the true sigma^2 for cvfs and ARDRegression (fit_intercept=False, its
defaults), the number of coefficients above 1e-3 of the largest, and the fit time. The table shows
the median over seeds and, in brackets, the minimum.

    python benchmarks/sbl/sbl_noise.py [--seeds 5] [--n-atoms 400]

Single-threaded (BLAS pinned to one thread). Writes benchmarks/results/sbl/sbl_noise.json.
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from tqdm import tqdm

from benchmarks._bench import format_table, limit_threads, result_path, to_jsonable, write_json
from cvfs import SBLRegressor

RATIOS = (0.25, 0.5, 1.0, 2.0)
SNRS = (2.0, 5.0, 10.0, 50.0)


def problem(n, m, snr, seed, k=10):
    """(Phi, y, true noise variance) of one cell."""
    rng = np.random.default_rng(seed)
    Phi = rng.standard_normal((n, m))
    theta = np.zeros(m)
    theta[rng.choice(m, k, replace=False)] = 3.0 * rng.standard_normal(k)
    s = Phi @ theta
    sigma = np.linalg.norm(s) / np.sqrt(n) / snr
    return Phi, s + sigma * rng.standard_normal(n), sigma**2


def n_used(coef):
    a = np.abs(coef)
    return int(np.count_nonzero(a > 1e-3 * a.max())) if a.max() > 0 else 0


def run_cell(n, m, snr, seeds):
    from sklearn.linear_model import ARDRegression

    rows = []
    for seed in seeds:
        Phi, y, var = problem(n, m, snr, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.process_time()
            ours = SBLRegressor(lam="auto").fit(Phi, y)
            t1 = time.process_time()
            ard = ARDRegression(fit_intercept=False).fit(Phi, y)
            t2 = time.process_time()
        rows.append({"seed": seed, "cvfs": ours.noise_variance_ / var,
                     "ard": (1.0 / ard.alpha_) / var, "cvfs_nnz": n_used(ours.coef_),
                     "ard_nnz": n_used(ard.coef_), "cvfs_s": t1 - t0, "ard_s": t2 - t1})
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--n-atoms", type=int, default=400)
    args = ap.parse_args(argv)
    limit_threads()
    m = args.n_atoms
    SBLRegressor(lam="auto").fit(np.eye(4), np.ones(4))  # JIT warm-up
    cells, table = [], []
    for ratio in tqdm(RATIOS, desc="N / M"):
        for snr in SNRS:
            rows = run_cell(int(ratio * m), m, snr, range(args.seeds))
            c = {k: np.array([r[k] for r in rows]) for k in rows[0]}
            cells.append({"ratio": ratio, "snr": snr, "runs": rows})
            table.append([f"{ratio:g}", f"{snr:g}",
                          f"{np.median(c['cvfs']):.3f} ({c['cvfs'].min():.3f})",
                          f"{np.median(c['ard']):.3f} ({c['ard'].min():.3f})",
                          f"{np.median(c['cvfs_nnz']):.0f}", f"{np.median(c['ard_nnz']):.0f}",
                          f"{np.median(c['cvfs_s']):.2f}", f"{np.median(c['ard_s']):.2f}"])
    print(format_table(
        ["N/M", "SNR", "cvfs λ/σ² med (min)", "ARD λ/σ² med (min)", "cvfs nnz", "ARD nnz",
         "cvfs s", "ARD s"], table,
        title=f"learned noise variance / truth, M = {m}, 10 true atoms, {args.seeds} seeds"))
    path = write_json(result_path(__file__), to_jsonable({"n_atoms": m, "seeds": args.seeds,
                                                 "cells": cells}))
    print(f"written {path}")


if __name__ == "__main__":
    main()
