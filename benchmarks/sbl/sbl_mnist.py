"""Screened SBL on real MNIST: screening (the thesis' Figs. 3-4) and classification (Figs. 8-9).

(a) Dictionary of 10,000 unit-norm MNIST training digits (1,000 per digit), 784 x 10,000; targets
    are unit-norm test digits. Per lambda / lambda_max and rule (sphere, dome, W-THT static tests,
    dynamic gap-safe): fraction of atoms screened in the weighted lasso (the first SBL step),
    speed-up (t_screen + t_reduced) / t_original (< 1 is faster) and max |theta_o - theta_s| at
    relative gap 1e-8, screened and unscreened runs side by side, averaged over the targets; then
    whole SBL runs (5 reweighting steps) per rule on one target.
(b) ``SBLClassifier``: Monte Carlo over ``--repeats`` draws of the dictionary (1,000 per digit) and
    of ``--n-test`` test digits (from the first half of the MNIST test set), accuracy +- s.e. of
    the repeats per lambda / lambda_max for the rules "abs" (eq. 60-61) and "residual" (one coding
    per image serves both). The best ratio (rule "abs") is then evaluated on ``--n-final`` other
    test digits (second half of the test set) with the first repeat's dictionary, beside
    scikit-learn's LogisticRegression, LinearSVC and kNN (k=1..5, on the same unit-norm atoms)
    trained on the same 10,000 images, each timed end to end (fit + predict, CPU). The per-sample
    coding through the dictionary (no screening, gap-safe, W-THT) and the batched coding in atom
    space over the dictionary's Gram matrix (what ``SBLClassifier`` uses) are timed on
    ``--n-timing`` digits at the best ratio and at the largest ratio within one s.e. of it.

    python benchmarks/sbl/sbl_mnist.py [--quick] [--repeats 5] [--n-test 100] [--n-final 1000]

Single-threaded (BLAS pinned to one thread). Writes benchmarks/results/sbl/sbl_mnist.json.
"""

import argparse
import contextlib
import io
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
from benchmarks.sbl.sbl_screening import RULES, lasso_rows, sbl_rows
from cvfs import SBLClassifier
from cvfs.core.sbl import weighted_lasso
from cvfs.core.sbl_batch import GramDictionary
from cvfs.core.sbl_classify import class_scores, sbl_codes
from cvfs.datasets import load_mnist

RATIOS = [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]


def load():
    Xtr, ytr = load_mnist("train", flatten=True)
    Xte, yte = load_mnist("test", flatten=True)
    return Xtr.astype(np.float64), ytr, Xte.astype(np.float64), yte


def screening_part(clf, Xte, n_targets, ratios, rng):
    """Figs. 3-4 on the classifier's 784 x 10,000 dictionary."""
    Phi = clf.dictionary_
    targets = rng.choice(Xte.shape[0], n_targets, replace=False)
    per_target = []
    for t in targets:
        y = Xte[t] / np.linalg.norm(Xte[t])
        with contextlib.redirect_stdout(io.StringIO()):
            per_target.append(lasso_rows("mnist", Phi, y, False, ratios, 1))
    rows, table = [], []
    for i, ratio in enumerate(ratios):
        row = {"ratio": ratio, "t_original": float(np.mean([p[i]["t_original"]
                                                            for p in per_target])),
               "nnz": float(np.mean([p[i]["nnz"] for p in per_target]))}
        cells = [f"{ratio:.1f}", f"{row['nnz']:.0f}", f"{row['t_original']:.4f}"]
        for rule in (*RULES, "gap"):
            v = {k: float(np.mean([p[i][rule][k] for p in per_target]))
                 for k in ("screened", "speedup")}
            v["max_dtheta"] = float(max(p[i][rule]["max_dtheta"] for p in per_target))
            row[rule] = v
            cells += [f"{100 * v['screened']:.1f}", f"{v['speedup']:.2f}",
                      f"{v['max_dtheta']:.0e}"]
        rows.append(row)
        table.append(cells)
    heads = ["ratio", "nnz", "t_orig s"]
    for r in (*RULES, "gap"):
        heads += [f"{r} scr%", "t_r/t", "max|dθ|"]
    print(format_table(heads, table, title=f"(a) weighted lasso on MNIST 784 x {Phi.shape[1]}, "
                       f"mean of {n_targets} test digits, relative gap 1e-8"))
    y = Xte[targets[0]] / np.linalg.norm(Xte[targets[0]])
    sbl = sbl_rows("mnist", Phi, y, False, [0.1, 0.3, 0.5, 0.7])
    return {"targets": targets.tolist(), "lasso": rows, "sbl": sbl}


