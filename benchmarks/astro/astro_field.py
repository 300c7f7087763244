"""Large synthetic sky fields: point sources (sigma 1-2 px, peak SNR 5-50) on a sky gradient with
a few extended blobs. cvfs against photutils IterativePSFPhotometry / PSFPhotometry /
DAOStarFinder and sep (each on a Background2D-subtracted image), point-source F1 within 1 px,
position RMSE against the Cramer-Rao bound, false sources away from every true object, CPU time,
and the calibration of cvfs's uncertainties (std of the pulls (x - true) / x_err and
(flux - true) / flux_err over all matched sources). Writes
benchmarks/results/astro/astro_field.json.

    python benchmarks/astro/astro_field.py [--fields 4] [--size 512] [--sources 320]
        [--compare-sbl]  # also cvfs with the fast path off
    python benchmarks/astro/astro_field.py --big  # one 2048 x 2048 frame, 2,000 sources, --jobs 2
"""

import argparse
import resource
import sys
import time
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from tqdm import tqdm

from benchmarks._bench import result_path, write_json
from cvfs import astro
from cvfs.astro.evaluate import match_sources, position_crlb

NOISE = 1.0


def make_field(size, n_sources, seed, n_blobs=5):
    """(image, point-source truth, blob centres): point sources from
    :func:`cvfs.astro.make_scene` plus a sky plane rising 16 noise sigma across the frame and
    elliptical Gaussian blobs (sigma 5-9 px, peak 8-15 noise sigma)."""
    rng = np.random.default_rng(seed)
    img, _, truth = astro.make_scene((size, size), n_sources=n_sources, psf_sigma=(1.0, 2.0),
                                     snr=(5.0, 50.0), noise_sigma=NOISE, background=10.0,
                                     min_separation=2.0, border=3.0, random_state=rng)
    yy, xx = np.mgrid[:size, :size]
    img = img + 16.0 * NOISE * (0.6 * xx + 0.4 * yy) / size
    blobs = rng.uniform(20, size - 20, (n_blobs, 2))
    for bx, by in blobs:
        sx, sy = rng.uniform(5, 9, 2)
        img += rng.uniform(8, 15) * NOISE * np.exp(-0.5 * (((xx - bx) / sx) ** 2
                                                           + ((yy - by) / sy) ** 2))
    return img, truth, blobs


def _background2d(image):
    from photutils.background import Background2D, MedianBackground

    bkg = Background2D(image, (32, 32), filter_size=(3, 3), bkg_estimator=MedianBackground())
    return image - bkg.background, float(np.median(bkg.background_rms))


def run_dao(image):
    from photutils.detection import DAOStarFinder

    sub, std = _background2d(image)
    tab = DAOStarFinder(4.0 * std, 2.3548, min_separation=2.0, sharpness_range=(0.0, 2.0),
                        roundness_range=(-2.0, 2.0))(sub)
    return np.zeros((0, 2)) if tab is None else np.column_stack([tab["x_centroid"],
                                                                  tab["y_centroid"]])


def run_photutils(image, iterative):
    from photutils.detection import DAOStarFinder
    from photutils.psf import (
        CircularGaussianSigmaPRF,
        IterativePSFPhotometry,
        PSFPhotometry,
        SourceGrouper,
    )

    sub, std = _background2d(image)
    model = CircularGaussianSigmaPRF(sigma=1.5)
    model.sigma.bounds = (0.5, 3.0)
    model.sigma.fixed = False
    finder = DAOStarFinder(4.0 * std, 2.3548, min_separation=2.0, sharpness_range=(0.0, 2.0),
                           roundness_range=(-2.0, 2.0))
    # xy_bounds: a fitted position stays within 2 px of its detection (without it, sources fitted
    # off the frame make IterativePSFPhotometry raise while it renders the residual image)
    kw = dict(finder=finder, grouper=SourceGrouper(min_separation=6), aperture_radius=3,
              xy_bounds=(2, 2))
    phot = (IterativePSFPhotometry(model, (7, 7), maxiters=3, **kw) if iterative
            else PSFPhotometry(model, (7, 7), **kw))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tab = phot(sub, error=np.full(image.shape, std))
    if tab is None or len(tab) == 0:
        return np.zeros((0, 2))
    return np.column_stack([tab["x_fit"], tab["y_fit"]])


def run_sep(image):
    import sep

    data = np.ascontiguousarray(image, dtype=np.float64)
    bkg = sep.Background(data, bw=32, bh=32)
    objs = sep.extract(data - bkg.back(), 3.0, err=bkg.globalrms, minarea=3)
    return np.column_stack([objs["x"], objs["y"]])


def score(xy, truth, blobs, shape):
    """F1, RMSE of matched positions, and false sources farther than 3 px from every point
    source and 15 px from every blob centre."""
    cat = np.zeros(len(xy), astro.CATALOGUE_DTYPE)
    cat["x"], cat["y"] = xy[:, 0], xy[:, 1]
    s = astro.detection_scores(cat, truth)
    d_pt = np.hypot(xy[:, None, 0] - truth["x"][None], xy[:, None, 1] - truth["y"][None]).min(1) \
        if len(xy) and len(truth) else np.full(len(xy), np.inf)
    d_bl = np.hypot(xy[:, None, 0] - blobs[None, :, 0], xy[:, None, 1] - blobs[None, :, 1]).min(1) \
        if len(xy) else np.zeros(0)
    s["false_away"] = int(np.sum((d_pt > 3.0) & (d_bl > 15.0)))
    return s


def cpu(fn, *a):
    t = time.process_time()
    out = fn(*a)
    return out, time.process_time() - t


