"""Throughput of cvfs.vision dense features on a 640x480 frame over an 18-level 2^(1/4) pyramid.

Measures (CPU seconds of this process, best of ``--repeat``; single numba thread):

- pyramid construction;
- dense HOG: per-level cell-histogram maps (all levels), L2-Hys block maps, assembly of all 864
  features per window (``border='image'`` for every window of the frame; ``border='window'``, the
  skimage-per-crop mode, on a sample), against ``skimage.feature.hog`` per window (3 channels) and,
  if ``--cv4-python`` names an interpreter with ``opencv-python-headless<5``, OpenCV 4's
  ``HOGDescriptor`` (same 24/12/6/6/8 layout on one channel, times 3);
- Haar: all 60,000 pool columns at sampled windows (training), 1,500 columns at every window of the
  frame (scanning), against direct NumPy sums of ``cv2.integral`` images (one feature at a time,
  vectorised over all window positions);
- the feature pool: 1,500 mixed columns (100 HOG + 1,400 Haar) at every window of the frame;
- single HOG blocks as the soft-cascade scan computes them for the windows that reach a HOG stage
  (window border, skimage-exact): from the pixels (:func:`cvfs.vision.hog_direct.block_from_pixels`)
  and from the level's cell maps (:func:`cvfs.vision.hog_direct.block_from_cells`, the scan's
  path), as blocks/s and as windows/s of all 27 blocks (864 features).

Prints a table and writes JSON to ``benchmarks/results/keypoints/vision_throughput.json``. Timings
on a shared machine are noisy (the load average is recorded); per-frame numbers for skimage and Haar
scanning are extrapolated from the measured rate.

Usage::

    python benchmarks/keypoints/vision_throughput.py [--image PATH] [--cv4-python /path/to/python]
"""

import argparse
import json
import logging
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import cv2
import numpy as np
from numba import njit

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from benchmarks._bench import result_path, write_json
from cvfs.datasets import data_home
from cvfs.vision import (
    N_HOG,
    FeaturePool,
    LevelCache,
    gaussian_pyramid,
    hog_level,
    window_centres,
)
from cvfs.vision.hog_assembly import HogColumns
from cvfs.vision.hog_direct import block_from_cells, block_from_pixels

log = logging.getLogger("vision_throughput")

_CV4_SCRIPT = r"""
import sys, time, json
import numpy as np, cv2
levels = np.load(sys.argv[1])
hog = cv2.HOGDescriptor((24, 24), (12, 12), (6, 6), (6, 6), 8)
best = None
for _ in range(int(sys.argv[2])):
    t = time.process_time()
    n = 0
    for key in levels.files:
        d = hog.compute(levels[key], winStride=(1, 1), padding=(0, 0))
        n += d.size // 288
        del d
    dt = time.process_time() - t
    best = dt if best is None else min(best, dt)
print(json.dumps({"version": cv2.__version__, "seconds_one_channel": best, "windows": n}))
"""


def _best(fn, repeat):
    """Best CPU time of ``fn()`` over ``repeat`` runs (and its last result)."""
    best, out = None, None
    for _ in range(repeat):
        t = time.process_time()
        out = fn()
        dt = time.process_time() - t
        best = dt if best is None else min(best, dt)
    return best, out


def _frame(path):
    if path is None:
        home = data_home()
        cands = sorted((home / "faces/caltech_webfaces_dev/images").glob("*.jpg")) if home else []
        path = cands[0] if cands else None
    if path is not None:
        from cvfs.io.images import read_image

        return cv2.resize(read_image(path), (640, 480)), str(path)
    rng = np.random.default_rng(0)
    noise = cv2.GaussianBlur(rng.random((480, 640, 3)).astype(np.float32), (0, 0), 2.0)
    return (255 * (noise - noise.min()) / np.ptp(noise)).astype(np.uint8), "synthetic"


