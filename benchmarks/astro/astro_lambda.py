"""Sensitivity of source localisation to lambda / sigma^2 (the rule lambda = c sigma^2).

Held-out scenes (seeds 3000+, not used by astro_localisation.py): F1 within 1 px and position
RMSE of the full pipeline and of the raw SBL atoms (grouped, no continuous refinement), for
c in {1, 2, 4, ..., 256}. Writes benchmarks/results/astro/astro_lambda.json and astro_lambda.png.

    python benchmarks/astro/astro_lambda.py [--n 20]
"""

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from benchmarks._bench import result_path, write_json
from benchmarks.astro._common import scenes
from cvfs import astro
from cvfs.viz import save_figure
from cvfs.viz.astro import plot_lambda_sensitivity

FIGURE = result_path(__file__, suffix=".png")


def score(data, **kw):
    f1, sq, tp = [], 0.0, 0
    for img, _, truth in data:
        s = astro.detection_scores(astro.localise(img, random_state=0, **kw), truth)
        f1.append(s["f1"])
        if s["tp"]:
            sq += s["rmse"] ** 2 * s["tp"]
            tp += s["tp"]
    return float(np.mean(f1)), float(np.sqrt(sq / max(tp, 1)))


def plot(rows):
    ax = plot_lambda_sensitivity(
        [r["factor"] for r in rows], {"full pipeline": [r["f1"] for r in rows],
                                      "SBL atoms (no refinement)": [r["f1_sbl"] for r in rows]},
        chosen=astro.LAMBDA_FACTOR)
    FIGURE.parent.mkdir(parents=True, exist_ok=True)
    save_figure(ax.figure, FIGURE)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--factors", type=float, nargs="+",
                    default=[1, 2, 4, 8, 16, 32, 64, 128, 256])
    ap.add_argument("--replot", action="store_true",
                    help="redraw the figure from results/astro_lambda.json (no runs)")
    args = ap.parse_args(argv)
    if args.replot:
        import json

        rows = json.loads(result_path(__file__).read_text())["rows"]
        plot(rows)
        return
    data = scenes(args.n, seed0=3000)
    rows = []
    print(f"{args.n} held-out 28x28 scenes; default lambda/sigma^2 = {astro.LAMBDA_FACTOR:g}")
    print(f"{'lambda/sigma^2':>15}{'F1 full':>9}{'RMSE full':>11}{'F1 SBL atoms':>14}"
          f"{'RMSE SBL atoms':>16}")
    for c in args.factors:
        f_full, r_full = score(data, lam_factor=c)
        f_raw, r_raw = score(data, lam_factor=c, refine=False)
        rows.append({"factor": c, "f1": f_full, "rmse": r_full, "f1_sbl": f_raw,
                     "rmse_sbl": r_raw})
        print(f"{c:15g}{f_full:9.3f}{r_full:11.3f}{f_raw:14.3f}{r_raw:16.3f}", flush=True)
    plot(rows)
    path = write_json(result_path(__file__), {"rows": rows, "n": args.n})
    print(f"\nwritten {path} and {FIGURE}")


if __name__ == "__main__":
    main()
