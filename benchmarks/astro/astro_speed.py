"""CPU time of cvfs (fast path on and off) against sep and photutils DAOStarFinder +
PSFPhotometry on the crowded 2MASS Ks frame of M17 (shared data ``astro/m17``) and on the
synthetic 2048 x 2048 frame with 2,000 sources of ``astro_field.py --big``; rows found, objects
fitted by the fast path (and why the others were not), and on the synthetic frame F1 and
position RMSE. CPU seconds are ``time.process_time`` of this process plus the CPU of finished
child processes (``--jobs``). With ``--psf fitted`` cvfs also runs with the PSF profile fitted
to the frame's stars; every point-source catalogue is matched (1.5 px) to sep's and photutils'
rows.
Writes benchmarks/results/astro/astro_speed.json.

    python benchmarks/astro/astro_speed.py [--frames m17 big] [--crop 256] [--jobs 1]
        [--no-sbl]  # skip cvfs with the fast path off (the slow reference)
        [--tolerance 0.1]  # also cvfs with model_tolerance 0.1
        [--psf fitted]  # also cvfs with psf="fitted"
        [--auto-width]  # also cvfs with psf_sigma="auto"
        [--no-gaussian]  # skip cvfs with the default Gaussian PSF
"""

import argparse
import resource
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.spatial import cKDTree

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from benchmarks._bench import result_path, write_json
from benchmarks.astro.astro_field import make_field, run_dao, run_photutils, run_sep, score
from cvfs import astro
from cvfs.datasets import data_home

M17 = "astro/m17/aK_asky_990502s1350080.fits.gz"


def cpu_now():
    """CPU seconds of this process and its finished children."""
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + ch.ru_utime + ch.ru_stime


def timed(fn, *a, **k):
    t = cpu_now()
    out = fn(*a, **k)
    return out, cpu_now() - t


def m17_frame(crop):
    """The M17 Ks frame (1024 x 512), or its central ``crop`` x ``crop`` pixels."""
    from astropy.io import fits

    path = Path(data_home()) / M17
    if not path.exists():
        raise SystemExit(f"{path} not found: set CVFS_DATA to the shared data folder")
    img = fits.getdata(path).astype(np.float64)
    if crop:
        h, w = img.shape
        r0, c0 = (h - crop) // 2, (w - crop) // 2
        img = img[r0:r0 + crop, c0:c0 + crop]
    return img


def matched(xy, ref, radius=1.5):
    """Rows of ``ref`` with a row of ``xy`` within ``radius`` px, and rows of ``xy`` without
    a row of ``ref`` within it."""
    if len(xy) == 0 or len(ref) == 0:
        return 0, len(xy)
    d_ref = cKDTree(xy).query(ref)[0]
    d_xy = cKDTree(ref).query(xy)[0]
    return int(np.sum(d_ref < radius)), int(np.sum(d_xy >= radius))


def count_fast(img, **options):
    """Objects the fast path fits, of all objects, and why the others went to the SBL fit, in
    one cvfs run (not timed)."""
    from cvfs.astro import fastfit, objects

    seen = {"objects": 0, "fast": 0, "sbl": {}}
    real_fit, real_proc = fastfit._fit, objects.process_objects

    def spy(*a, **k):
        out = real_fit(*a, **k)
        if out[2] is None:
            seen["fast"] += 1
        else:
            seen["sbl"][out[2]] = seen["sbl"].get(out[2], 0) + 1
        return out

    def proc(obj_list, st, split=True):
        if split:  # the parts of a split extended object are not counted again
            seen["objects"] += len(obj_list)
        return real_proc(obj_list, st, split=split)

    fastfit._fit, objects.process_objects = spy, proc
    try:
        astro.localise(img, n_jobs=1, **options)
    finally:
        fastfit._fit, objects.process_objects = real_fit, real_proc
    return seen


