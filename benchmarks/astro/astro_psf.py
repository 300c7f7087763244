"""PSF model on fields whose PSF is not Gaussian: cvfs with the integrated Gaussian
(``psf="gaussian"``, the default) and with the PSF fitted to the frame's stars
(``psf="fitted"``), on fields of pixel-integrated Moffat stars (``astro.render_moffat``).

Per field: ``--size`` px, stars on a grid of 17 px cells jittered by 2 px, fluxes log-uniform in
[400, 12000] (peak SNR about 20-700), background 10, unit Gaussian noise, FWHM ``--fwhm`` and
Moffat exponent beta in ``--betas`` (smaller beta, broader wings). Point-source rows and
extended rows, stars matched within 1 px (nearest point-source row), extra point-source rows,
position RMSE and largest |mean offset| of the matched stars, median flux ratio, CPU s.
Writes benchmarks/results/astro/astro_psf.json.

    python benchmarks/astro/astro_psf.py [--seeds 0 1] [--betas 2.5 3.5 4.5] [--size 160]
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy.spatial import cKDTree

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from benchmarks._bench import format_table, result_path, write_json
from cvfs import astro


def score(xy, pos, flux_rows=None, flux=None):
    """Matched stars, extra rows, RMSE and bias of positions, median flux ratio."""
    out = {"rows": len(xy)}
    if len(xy) == 0:
        return {**out, "matched": 0, "extra": 0, "rmse": np.nan, "bias": np.nan,
                "flux_ratio": np.nan}
    d, j = cKDTree(xy).query(pos)
    ok = d < 1.0
    out["matched"] = int(ok.sum())
    out["extra"] = len(xy) - len(set(j[ok]))
    dxy = xy[j[ok]] - pos[ok]
    out["rmse"] = float(np.sqrt(np.mean(np.sum(dxy**2, 1)))) if ok.any() else np.nan
    out["bias"] = float(np.max(np.abs(dxy.mean(0)))) if ok.any() else np.nan
    out["flux_ratio"] = float(np.median(flux_rows[j[ok]] / flux[ok])) \
        if flux_rows is not None and ok.any() else np.nan
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--betas", type=float, nargs="+", default=[2.5, 3.5, 4.5])
    ap.add_argument("--fwhm", type=float, default=3.2)
    ap.add_argument("--size", type=int, default=160)
    args = ap.parse_args(argv)
    # compile the kernels first (untimed)
    astro.localise(astro.make_moffat_field(64, args.fwhm, 3.5, random_state=0)[0], psf="fitted")
    results = []
    for beta in args.betas:
        for seed in args.seeds:
            img, pos, flux = astro.make_moffat_field(args.size, args.fwhm, beta, random_state=seed)
            for method in ("cvfs gaussian", "cvfs fitted"):
                t = time.process_time()
                res = astro.localise_and_denoise(img, psf=method.split()[1])
                t = time.process_time() - t
                cat = res.catalogue
                pts = cat[~cat["extended"]]
                row = score(np.column_stack([pts["x"], pts["y"]]), pos, pts["flux"], flux)
                row.update(extended=int(cat["extended"].sum()), psf_stars=res.psf_stars)
                row.update(method=method, beta=beta, seed=seed, stars=len(pos), cpu_s=t)
                results.append(row)
                print(f"beta {beta} seed {seed} {method}: {row}", flush=True)
    table = []
    for beta in args.betas:
        for method in ("cvfs gaussian", "cvfs fitted"):
            rs = [r for r in results if r["beta"] == beta and r["method"] == method]
            table.append([f"{beta:g}", method, sum(r["stars"] for r in rs),
                          sum(r["rows"] for r in rs), sum(r["extended"] for r in rs),
                          sum(r["matched"] for r in rs), sum(r["extra"] for r in rs),
                          f"{np.nanmean([r['rmse'] for r in rs]):.3f}",
                          f"{np.nanmax([r['bias'] for r in rs]):.3f}",
                          f"{np.nanmean([r['flux_ratio'] for r in rs]):.3f}",
                          f"{sum(r['cpu_s'] for r in rs):.1f}"])
    print(f"{args.size} x {args.size} Moffat fields (FWHM {args.fwhm:g} px), seeds {args.seeds}")
    print(format_table(["beta", "method", "stars", "rows", "extended", "matched", "extra",
                        "RMSE px", "|bias| px", "flux ratio", "CPU s"], table))
    print(f"written {write_json(result_path(__file__), {'args': vars(args), 'rows': results})}")


if __name__ == "__main__":
    main()