def code_and_score(clf, X, ratio, screening="gap", gram=None):
    """Codes of X at one ratio (timed; in atom space over ``gram`` if given, else per sample
    through the dictionary) and the predictions of both rules."""
    t0 = time.process_time()
    codes, lams = sbl_codes(clf.dictionary_, X, ratio, screening=screening,
                            max_iter=clf.max_reweight, tol=clf.tol, lasso_tol=clf.lasso_tol,
                            gram=gram)
    sec = time.process_time() - t0
    pred = {rule: clf.classes_[np.argmax(class_scores(clf.dictionary_, X, codes, lams,
                                                      clf.atom_labels_, clf.classes_.size,
                                                      rule)[0], axis=1)]
            for rule in ("abs", "residual")}
    return pred, sec, float(np.mean([c[0].size for c in codes]))


def monte_carlo(Xtr, ytr, Xte, yte, repeats, n_test, ratios, n_atoms):
    """Accuracy per repeat x ratio x rule on the first half of the test set."""
    half = Xte.shape[0] // 2
    acc = {r: np.zeros((repeats, len(ratios))) for r in ("abs", "residual")}
    secs = np.zeros((repeats, len(ratios)))
    nnz = np.zeros((repeats, len(ratios)))
    bar = tqdm(total=repeats * len(ratios), desc="Monte Carlo (repeat x ratio)")
    for rep in range(repeats):
        clf = SBLClassifier(n_atoms=n_atoms, random_state=rep).fit(Xtr, ytr)
        gram = GramDictionary(clf.dictionary_)
        pick = np.random.default_rng(1000 + rep).choice(half, n_test, replace=False)
        for j, ratio in enumerate(ratios):
            pred, secs[rep, j], nnz[rep, j] = code_and_score(clf, Xte[pick], ratio, gram=gram)
            for rule in acc:
                acc[rule][rep, j] = np.mean(pred[rule] == yte[pick])
            bar.update()
    bar.close()
    return acc, secs / n_test, nnz


def mean_se(a):
    se = a.std(axis=0, ddof=1) / np.sqrt(a.shape[0]) if a.shape[0] > 1 else np.zeros(a.shape[1])
    return a.mean(axis=0), se


def binomial_se(p, n):
    return float(np.sqrt(p * (1 - p) / n))