def run_frame(name, img, truth, blobs, args):
    # peers see NaN pixels as the frame's median (they take no mask); cvfs ignores them
    filled = np.where(np.isfinite(img), img, np.nanmedian(img))
    methods = {}
    if not args.no_gaussian:
        methods["cvfs (fast path)"] = lambda: astro.localise(img, n_jobs=args.jobs)
    if args.psf:
        methods[f"cvfs (psf {args.psf})"] = lambda: astro.localise(img, n_jobs=args.jobs,
                                                                   psf=args.psf)
    if args.auto_width:
        methods["cvfs (psf_sigma auto)"] = lambda: astro.localise(img, n_jobs=args.jobs,
                                                                  psf_sigma="auto")
    if args.tolerance:
        methods[f"cvfs (model_tolerance {args.tolerance:g})"] = lambda: astro.localise(
            img, n_jobs=args.jobs, model_tolerance=args.tolerance)
    if not args.no_sbl:
        methods["cvfs (SBL only)"] = lambda: astro.localise(img, n_jobs=args.jobs,
                                                             fast_path=False)
    methods["photutils DAOStarFinder + PSFPhotometry"] = lambda: run_photutils(filled, False)
    methods["photutils DAOStarFinder"] = lambda: run_dao(filled)
    methods["sep"] = lambda: run_sep(filled)
    rows, xys = {}, {}
    for m, fn in methods.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out, t = timed(fn)
        xy = out
        if m.startswith("cvfs"):  # point-source rows are scored
            pts = out[~out["extended"]]
            xy = np.column_stack([pts["x"], pts["y"]])
        xys[m] = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
        rows[m] = {"cpu_s": t, "rows": len(out)}
        if truth is not None:
            s = score(xy, truth, blobs, img.shape)
            rows[m].update(f1=s["f1"], rmse=s["rmse"])
        print(f"  {name}: {m} {rows[m]}", flush=True)
    for m in methods:
        for ref in ("sep", "photutils DAOStarFinder + PSFPhotometry"):
            if m != ref and not m.startswith("photutils"):
                hit, extra = matched(xys[m], xys[ref])
                rows[m][f"match {ref.split()[0]}"] = hit
                rows[m][f"unmatched vs {ref.split()[0]}"] = extra
    if not args.no_gaussian:
        rows["cvfs (fast path)"].update(count_fast(img))
    if args.psf:
        rows[f"cvfs (psf {args.psf})"].update(count_fast(img, psf=args.psf))
    if args.auto_width:
        rows["cvfs (psf_sigma auto)"].update(count_fast(img, psf_sigma="auto"))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", nargs="+", choices=("m17", "big"), default=["m17", "big"])
    ap.add_argument("--crop", type=int, default=0,
                    help="central crop of the M17 frame (0 = the whole 1024 x 512 frame)")
    ap.add_argument("--jobs", type=int, default=1, help="cvfs processes")
    ap.add_argument("--no-sbl", action="store_true", help="skip cvfs with the fast path off")
    ap.add_argument("--tolerance", type=float, default=0.0,
                    help="also cvfs with this model_tolerance (e.g. 0.1)")
    ap.add_argument("--psf", choices=("fitted",), default=None,
                    help="also cvfs with this PSF model (fitted to the frame's stars)")
    ap.add_argument("--auto-width", action="store_true",
                    help="also cvfs with psf_sigma='auto' (the width measured on the frame)")
    ap.add_argument("--no-gaussian", action="store_true",
                    help="skip cvfs with the default Gaussian PSF")
    args = ap.parse_args(argv)
    astro.localise(make_field(64, 5, 0, 0)[0])  # JIT warm-up, not timed
    out = {"jobs": args.jobs, "crop": args.crop, "frames": {}}
    for frame in args.frames:
        if frame == "m17":
            img = m17_frame(args.crop)
            name = f"M17 Ks {img.shape[1]}x{img.shape[0]}"
            out["frames"][name] = run_frame(name, img, None, None, args)
        else:
            img, truth, blobs = make_field(2048, 2000, 7, n_blobs=20)
            name = "synthetic 2048x2048, 2000 sources"
            out["frames"][name] = run_frame(name, img, truth, blobs, args)
    print(f"cvfs with n_jobs={args.jobs}; CPU s of the process and its children")
    print(f"{'frame':<36}{'method':<42}{'rows':>7}{'CPU s':>9}{'F1':>7}{'RMSE':>7}"
          f"{'sep hit/extra':>15}{'phot hit/extra':>16}")
    for name, rows in out["frames"].items():
        for m, r in rows.items():
            f1 = f"{r['f1']:>7.3f}{r['rmse']:>7.3f}" if "f1" in r else " " * 14
            hits = "".join(f"{r[f'match {k}']:>9}/{r[f'unmatched vs {k}']:<5}"
                           for k in ("sep", "photutils") if f"match {k}" in r)
            print(f"{name:<36}{m:<42}{r['rows']:>7}{r['cpu_s']:>9.1f}{f1} {hits}")
        for m, fast in rows.items():
            if "fast" in fast:
                print(f"{name}: {m}: fast path fitted {fast['fast']} of {fast['objects']} "
                      "objects; tiled fit for: "
                      + ", ".join(f"{k} {v}" for k, v in fast["sbl"].items()))
    print(f"written {write_json(result_path(__file__), out)}")


if __name__ == "__main__":
    main()
