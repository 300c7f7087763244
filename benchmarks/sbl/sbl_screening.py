"""Screening of the weighted lasso / SBL on 784 x 10,000 dictionaries (the thesis' Figs. 3-6).

For lambda / lambda_max in {0.1, ..., 0.9} and each rule (sphere, dome, W-THT static tests, and
dynamic gap-safe screening): fraction of atoms screened, speed-up
(t_screen + t_reduced) / t_original (the thesis' t_r / t; < 1 is faster), and
max |theta_o - theta_s| at relative duality gap 1e-8. The solver is the same working-set
coordinate descent in every case; t_original is it without any screening. Dictionaries:

- ``digits``: scikit-learn's bundled ``load_digits`` (1,797 8x8 images) upsampled to 28 x 28 and
  augmented by random shifts (+-2 px) and rotations (+-12 deg) to 10,000 unit-norm atoms; y is an
  augmented digit not in the dictionary; signed lasso;
- ``psf``: 10,000 unit-norm integrated-Gaussian PSF atoms (sigma 1-2 px); y a synthetic 28 x 28
  star field minus its background; nonnegative lasso;
- ``text`` (``--dictionaries text``): a scipy.sparse bag-of-words-like dictionary of the thesis'
  NYTW shape, 5,000 words x 50,000 documents at 0.3% density with Zipf word frequencies
  (``text_dictionary``); y another document; signed lasso.

Also: whole SBL runs (5 reweighting steps) per rule at lambda = (ratio * lambda_max)^2.

    python benchmarks/sbl/sbl_screening.py [--ratios 0.1 0.2 ...] [--repeat 2] [--dictionaries text]
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from benchmarks._bench import result_path, write_json
from cvfs.core.sbl import sbl_fit, weighted_lasso
from cvfs.core.screening import as_operator, static_test

RULES = ("sphere", "dome", "wtht")


def digits_dictionary(n_atoms=10_000, seed=0):
    from scipy import ndimage
    from skimage.transform import resize
    from sklearn.datasets import load_digits

    rng = np.random.default_rng(seed)
    imgs = load_digits().images / 16.0
    big = np.array([resize(im, (28, 28), order=1, anti_aliasing=False) for im in imgs])

    def augment(im):
        im = ndimage.rotate(im, rng.uniform(-12, 12), reshape=False, order=1)
        return ndimage.shift(im, rng.uniform(-2, 2, 2), order=1)

    cols = [big[i % len(big)] if i < len(big) else augment(big[rng.integers(len(big))])
            for i in range(n_atoms)]
    Phi = np.array([c.ravel() for c in cols]).T
    Phi /= np.linalg.norm(Phi, axis=0)
    y = augment(big[rng.integers(len(big))]).ravel()
    return Phi, y / np.linalg.norm(y)


def psf_dictionary(n_atoms=10_000, seed=0):
    from cvfs.astro import PSFDictionary, make_scene, sample_atoms

    D = PSFDictionary((28, 28), sample_atoms((28, 28), n_atoms, random_state=seed))
    img, _, _ = make_scene(random_state=seed + 7, background=0.0)
    return np.ascontiguousarray(D.matrix()), img.ravel() / np.linalg.norm(img)


def text_dictionary(n_words=5_000, n_docs=50_000, density=0.003, seed=0):
    """A bag-of-words-like sparse dictionary of the thesis' NYTW shape (5,000 words x 50,000
    documents; the NYTimes corpus has 0.3% non-zeros), as scipy.sparse CSC: word w appears in a
    document with probability proportional to a Zipf law 1 / (w + 10) (mean density
    ``density``), with a count 1 + Geometric(0.5); documents (columns) have unit norm. y is one
    more document, not in the dictionary. No text corpus ships offline with the installed
    packages, hence the random stand-in."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    p = 1.0 / (np.arange(n_words) + 10.0)
    p *= density * n_words / p.sum()
    p = np.minimum(p, 0.5)
    cols = n_docs + 1
    nnz_per_word = rng.binomial(cols, p)
    rows = np.repeat(np.arange(n_words), nnz_per_word)
    docs = np.concatenate([rng.choice(cols, n, replace=False) for n in nnz_per_word])
    counts = 1.0 + rng.geometric(0.5, rows.size) - 1.0
    A = sp.csc_matrix((counts, (rows, docs)), shape=(n_words, cols))
    norms = np.sqrt(np.asarray(A.multiply(A).sum(axis=0))).ravel()
    A = A @ sp.diags(1.0 / np.maximum(norms, 1e-300))
    A = sp.csc_matrix(A)
    keep = np.flatnonzero(norms[:-1] > 0)
    y = A[:, -1].toarray().ravel()
    return A[:, keep], y


def best_time(fn, repeat):
    out, best = None, np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return out, best


