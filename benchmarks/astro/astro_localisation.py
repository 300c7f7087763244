"""Source localisation on synthetic 28x28 scenes (4-8 sources, sigma in [1, 2], peak SNR 5-50)
and on larger crowded scenes: screened SBL (cvfs) against sep, photutils DAOStarFinder and
photutils PSF photometry. Prints a table and writes
benchmarks/results/astro/astro_localisation.json.

    python benchmarks/astro/astro_localisation.py [--n 30] [--crowded 5] [--sparse 20]
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
from benchmarks.astro._common import run_dao, run_psf_photometry, run_sep, scenes
from cvfs import astro


def evaluate(name, fn, data):
    rows, times = [], []
    for img, _, truth in data:
        t0 = time.perf_counter()
        cat = fn(img)
        times.append(time.perf_counter() - t0)
        s = astro.detection_scores(cat, truth)
        s["giou"] = astro.group_iou(cat, truth)
        s["sq_err"] = s["rmse"] ** 2 * s["tp"] if s["tp"] else 0.0
        rows.append(s)
    tp = sum(r["tp"] for r in rows)
    return {
        "method": name,
        "f1": float(np.mean([r["f1"] for r in rows])),
        "precision": float(np.mean([r["precision"] for r in rows])),
        "recall": float(np.mean([r["recall"] for r in rows])),
        "rmse": float(np.sqrt(sum(r["sq_err"] for r in rows) / max(tp, 1))),
        "flux_error": float(np.nanmedian([r["flux_error"] for r in rows])),
        "group_iou": float(np.mean([r["giou"] for r in rows])),
        "t_median": float(np.median(times)),
        "t_max": float(np.max(times)),
    }


def table(title, results):
    print(f"\n{title}")
    print(f"{'method':<22}{'F1':>7}{'P':>7}{'R':>7}{'RMSE px':>9}{'flux err':>10}{'gIoU':>7}"
          f"{'t med s':>9}{'t max s':>9}")
    for r in results:
        print(f"{r['method']:<22}{r['f1']:7.3f}{r['precision']:7.3f}{r['recall']:7.3f}"
              f"{r['rmse']:9.3f}{r['flux_error']:10.3f}{r['group_iou']:7.3f}{r['t_median']:9.3f}"
              f"{r['t_max']:9.3f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=30, help="number of 28x28 scenes")
    ap.add_argument("--crowded", type=int, default=5, help="number of 64x64 crowded scenes")
    ap.add_argument("--sparse", type=int, default=20,
                    help="number of 28x28 scenes with well-separated sources (>= 5 px, 3 px from "
                         "the edges), the peers' comfort zone")
    args = ap.parse_args(argv)
    methods = [
        ("cvfs SBL (screened)", lambda im: astro.localise(im, random_state=0)),
        ("photutils PSF phot", run_psf_photometry),
        ("photutils DAOFind", run_dao),
        ("sep", run_sep),
    ]
    astro.localise(scenes(1)[0][0], random_state=0)  # JIT warm-up, not timed
    sets = [
        ("small", args.n, dict(seed0=1000),
         f"{args.n} synthetic 28x28 scenes (4-8 sources, sigma 1-2 px, peak SNR 5-50, "
         "min separation 2 px)"),
        ("crowded", args.crowded, dict(seed0=5000, shape=(64, 64), n_sources=(30, 40)),
         f"{args.crowded} crowded 64x64 scenes (30-40 sources)"),
        ("sparse", args.sparse, dict(seed0=7000, min_separation=5.0, border=3.0),
         f"{args.sparse} well-separated 28x28 scenes (4-8 sources, min separation 5 px, 3 px "
         "from the edges)"),
    ]
    res, crlb = {}, {}
    for key, count, kwargs, title in sets:
        if count <= 0:
            res[key] = []
            continue
        imgs = scenes(count, **kwargs)
        res[key] = [evaluate(n, f, imgs) for n, f in methods]
        table(title, res[key])
        # no unbiased estimator beats this pooled position error on these scenes
        bounds = np.concatenate([astro.position_crlb(truth, img.shape,
                                                     kwargs.get("noise_sigma", 1.0))
                                 for img, _, truth in imgs])
        crlb[key] = float(np.sqrt(np.mean(bounds**2)))
        print(f"{'Cramer-Rao bound':<22}{'':>28}{crlb[key]:>9.3f}  (pooled position RMSE)")
    res_small, res_crowded, res_sparse = res["small"], res["crowded"], res["sparse"]
    path = write_json(result_path(__file__), {"small": res_small, "crowded": res_crowded,
                                             "sparse": res_sparse, "crlb_rmse": crlb,
                                             "n_small": args.n,
                                             "n_crowded": args.crowded, "n_sparse": args.sparse})
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
