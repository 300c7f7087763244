"""PCD of FSA against fixed step sizes on the paper's classification cells (an exploration).

``synthetic_tables.py`` runs FSA with its defaults only (``learning_rate=None``: the automatic
step 1 / (c_loss * lam + L_prior) of ``cvfs.core.fsa``). This script shows what fixed steps
would give on the same data, to judge that default: for each cell of Tables II and III with
M = 1000 and each (loss, learning_rate) in ``GRID`` (``None`` = the default), the mean PCD over
``--runs`` training sets (run r: ``make_ar1_classification(N, 1000, k, noise, random_state=r)``,
``FSAClassifier(k, loss, learning_rate, random_state=0)``). No test set, no timing.

Run ``python benchmarks/fsa/step_sizes.py --runs 20``; prints one row per (loss, step) and writes
JSON (``--out``).
"""

import argparse
import sys
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from benchmarks._bench import (
    format_table,
    fsa_estimator,
    limit_threads,
    machine_info,
    result_path,
    write_json,
)

CELLS = [("II", 300, 10, 0.0), ("II", 1000, 10, 0.0), ("II", 1000, 30, 0.0),
         ("II", 3000, 30, 0.0), ("III", 300, 10, 0.1), ("III", 1000, 10, 0.1),
         ("III", 1000, 30, 0.1), ("III", 3000, 30, 0.1)]
GRID = {"logistic": [None, 1.0, 2.0, 5.0, 20.0], "lorenz": [None, 0.3, 1.0, 3.0],
        "svm": [None, 0.3, 1.0, 3.0]}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--out", default=str(result_path(__file__)))
    args = p.parse_args(argv)
    limit_threads()
    from cvfs.datasets.synthetic import make_ar1_classification

    pcd = {}
    for table, n, k, noise in tqdm(CELLS, desc="cells"):
        data = [make_ar1_classification(n, 1000, k, noise=noise, random_state=r)
                for r in range(args.runs)]
        for loss, steps in GRID.items():
            for lr in steps:
                found = []
                for X, y, true in data:
                    est = fsa_estimator(loss, k, 0, learning_rate=lr).fit(X, y)
                    found.append(100.0 * int(est.support_[true].sum()) / k)
                pcd[(table, n, k, loss, lr)] = float(np.mean(found))
    headers = ["loss", "step", *[f"{t} {n}/{k}" for t, n, k, _ in CELLS]]
    rows = [[loss, "default" if lr is None else f"{lr:g}",
             *[f"{pcd[(t, n, k, loss, lr)]:.1f}" for t, n, k, _ in CELLS]]
            for loss, steps in GRID.items() for lr in steps]
    print(format_table(headers, rows, title=f"FSA PCD by fixed step size, M=1000, "
                       f"{args.runs} runs per cell (columns: table N/k)"))
    write_json(args.out, {"meta": {**machine_info(), "runs": args.runs},
                          "cells": [{"table": t, "n": n, "k": k, "noise": z} for t, n, k, z
                                    in CELLS],
                          "pcd": [{"table": t, "n": n, "k": k, "loss": loss,
                                   "learning_rate": lr, "pcd": v}
                                  for (t, n, k, loss, lr), v in pcd.items()]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