def lasso_rows(name, Phi, y, positive, ratios, repeat):
    op = as_operator(Phi)
    norms = op.column_norms()
    rho = Phi.T @ y
    lmax = float(np.max(rho if positive else np.abs(rho)))
    rows = []
    for ratio in ratios:
        pen = np.full(Phi.shape[1], ratio * lmax)
        ref, t_o = best_time(lambda pen=pen: weighted_lasso(op, y, pen, positive=positive,
                                                            gap_safe=False, tol=1e-8), repeat)
        row = {"dict": name, "ratio": ratio, "t_original": t_o,
               "nnz": int(np.count_nonzero(ref.coef))}
        for rule in RULES:
            keep, t_s = best_time(lambda rule=rule, pen=pen: static_test(
                rule, op, rho, norms, pen, y, positive), repeat)
            red, t_r = best_time(lambda keep=keep, pen=pen: weighted_lasso(
                op, y, pen, positive=positive, gap_safe=False, keep=keep, tol=1e-8), repeat)
            row[rule] = {"screened": float(1 - keep.mean()), "speedup": (t_s + t_r) / t_o,
                         "max_dtheta": float(np.max(np.abs(red.coef - ref.coef))),
                         "active_screened": int(np.sum((ref.coef != 0) & ~keep))}
        dyn, t_g = best_time(lambda pen=pen: weighted_lasso(op, y, pen, positive=positive,
                                                            gap_safe=True, tol=1e-8), repeat)
        row["gap"] = {"screened": dyn.n_screened / Phi.shape[1], "speedup": t_g / t_o,
                      "max_dtheta": float(np.max(np.abs(dyn.coef - ref.coef))),
                      "active_screened": 0}
        rows.append(row)
        print_row(row)
    return rows


def print_header(title):
    print(f"\n{title}")
    head = f"{'ratio':>6}{'nnz':>6}{'t_orig s':>10}"
    for r in (*RULES, "gap"):
        head += f" | {r + ' scr%':>10}{'t_r/t':>7}{'max|dθ|':>9}"
    print(head)


def print_row(row):
    line = f"{row['ratio']:6.1f}{row['nnz']:6d}{row['t_original']:10.4f}"
    for r in (*RULES, "gap"):
        v = row[r]
        line += f" | {100 * v['screened']:10.1f}{v['speedup']:7.2f}{v['max_dtheta']:9.1e}"
    print(line, flush=True)


def sbl_rows(name, Phi, y, positive, ratios):
    rho = Phi.T @ y
    lmax = float(np.max(rho if positive else np.abs(rho)))
    print(f"\nSBL, 5 reweighting steps, {name}: time s (mean % screened per step), "
          "max |dθ| vs no screening")
    print(f"{'ratio':>6}" + "".join(f"{str(r):>26}" for r in (None, *RULES, "gap")))
    rows = []
    import warnings

    for ratio in ratios:
        lam = (ratio * lmax) ** 2
        res = {}
        for rule in (None, *RULES, "gap"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                out = sbl_fit(Phi, y, lam, screening=rule, positive=positive, max_iter=5,
                              lasso_tol=1e-8)
                res[str(rule)] = {"time": time.perf_counter() - t0,
                                  "screened": float(np.mean(out.screening)), "coef": out.coef}
        ref = res["None"]["coef"]
        line = f"{ratio:6.1f}"
        for v in res.values():
            v["max_dtheta"] = float(np.max(np.abs(v.pop("coef") - ref)))
            line += f"{v['time']:9.3f} ({100 * v['screened']:4.0f}%) {v['max_dtheta']:7.0e}"
        print(line, flush=True)
        rows.append({"dict": name, "ratio": ratio, **res})
    return rows


DICTIONARIES = {"digits": (digits_dictionary, False), "psf": (psf_dictionary, True),
                "text": (text_dictionary, False)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ratios", type=float, nargs="+",
                    default=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--sbl-ratios", type=float, nargs="+", default=[0.1, 0.3, 0.5, 0.7])
    ap.add_argument("--dictionaries", nargs="+", choices=sorted(DICTIONARIES),
                    default=["digits", "psf"])
    args = ap.parse_args(argv)
    weighted_lasso(np.eye(3), np.ones(3), np.full(3, 0.1))  # JIT warm-up
    out = {"lasso": [], "sbl": []}
    for name in args.dictionaries:
        make, positive = DICTIONARIES[name]
        Phi, y = make()
        print_header(f"weighted lasso, {name} dictionary {Phi.shape[0]}x{Phi.shape[1]}, "
                     f"{'nonnegative' if positive else 'signed'}, relative gap 1e-8")
        out["lasso"] += lasso_rows(name, Phi, y, positive, args.ratios, args.repeat)
        out["sbl"] += sbl_rows(name, Phi, y, positive, args.sbl_ratios)
    name = None if args.dictionaries == ["digits", "psf"] else \
        "sbl_screening_" + "_".join(args.dictionaries)
    path = write_json(result_path(__file__, name), out)
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
