"""FSA's linear row pass on a row-major working matrix: the numba row kernels against the
equivalent BLAS products.

One pass of a row-separable loss over an (N, W) working matrix computes the scores, the loss and
its derivatives d, the power-iteration products t, and the raw gradient sums X^T d and X^T t,
over ~512 KiB row blocks:

* row kernels (``cvfs.core._kernels._linear_row_pass``, what ``row_pass`` runs): both dot
  products of a row in one in-order read of it (four rows per sweep of w and v above
  ``ROW_SWEEP_WIDTH`` columns), then the two sums four rows per sweep while the block is in L2;
* BLAS (``blas_pass`` below): two products per block, X_b W2 with
  W2 = [w, v], then X_b^T [d, t].

For each (dtype, N, W) this prints the time of one pass by each (best of ``--repeats``, two
alternations), in GB/s of the matrix (X.nbytes / time), next to the streaming rate of ``X @ b``
on the same matrix (the bandwidth ``benchmarks/scale/scaling.py`` divides by). Single thread. JSON:
``--out``.

    python benchmarks/fsa/row_kernels.py --out benchmarks/results/fsa/row_kernels.json
"""

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from benchmarks._bench import best_time, format_table, limit_threads, write_json


def _blas_pass():
    """The BLAS version of ``_linear_row_pass`` (compiled on first use)."""
    from numba import njit

    from cvfs.core import _kernels as K

    @njit(cache=False)
    def blas_pass(X, y, W2, z0, t0, loss, acc):
        N = X.shape[0]
        R = K._block_rows(X)
        D = np.empty((R, 2), dtype=X.dtype)
        zb = np.empty(R)
        db = np.empty(R)
        lsum = 0.0
        for r0 in range(0, N, R):
            r1 = min(N, r0 + R)
            nb = r1 - r0
            Xb = X[r0:r1]
            Z = np.dot(Xb, W2)
            for i in range(nb):
                zb[i] = Z[i, 0] + z0
            lsum += K.loss_rows(loss, zb[:nb], y[r0:r1], db)
            for i in range(nb):
                D[i, 0] = db[i]
                D[i, 1] = Z[i, 1] + t0
            acc += np.dot(Xb.T, D[:nb])
        return lsum

    return blas_pass


def one_case(dtype, n, w, repeats, track, blas_pass, seed=0):
    """Times of one pass by each implementation and of X @ b on an (n, w) matrix."""
    from cvfs.core import _kernels as K
    from cvfs.core.losses import get_loss

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, w), dtype=np.float64).astype(dtype)
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    loss = get_loss("logistic")
    W2 = np.ascontiguousarray((rng.standard_normal((w, 2)) * 0.01).astype(dtype))
    if not track:
        W2[:, 1] = 0
    b = W2[:, 0].copy()
    acc = np.zeros((w, 2))

    def rows():
        K._linear_row_pass(X, y, W2, 0.1, 0.0, loss, track, acc)

    def blas():
        blas_pass(X, y, W2, 0.1, 0.0, loss, acc)

    t_rows, t_blas, t_xb = np.inf, np.inf, np.inf
    for _ in range(2):  # alternate, keep the best of each
        t_rows = min(t_rows, best_time(rows, repeats))
        t_blas = min(t_blas, best_time(blas, repeats))
        t_xb = min(t_xb, best_time(lambda: X @ b, repeats))
    gb = X.nbytes / 1e9
    return {"dtype": np.dtype(dtype).name, "n": n, "w": w, "track": track, "nbytes": X.nbytes,
            "t_rows": t_rows, "t_blas": t_blas, "t_xb": t_xb, "gbs_rows": gb / t_rows,
            "gbs_blas": gb / t_blas, "gbs_xb": gb / t_xb, "blas_over_rows": t_blas / t_rows}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", type=int, nargs="+",
                    default=[30, 64, 100, 200, 500, 1000, 2000, 3000, 4500, 10788, 45546])
    ap.add_argument("--n32", type=float, default=1e5, help="rows of the float32 (streamed) cases")
    ap.add_argument("--wide-bytes", type=float, default=6e8,
                    help="float32 cases wider than 4500 columns get this many bytes of rows")
    ap.add_argument("--n64", type=int, nargs="+", default=[300, 1000],
                    help="rows of the float64 (cache-resident, Table II sizes) cases")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    limit_threads()
    cases = [(np.float32, int(args.n32) if w <= 4500 else int(args.wide_bytes // (4 * w)), w)
             for w in args.widths]
    cases += [(np.float64, n, w) for n in args.n64 for w in args.widths if w <= 1000]
    from tqdm.auto import tqdm

    blas_pass = _blas_pass()
    results = []
    for dtype, n, w in tqdm(cases, desc="row kernels", leave=False):
        for track in (True, False):
            results.append(one_case(dtype, n, w, args.repeats, track, blas_pass))
    rows = [[r["dtype"], r["n"], r["w"], "yes" if r["track"] else "no", f"{r['nbytes'] / 1e6:.1f}",
             f"{r['gbs_rows']:.1f}", f"{r['gbs_blas']:.1f}", f"{r['gbs_xb']:.1f}",
             f"{r['blas_over_rows']:.2f}"] for r in results]
    print(format_table(["dtype", "N", "W", "track", "MB", "row kernels GB/s", "BLAS GB/s",
                        "X @ b GB/s", "BLAS time / row-kernel time"], rows,
                       title="One linear row pass (logistic), single thread, best of repeats"))
    if args.out:
        write_json(args.out, {"argv": sys.argv[1:], "results": results})
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