def _skimage_rate(level_img, n, seed=0):
    from skimage.feature import hog

    rng = np.random.default_rng(seed)
    h, w = level_img.shape[:2]
    tl = np.stack([rng.integers(0, h - 23, n), rng.integers(0, w - 23, n)], 1)
    img = level_img.astype(np.float64)

    def run():
        for r, c in tl:
            for ch in range(3):
                hog(img[r:r + 24, c:c + 24, ch], orientations=8, pixels_per_cell=(6, 6),
                    cells_per_block=(2, 2), block_norm="L2-Hys")

    dt, _ = _best(run, 1)
    return n / dt


def _cv4(levels, python, repeat):
    with tempfile.TemporaryDirectory() as tmp:
        npz = Path(tmp) / "levels.npz"
        np.savez(npz, **{f"l{i}": np.ascontiguousarray((lv.image[:, :, 0] * 255 + 0.5)
                                                        .astype(np.uint8))
                         for i, lv in enumerate(levels)})
        script = Path(tmp) / "cv4_hog.py"
        script.write_text(_CV4_SCRIPT)
        env = dict(os.environ, OMP_NUM_THREADS="1")
        res = subprocess.run([python, str(script), str(npz), str(repeat)], capture_output=True,
                             text=True, env=env, check=False)
    if res.returncode != 0:
        log.warning("OpenCV 4 HOG failed: %s", res.stderr.strip()[-500:])
        return None
    return json.loads(res.stdout.strip().splitlines()[-1])


def _haar_numpy_rate(cache, pool, n_feat):
    """Direct NumPy sums of corner terms over all positions, one feature at a time."""
    from cvfs.vision.haar import haar_terms

    integral = cache.integral
    h, w = cache.shape
    nh, nw = h - 23, w - 23
    feats = pool.haar[:n_feat]
    dy, dx, wt, nt = haar_terms(feats)

    def run():
        for ch in range(3):
            s = integral[ch]
            for j in range(n_feat):
                acc = wt[j, 0] * s[dy[j, 0]:dy[j, 0] + nh, dx[j, 0]:dx[j, 0] + nw]
                for t in range(1, nt[j]):
                    acc += wt[j, t] * s[dy[j, t]:dy[j, t] + nh, dx[j, t]:dx[j, t] + nw]

    dt, _ = _best(run, 1)
    return 3 * n_feat * nh * nw / dt


def _rect_numpy_rate(cache, n_rect, seed=0):
    """Single-rectangle sums (4 corners) from ``cv2.integral``, vectorised over all positions."""
    integral = cache.integral
    h, w = cache.shape
    nh, nw = h - 23, w - 23
    rng = np.random.default_rng(seed)
    rects = [(int(y), int(x), int(rng.integers(1, 25 - y)), int(rng.integers(1, 25 - x)))
             for y, x in zip(rng.integers(0, 24, n_rect), rng.integers(0, 24, n_rect),
                             strict=True)]

    def run():
        for ch in range(3):
            s = integral[ch]
            for y, x, rh, rw in rects:
                _ = (s[y + rh:y + rh + nh, x + rw:x + rw + nw] - s[y:y + nh, x + rw:x + rw + nw]
                     - s[y + rh:y + rh + nh, x:x + nw] + s[y:y + nh, x:x + nw])

    dt, _ = _best(run, 1)
    return 3 * n_rect * nh * nw / dt


@njit(cache=True)
def _blocks(rgb, maps, from_cells, top_left, slot):
    buf = np.empty((2, 2, 8))
    out = np.empty(32)
    for i in range(top_left.shape[0]):
        if from_cells:
            block_from_cells(maps, slot[i], top_left[i, 0], top_left[i, 1], True, buf, out)
        else:
            block_from_pixels(rgb, slot[i], top_left[i, 0], top_left[i, 1], True, buf, out)