def baselines(Xtr, ytr, Xte, yte):
    """Peers trained on the dictionary's images, evaluated on the final test digits."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.svm import LinearSVC

    def unit(X):
        return X / np.linalg.norm(X, axis=1, keepdims=True)

    peers = [("LogisticRegression (pixels)", LogisticRegression(max_iter=300), False),
             ("LinearSVC (pixels)", LinearSVC(), False)]
    peers += [(f"kNN k={k} (unit-norm atoms)", KNeighborsClassifier(k), True)
              for k in range(1, 6)]
    out = []
    for name, est, norm in peers:
        A, B = (unit(Xtr), unit(Xte)) if norm else (Xtr, Xte)
        t0 = time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(A, ytr)
        t_fit = time.process_time() - t0
        t0 = time.process_time()
        acc = float(np.mean(est.predict(B) == yte))
        t_pred = time.process_time() - t0
        out.append({"method": name, "accuracy": acc, "se": binomial_se(acc, len(yte)),
                    "fit_s": t_fit, "predict_s_per_image": t_pred / len(yte)})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="1 repeat x 5 ratios x 30 test digits, 200 final digits, 1 target")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--n-test", type=int, default=100)
    ap.add_argument("--n-final", type=int, default=1000)
    ap.add_argument("--n-targets", type=int, default=3)
    ap.add_argument("--n-timing", type=int, default=30,
                    help="test digits timed with and without screening")
    args = ap.parse_args(argv)
    ratios = RATIOS
    if args.quick:
        args.repeats, args.n_test, args.n_final, args.n_targets, args.n_timing = 1, 30, 200, 1, 20
        ratios = [0.05, 0.1, 0.3, 0.5, 0.8]
    limit_threads()
    weighted_lasso(np.eye(3), np.ones(3), np.full(3, 0.1))  # JIT warm-up
    t_start = time.perf_counter()
    Xtr, ytr, Xte, yte = load()
    n_atoms = 10_000
    clf0 = SBLClassifier(n_atoms=n_atoms, random_state=0).fit(Xtr, ytr)
    out = {"scale": {"repeats": args.repeats, "n_test": args.n_test, "ratios": ratios,
                     "n_final": args.n_final, "n_atoms": n_atoms,
                     "max_reweight": clf0.max_reweight, "lasso_tol": clf0.lasso_tol}}
    out["screening"] = screening_part(clf0, Xte, args.n_targets,
                                      [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
                                      np.random.default_rng(7))

    acc, sec, nnz = monte_carlo(Xtr, ytr, Xte, yte, args.repeats, args.n_test, ratios, n_atoms)
    m_abs, se_abs = mean_se(acc["abs"])
    m_res, se_res = mean_se(acc["residual"])
    table = [[f"{r:.2f}", f"{100 * a:.1f} ± {100 * s:.1f}", f"{100 * b:.1f} ± {100 * t:.1f}",
              f"{nz:.1f}", f"{1000 * ts:.0f}"]
             for r, a, s, b, t, nz, ts in zip(ratios, m_abs, se_abs, m_res, se_res,
                                               nnz.mean(axis=0), sec.mean(axis=0), strict=True)]
    print(format_table(["λ/λmax", "acc % abs", "acc % residual", "atoms used", "ms/image"],
                       table, title=f"(b) SBLClassifier on MNIST: {args.repeats} repeats x "
                       f"{args.n_test} test digits, dictionary 784 x {n_atoms}, gap-safe "
                       f"screening, {clf0.max_reweight} reweighting steps"))
    best = int(np.argmax(m_abs))
    within = [j for j in range(len(ratios)) if m_abs[j] >= m_abs[best] - se_abs[best]]
    fast = max(within, key=lambda j: ratios[j])
    out["monte_carlo"] = {"ratios": ratios, "acc_abs": acc["abs"], "acc_residual":
                          acc["residual"], "sec_per_image": sec, "atoms_used": nnz,
                          "best_ratio": ratios[best], "ratio_within_1se": ratios[fast]}

    # final test digits: second half of the test set, first repeat's dictionary
    half = Xte.shape[0] // 2
    final = half + np.random.default_rng(99).choice(Xte.shape[0] - half, args.n_final,
                                                    replace=False)
    Xf, yf = Xte[final], yte[final]
    rows, finals = [], []
    for rule in ("abs", "residual"):  # the estimator end to end: fit + predict, CPU time
        t0 = time.process_time()
        est = SBLClassifier(lam=ratios[best], rule=rule, n_atoms=n_atoms, random_state=0)
        est.fit(Xtr, ytr)
        t_fit = time.process_time() - t0
        p = est.predict(Xf)
        t_pred = time.process_time() - t0 - t_fit
        a = float(np.mean(p == yf))
        finals.append({"method": f"SBLClassifier {rule} λ/λmax={ratios[best]}", "accuracy": a,
                       "se": binomial_se(a, len(yf)), "fit_s": t_fit,
                       "predict_s_per_image": t_pred / len(yf),
                       "fit_predict_s_per_image": (t_fit + t_pred) / len(yf)})
    peers = baselines(Xtr[clf0.atom_index_], ytr[clf0.atom_index_], Xf, yf)
    for r in finals + peers:
        r.setdefault("fit_predict_s_per_image", r["fit_s"] / len(yf) + r["predict_s_per_image"])
        rows.append([r["method"], f"{100 * r['accuracy']:.1f} ± {100 * r['se']:.1f}",
                     f"{r['fit_s']:.2f}", f"{1000 * r['predict_s_per_image']:.1f}",
                     f"{1000 * r['fit_predict_s_per_image']:.1f}"])
    print(format_table(["method", "accuracy %", "fit s", "predict ms/image",
                        "fit+predict ms/image"], rows,
                       title=f"{args.n_final} other MNIST test digits, trained on the same "
                       f"{n_atoms} images"))
    out["final"] = finals + peers

    # per-sample coding through the dictionary (with each screening rule) against the batched
    # coding in atom space over the Gram matrix, whose construction is timed separately
    Xt = Xf[:args.n_timing]
    t0 = time.process_time()
    gram0 = GramDictionary(clf0.dictionary_)
    t_gram = time.process_time() - t0
    timing = []
    for j in sorted({best, fast}):
        secs = {str(rule): code_and_score(clf0, Xt, ratios[j], screening=rule)[1]
                for rule in (None, "gap", "wtht")}
        pred_b, secs["batched"], _ = code_and_score(clf0, Xt, ratios[j], gram=gram0)
        pred_p = code_and_score(clf0, Xt, ratios[j])[0]
        secs["same_predictions"] = float(np.mean(pred_b["abs"] == pred_p["abs"]))
        timing.append({"ratio": ratios[j], "gram_s": t_gram, **secs})
    print(format_table(
        ["λ/λmax", "per sample, no screening ms", "gap-safe ms", "W-THT ms",
         "batched (Gram) ms", "same predictions"],
        [[f"{t['ratio']:.2f}", f"{1000 * t['None'] / len(Xt):.1f}",
          f"{1000 * t['gap'] / len(Xt):.1f}", f"{1000 * t['wtht'] / len(Xt):.1f}",
          f"{1000 * t['batched'] / len(Xt):.1f}", f"{100 * t['same_predictions']:.0f} %"]
         for t in timing],
        title=f"SBLClassifier coding CPU time per digit ({len(Xt)} digits); the Gram matrix "
              f"of the {n_atoms} atoms takes {t_gram:.1f} s once"))
    out["timing"] = timing
    out["total_seconds"] = time.perf_counter() - t_start
    path = write_json(result_path(__file__, "sbl_mnist_quick" if args.quick else None),
                      to_jsonable(out))
    print(f"\ntotal {out['total_seconds']:.0f} s; written {path}")


if __name__ == "__main__":
    main()