def fields(args):
    methods = {"cvfs": None}
    if args.compare_sbl:
        methods["cvfs (fast path off)"] = None
    methods.update({"photutils IterativePSFPhot": lambda im: run_photutils(im, True),
                    "photutils PSFPhotometry": lambda im: run_photutils(im, False),
                    "photutils DAOStarFinder": run_dao, "sep": run_sep})
    astro.localise(make_field(64, 5, 0, 0)[0])  # JIT warm-up, not timed
    per = {m: [] for m in methods}
    pulls = {"x": [], "y": [], "flux": []}
    crlb_sq, n_crlb = 0.0, 0
    for f in tqdm(range(args.fields), desc="fields"):
        img, truth, blobs = make_field(args.size, args.sources, 2000 + f)
        crlb = position_crlb(truth, img.shape, NOISE)
        crlb_sq += float(np.sum(crlb**2))
        n_crlb += len(crlb)
        for name, fn in methods.items():
            if name.startswith("cvfs"):
                res, t = cpu(lambda im, n=name: astro.localise(im, fast_path=n == "cvfs"), img)
                pts = res[~res["extended"]]  # point sources (one row per source)
                xy = np.column_stack([pts["x"], pts["y"]])
                cat = np.zeros(len(pts), astro.CATALOGUE_DTYPE)
                for c in ("x", "y", "sigma", "flux"):
                    cat[c] = pts[c]
                pi, ti = match_sources(cat, truth).T
                for k in pulls if name == "cvfs" else ():  # pulls of the default run
                    pulls[k] += list((pts[k][pi] - truth[k][ti]) / pts[f"{k}_err"][pi])
            else:
                try:
                    xy, t = cpu(fn, img)
                except Exception as exc:  # noqa: BLE001 - a peer failing is a result to report
                    per[name].append({"error": f"{type(exc).__name__}: {exc}"})
                    continue
            s = score(xy, truth, blobs, img.shape)
            s["cpu_s"] = t
            per[name].append(s)
    rows = {}
    for name, runs in per.items():
        ok = [r for r in runs if "error" not in r]
        if not ok:
            rows[name] = {"error": runs[0]["error"] if runs else "not run"}
            continue
        tp = sum(r["tp"] for r in ok)
        sq = sum(r["rmse"] ** 2 * r["tp"] for r in ok)
        rows[name] = {"f1": float(np.mean([r["f1"] for r in ok])),
                      "rmse": float(np.sqrt(sq / max(tp, 1))),
                      "false_away": int(sum(r["false_away"] for r in ok)),
                      "cpu_s": float(np.mean([r["cpu_s"] for r in ok])), "fields": len(ok)}
    crlb_rmse = float(np.sqrt(crlb_sq / max(n_crlb, 1)))
    calib = {k: {"std": float(np.nanstd(v)), "n": int(np.sum(np.isfinite(v)))}
             for k, v in pulls.items()}
    print(f"{args.fields} fields {args.size}x{args.size}, {args.sources} point sources each, "
          "sky gradient 16 sigma, 5 blobs")
    print(f"{'method':<28}{'F1':>7}{'RMSE px':>9}{'/CRB':>6}{'false':>7}{'CPU s':>9}")
    for name, r in rows.items():
        if "error" in r:
            print(f"{name:<28} failed: {r['error'][:60]}")
            continue
        print(f"{name:<28}{r['f1']:>7.3f}{r['rmse']:>9.3f}{r['rmse'] / crlb_rmse:>6.2f}"
              f"{r['false_away']:>7}{r['cpu_s']:>9.2f}")
    print(f"Cramer-Rao bound (pooled position RMSE): {crlb_rmse:.3f} px")
    print("cvfs pulls: " + ", ".join(f"std((v - true) / v_err) {k} {c['std']:.2f} (n={c['n']})"
                                     for k, c in calib.items()))
    return {"fields": args.fields, "size": args.size, "sources": args.sources, "rows": rows,
            "crlb_rmse": crlb_rmse, "pulls": calib}


def big(args):
    img, truth, blobs = make_field(2048, 2000, 7, n_blobs=20)
    astro.localise(make_field(64, 5, 0, 0)[0])
    t0 = time.perf_counter()
    res = astro.localise(img, n_jobs=args.jobs, verbose=True)  # progress bar, as the CLI
    wall = time.perf_counter() - t0
    rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
              resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    pts = res[~res["extended"]]
    s = score(np.column_stack([pts["x"], pts["y"]]), truth, blobs, img.shape)
    print(f"2048x2048, 2000 sources, n_jobs={args.jobs}: wall {wall:.1f} s, peak RSS "
          f"{rss:.0f} MB (largest process), F1 {s['f1']:.3f}, RMSE {s['rmse']:.3f} px, "
          f"{len(res)} sources ({int(res['extended'].sum())} extended)")
    return {"big": {"wall_s": wall, "peak_rss_mb": rss, "jobs": args.jobs, "f1": s["f1"],
                    "rmse": s["rmse"], "rows": len(res)}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fields", type=int, default=4)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--sources", type=int, default=320)
    ap.add_argument("--big", action="store_true", help="the 2048 x 2048 frame instead")
    ap.add_argument("--compare-sbl", action="store_true",
                    help="also cvfs with the fast path off (fast_path=False)")
    ap.add_argument("--jobs", type=int, default=2, help="processes for --big")
    args = ap.parse_args(argv)
    out = big(args) if args.big else fields(args)
    path = result_path(__file__, 'astro_field_big' if args.big else None)
    print(f"written {write_json(path, out)}")


if __name__ == "__main__":
    main()
