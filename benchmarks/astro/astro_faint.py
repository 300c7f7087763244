"""Faint sources: completeness against flux on synthetic 256 x 256 fields (point sources with peak
SNR 5-50, log-uniform, sigma 1-2 px, on a sky gradient of 16 noise sigma with two extended blobs;
:func:`cvfs.astro.make_field`). cvfs, sep and photutils detect at the same matched-filter SNR
threshold ``--thresh``: cvfs with ``detect_snr=thresh``; sep.extract with a Gaussian filter
kernel k of the mean PSF width at thresh x ||k|| (its kernel-smoothed image in units of the
global rms: the same SNR for constant noise); photutils detect_sources + deblend_sources +
SourceCatalog on the image convolved with k divided by the matched-filter noise (background rms x
||k||). sep at 2 sigma per pixel with its default 3 x 3 filter is shown as commonly run, and
sep's ``filter_type="matched"`` on its noise map (which misses bright sources 2 px wide on these
fields). A true source is found when a row lies within 2 px
(one-to-one); a row is false when it is farther than 3 px from every true source and 15 px from
every blob centre. Prints a table, writes benchmarks/results/astro/astro_faint.json and the
completeness figure astro_faint.png (``--figure`` adds a copy, e.g. for the docs).

    python benchmarks/astro/astro_faint.py [--fields 4] [--size 256] [--sources 110] [--thresh 5]
    python benchmarks/astro/astro_faint.py --figure docs/img/astro_completeness.png
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.optimize import linear_sum_assignment

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from benchmarks._bench import result_path, write_json
from cvfs import astro

#: mean PSF width of the fields (sigma 1-2 px): the detection kernel of every method
KERNEL_SIGMA = 1.5
#: smallest object (pixels), every method
MIN_AREA = 5
#: flux bin edges (noise sigma = 1): peak SNR 5 at sigma 1 px is flux ~31, 50 at 2 px ~1,250
EDGES = np.geomspace(40.0, 1600.0, 9)


def _kernel(sigma=KERNEL_SIGMA):
    r = int(3 * sigma + 0.5)
    yy, xx = np.mgrid[-r:r + 1, -r:r + 1]
    k = np.exp(-0.5 * (xx**2 + yy**2) / sigma**2)
    return k / k.sum()


def run_cvfs(image, thresh):
    cat = astro.localise(image, detect_snr=thresh)
    return np.column_stack([cat["x"], cat["y"]])


def _sep_background(image, box):
    import sep

    data = np.ascontiguousarray(image, dtype=np.float64)
    bkg = sep.Background(data, bw=box, bh=box)
    return data - bkg.back(), bkg


def run_sep(image, thresh, box, filter_type="conv"):
    """sep.extract with the Gaussian kernel: ``conv`` thresholds the kernel-smoothed image at
    thresh x ||k|| x global rms (the matched-filter SNR ``thresh`` for constant noise);
    ``matched`` passes the noise map and ``thresh`` itself."""
    import sep

    sub, bkg = _sep_background(image, box)
    k = _kernel()
    if filter_type == "conv":
        objs = sep.extract(sub, thresh * float(np.sqrt(np.sum(k**2))), err=bkg.globalrms,
                           filter_kernel=k, filter_type="conv", minarea=MIN_AREA)
    else:
        objs = sep.extract(sub, thresh, err=bkg.rms(), filter_kernel=k, filter_type="matched",
                           minarea=MIN_AREA)
    return np.column_stack([objs["x"], objs["y"]])


def run_sep_default(image, box, thresh=2.0):
    import sep

    sub, bkg = _sep_background(image, box)
    objs = sep.extract(sub, thresh, err=bkg.globalrms, minarea=MIN_AREA)
    return np.column_stack([objs["x"], objs["y"]])


def run_photutils(image, thresh, box):
    from astropy.convolution import convolve
    from photutils.background import Background2D
    from photutils.segmentation import SourceCatalog, deblend_sources, detect_sources

    bkg = Background2D(image, (box, box), filter_size=(3, 3))
    sub = image - bkg.background
    k = _kernel()
    conv = convolve(sub, k, normalize_kernel=False)
    snr = conv / (bkg.background_rms * np.sqrt(np.sum(k**2)))
    segm = detect_sources(snr, thresh, npixels=MIN_AREA)
    if segm is None:
        return np.zeros((0, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        segm = deblend_sources(snr, segm, npixels=MIN_AREA, progress_bar=False)
    cat = SourceCatalog(sub, segm, convolved_data=conv)
    return np.column_stack([np.asarray(cat.x_centroid), np.asarray(cat.y_centroid)])


def score(xy, truth, blobs, radius=2.0):
    """Found flags of the true sources (one-to-one within ``radius``) and false rows."""
    found = np.zeros(len(truth), bool)
    xy = np.asarray(xy, float).reshape(-1, 2)
    if len(xy) == 0:
        return found, 0
    d = np.hypot(truth["x"][:, None] - xy[None, :, 0], truth["y"][:, None] - xy[None, :, 1])
    ti, ri = linear_sum_assignment(np.where(d <= radius, d, 1e6))
    found[ti[d[ti, ri] <= radius]] = True
    d_bl = np.hypot(xy[:, None, 0] - blobs[None, :, 0], xy[:, None, 1] - blobs[None, :, 1]).min(1)
    false = int(np.sum((d.min(0) > 3.0) & (d_bl > 15.0)))
    return found, false


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fields", type=int, default=4, help="fields (seeds 0, 1, ...)")
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--sources", type=int, default=110, help="point sources per field")
    ap.add_argument("--thresh", type=float, default=5.0,
                    help="detection threshold, matched-filter SNR (cvfs, sep, photutils)")
    ap.add_argument("--peer-box", type=int, default=16,
                    help="background box of sep and photutils (16: their fewest false rows of "
                         "16, 32, 64 on these fields; cvfs uses its default box)")
    ap.add_argument("--figure", type=Path, help="also save the completeness figure here")
    args = ap.parse_args(argv)
    t = args.thresh
    b = args.peer_box
    methods = {f"cvfs (detect_snr {t:g})": lambda im: run_cvfs(im, t),
               f"sep, PSF kernel ({t:g})": lambda im: run_sep(im, t, b),
               f"photutils segmentation ({t:g})": lambda im: run_photutils(im, t, b),
               "sep 2 sigma/pixel, 3x3 filter": lambda im: run_sep_default(im, b),
               f"sep filter_type=matched ({t:g})": lambda im: run_sep(im, t, b, "matched")}
    astro.localise(astro.make_field((64, 64), 5, n_blobs=0, random_state=0)[0])  # JIT warm-up
    fluxes, found = [], {m: [] for m in methods}
    false = {m: 0 for m in methods}
    cpu = {m: 0.0 for m in methods}
    for f in range(args.fields):
        img, _, truth, blobs = astro.make_field((args.size, args.size), args.sources,
                                                random_state=f)
        fluxes.append(truth["flux"])
        for name, fn in methods.items():
            t0 = time.process_time()
            xy = fn(img)
            cpu[name] += time.process_time() - t0
            ok, n_false = score(xy, truth, blobs)
            found[name].append(ok)
            false[name] += n_false
    flux = np.concatenate(fluxes)
    which = np.digitize(flux, EDGES) - 1
    n_bin = np.bincount(which[(which >= 0) & (which < len(EDGES) - 1)],
                        minlength=len(EDGES) - 1)
    rows = {}
    print(f"{args.fields} fields {args.size}x{args.size}, {args.sources} point sources each "
          f"(peak SNR 5-50 log-uniform), sky gradient 16 sigma, 2 blobs; found = a row within "
          f"2 px")
    print(f"{'method':<34}{'found':>11}{'compl.':>8}{'false':>7}{'CPU s':>8}")
    for name in methods:
        ok = np.concatenate(found[name])
        comp = np.array([ok[which == b].mean() if n_bin[b] else np.nan
                         for b in range(len(EDGES) - 1)])
        rows[name] = {"found": int(ok.sum()), "n_true": len(ok),
                      "completeness": float(ok.mean()), "false": false[name],
                      "cpu_s_per_field": cpu[name] / args.fields,
                      "completeness_per_bin": comp.tolist(),
                      "median_flux_missed": float(np.median(flux[~ok])) if (~ok).any() else None}
        print(f"{name:<34}{int(ok.sum()):>6} / {len(ok):<3}{ok.mean():>8.3f}{false[name]:>7}"
              f"{cpu[name] / args.fields:>8.2f}")
    print("\ncompleteness per flux bin (noise sigma = 1)")
    print(f"{'flux':>13}{'n':>5}" + "".join(f"{n.split(' (')[0][:12]:>13}" for n in methods))
    for b in range(len(EDGES) - 1):
        print(f"{EDGES[b]:>6.0f}-{EDGES[b + 1]:<6.0f}{n_bin[b]:>5}"
              + "".join(f"{rows[n]['completeness_per_bin'][b]:>13.2f}" for n in methods))
    from cvfs.viz import save_figure
    from cvfs.viz.astro import plot_completeness

    ax = plot_completeness(EDGES, {n: r["completeness_per_bin"] for n, r in rows.items()},
                           title=f"{args.fields} fields {args.size}$^2$, {args.sources} sources "
                                 "each")
    ax.figure.set_size_inches(6.4, 4.2)
    figure = result_path(__file__, suffix=".png")
    save_figure(ax.figure, figure)
    if args.figure is not None:
        save_figure(ax.figure, args.figure)
    out = {"fields": args.fields, "size": args.size, "sources": args.sources,
           "thresh": args.thresh, "flux_edges": EDGES.tolist(), "n_per_bin": n_bin.tolist(),
           "rows": rows}
    print(f"written {write_json(result_path(__file__), out)}, {figure}")


if __name__ == "__main__":
    main()