def _block_rates(cache, n, repeat, seed=0):
    """Blocks per CPU second from the pixels and from the cell maps (windows in row order)."""
    rng = np.random.default_rng(seed)
    h, w = cache.shape
    tl = np.stack([rng.integers(0, h - 23, n), rng.integers(0, w - 23, n)], 1)
    tl = np.ascontiguousarray(tl[np.lexsort((tl[:, 1], tl[:, 0]))])
    slot = rng.integers(0, 27, n)
    hl = cache.hog
    maps = (hl.cells, hl.bins, hl.mag, hl.abs_g_row, hl.abs_g_col)
    rates = {}
    for name, from_cells in (("pixels", False), ("cells", True)):
        _blocks(cache.image, maps, from_cells, tl[:2], slot[:2])  # compile / load
        t, _ = _best(lambda c=from_cells: _blocks(cache.image, maps, c, tl, slot), repeat)
        rates[name] = n / t
    return rates


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", default=None, help="frame (resized to 640x480); default: first "
                    "Caltech dev image of the data home, else a synthetic frame")
    ap.add_argument("--levels", type=int, default=18)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skimage-windows", type=int, default=300)
    ap.add_argument("--cv4-python", default=None,
                    help="python with opencv-python-headless<5 (for HOGDescriptor)")
    ap.add_argument("--json", default=str(result_path(__file__)))
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    frame, source = _frame(args.image)
    rows = []

    def add(name, seconds_per_frame, rate=None, unit="", note=""):
        rows.append({"what": name, "ms_per_frame": None if seconds_per_frame is None
                     else 1e3 * seconds_per_frame, "rate": rate, "unit": unit, "note": note})

    t_pyr, levels = _best(lambda: gaussian_pyramid(frame, max_levels=args.levels), args.repeat)
    n_win = sum(len(window_centres(lv.shape)) for lv in levels)
    add("pyramid (18 levels)", t_pyr)
    log.info("frame %s, %d levels, %d windows at stride 1", source, len(levels), n_win)

    # warm up the numba kernels (compilation / cache load is not throughput)
    pool = FeaturePool()
    small = LevelCache(levels[-1])
    pool.compute(small, window_centres(small.shape)[:20], np.r_[np.arange(50), 900 + np.arange(50)])
    FeaturePool(hog_border="window").compute(small, window_centres(small.shape)[:20],
                                             np.arange(50))

    t_cells, hls = _best(lambda: [hog_level(lv.image) for lv in levels], args.repeat)
    add("HOG cell maps, all levels", t_cells)
    t_norm, _ = _best(lambda: [setattr(h, "_norms", None) or h.block_factors() for h in hls],
                      args.repeat)
    add("HOG L2-Hys block maps (image border)", t_norm)

    cols = np.arange(N_HOG)
    chunk = 20_000
    buf = np.empty((chunk, N_HOG), dtype=np.float32)
    image_border, window_border = HogColumns(cols, False), HogColumns(cols, True)

    def assemble_all():
        for h in hls:
            tl = window_centres(h.shape) - 12
            for s in range(0, len(tl), chunk):
                part = tl[s:s + chunk]
                image_border(h, part, buf[:len(part)], cols)

    t_asm, _ = _best(assemble_all, 1)
    add("HOG 864 per window, image border", t_asm, n_win / t_asm, "windows/s")
    add("HOG dense total (maps + blocks + 864/window)", t_cells + t_norm + t_asm,
        n_win / (t_cells + t_norm + t_asm), "windows/s")
    tl0 = (window_centres(hls[0].shape) - 12)[:chunk]
    t_win, _ = _best(lambda: window_border(hls[0], tl0, buf, cols), 1)
    rate_win = len(tl0) / t_win
    add("HOG 864 per window, window border (skimage-exact)", t_cells + n_win / rate_win, rate_win,
        "windows/s", "per-frame incl. cell maps, extrapolated")
    rate_sk = _skimage_rate(levels[0].image, args.skimage_windows)
    add("skimage.feature.hog per window (3 channels)", n_win / rate_sk, rate_sk, "windows/s",
        f"extrapolated from {args.skimage_windows} windows")
    if args.cv4_python:
        cv4 = _cv4(levels, args.cv4_python, args.repeat)
        if cv4:
            t = 3 * cv4["seconds_one_channel"]
            add(f"OpenCV {cv4['version']} HOGDescriptor (3 x one channel)", t, n_win / t,
                "windows/s", "bilinear binning, Gaussian block weights: same layout only")

    # Haar
    cache0 = LevelCache(levels[0])
    _ = cache0.integral
    rng = np.random.default_rng(0)
    haar_cols = N_HOG + np.arange(pool.n_haar)
    cent = np.stack([rng.integers(12, cache0.shape[0] - 12, 1000),
                     rng.integers(12, cache0.shape[1] - 12, 1000)], 1)
    t_train, _ = _best(lambda: pool.compute(cache0, cent, haar_cols), 1)
    add("Haar 60,000 columns at 1,000 sampled windows", None, 1000 * pool.n_haar / t_train,
        "features/s", "training pattern (gathered windows)")
    sel = N_HOG + np.sort(rng.choice(pool.n_haar, 1400, replace=False))
    hog_sel = np.sort(rng.choice(N_HOG, 100, replace=False))
    def scan(columns):
        out = np.empty((chunk, len(columns)), dtype=np.float32)

        def run():
            for lv in levels:
                c = LevelCache(lv)
                cents = window_centres(c.shape)
                for s in range(0, len(cents), chunk):
                    part = cents[s:s + chunk]
                    pool.compute(c, part, columns, out=out[:len(part)])
        return run

    t_scan, _ = _best(scan(sel), 1)
    add("Haar 1,400 columns at every window", t_scan, n_win * 1400 / t_scan, "features/s",
        "scanning pattern, incl. integral images")
    rate_np = _haar_numpy_rate(cache0, pool, 200)
    add("NumPy sums of cv2.integral (per feature, all positions)", n_win * 1400 / rate_np,
        rate_np, "features/s", "same 1,400 features, extrapolated")
    rate_rect = _rect_numpy_rate(cache0, 200)
    add("NumPy single-rectangle sums of cv2.integral", None, rate_rect, "rect sums/s",
        "4 corners each; a Haar feature has 6-9 corners")
    t_pool, _ = _best(scan(np.r_[hog_sel, sel]), 1)
    add("FeaturePool 1,500 columns (100 HOG + 1,400 Haar) at every window", t_pool,
        n_win / t_pool, "windows/s", "no early rejection; incl. all per-level maps")

    rates = _block_rates(cache0, 200_000, args.repeat)
    for name, note in (("pixels", "hog_direct / block_from_pixels"),
                       ("cells", "block_from_cells: the soft-cascade scan's path")):
        add(f"HOG single blocks from the {name} (window border)", None, rates[name], "blocks/s",
            f"{note}; {rates[name] / 27:.3g} windows/s of 864 features (skimage "
            f"{rate_sk:.3g})")

    width = max(len(r["what"]) for r in rows)
    lines = [f"{'measurement':<{width}}  {'ms/frame':>10}  {'rate':>10}  unit"]
    for r in rows:
        ms = "" if r["ms_per_frame"] is None else f"{r['ms_per_frame']:.0f}"
        rate = "" if r["rate"] is None else f"{r['rate']:.3g}"
        lines.append(f"{r['what']:<{width}}  {ms:>10}  {rate:>10}  {r['unit']} {r['note']}")
    sys.stdout.write("\n".join(lines) + "\n")

    info = {
        "frame": source, "shape": [480, 640], "levels": len(levels), "windows": n_win,
        "numba_threads": os.environ.get("NUMBA_NUM_THREADS"), "cpu_count": os.cpu_count(),
        "load_average": os.getloadavg(), "platform": platform.platform(),
        "timing": "process CPU seconds, best of --repeat (1 for the long runs); shared machine",
        "rows": rows,
    }
    path = write_json(args.json, info)
    log.info("wrote %s", path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
