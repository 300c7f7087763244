"""Real images: cvfs (background + detection + SBL per object) against sep and photutils
DAOStarFinder on the Hubble Deep Field crop (counts, CPU time) and on sep's test image (recall of
SExtractor's image.cat objects with FLUX_AUTO / FLUXERR_AUTO >= 10 within 1 px). Writes
benchmarks/results/astro/astro_real.json.

cvfs runs with ``levels="all"`` (parent rows of blends, their point sources as children):
``count`` is its deblended rows, the default catalogue (``n_children == 0``, one per source;
parents are not counted),
``top`` its rows without a parent (one per deblended object). Recall is given at three levels:
``recall`` with each family at the level that matches SExtractor (:func:`cvfs.astro.match_levels`:
a parent replaces its children when it alone matches more objects than they do), ``recall
leaves`` with the deblended rows only, ``recall top`` with the top level only.

    python benchmarks/astro/astro_real.py [--size 256]
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from benchmarks._bench import result_path, write_json
from cvfs import astro
from cvfs.datasets import data_home


def cpu(fn, *a, **k):
    t = time.process_time()
    out = fn(*a, **k)
    return out, time.process_time() - t


def run_sep(img):
    import sep

    data = np.ascontiguousarray(img, dtype=np.float64)
    bkg = sep.Background(data)
    objs = sep.extract(data - bkg, 3, err=bkg.globalrms)
    return np.column_stack([objs["x"], objs["y"]])


def run_dao(img):
    from astropy.stats import sigma_clipped_stats
    from photutils.detection import DAOStarFinder

    _, med, std = sigma_clipped_stats(img, sigma=3.0)
    tab = DAOStarFinder(5.0 * std, 3.0)(img - med)
    return np.zeros((0, 2)) if tab is None else np.column_stack([tab["x_centroid"],
                                                                  tab["y_centroid"]])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=256, help="HDF crop size")
    args = ap.parse_args(argv)
    from skimage import data
    from skimage.color import rgb2gray

    astro.localise(rgb2gray(data.hubble_deep_field())[:32, :32])  # JIT warm-up, not timed
    rows = {}
    hdf = rgb2gray(data.hubble_deep_field())[:args.size, :args.size]
    d = data_home()
    from astropy.io import fits

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sepimg = fits.getdata(d / "astro" / "sep_image" / "image.fits").astype(np.float64)
    ref = np.loadtxt(d / "astro" / "sep_image" / "image.cat", comments="#")
    names = [ln.split()[2] for ln in open(d / "astro" / "sep_image" / "image.cat")
             if ln.startswith("#")]
    col = {n: i for i, n in enumerate(names)}
    snr = ref[:, col["FLUX_AUTO"]] / ref[:, col["FLUXERR_AUTO"]]
    truth = np.column_stack([ref[:, col["X_IMAGE"]], ref[:, col["Y_IMAGE"]]])[snr >= 10] - 1
    for name, img in (("hdf", hdf), ("sep_image", sepimg)):
        # the full hierarchy (levels="all"): the recall is also given per level
        res, t_ours = cpu(astro.localise, img, random_state=0, levels="all")
        leaves = astro.leaves(res)
        xy = {"cvfs": np.column_stack([leaves["x"], leaves["y"]])}
        times = {"cvfs": t_ours}
        xy["sep"], times["sep"] = cpu(run_sep, img)
        xy["DAOStarFinder"], times["DAOStarFinder"] = cpu(run_dao, img)
        rows[name] = {}
        for m in xy:
            r = {"count": len(xy[m]), "cpu_s": times[m]}
            if name == "sep_image":
                r["recall_snr10"] = astro.detection_scores(xy[m], truth)["recall"]
            if m == "cvfs":
                r["extended"] = int(leaves["extended"].sum())
                r["top"] = len(astro.top_level(res))
                r["parents"] = int(np.sum(res["n_children"] > 0))
                if name == "sep_image":
                    r["recall_snr10_leaves"] = r["recall_snr10"]
                    r["recall_snr10_top"] = astro.detection_scores(astro.top_level(res),
                                                                   truth)["recall"]
                    r["recall_snr10"] = astro.detection_scores(
                        res[astro.match_levels(res, truth)], truth)["recall"]
            rows[name][m] = r
    nan = float("nan")
    print(f"{'image':<11}{'method':<15}{'count':>7}{'top':>6}{'CPU s':>9}{'recall':>8}"
          f"{'leaves':>8}{'top':>7}{'extended':>10}")
    for name, per in rows.items():
        for m, r in per.items():
            print(f"{name:<11}{m:<15}{r['count']:>7}{r.get('top', ''):>6}{r['cpu_s']:>9.3f}"
                  f"{r.get('recall_snr10', nan):>8.3f}{r.get('recall_snr10_leaves', nan):>8.3f}"
                  f"{r.get('recall_snr10_top', nan):>7.3f}{r.get('extended', ''):>10}")
    print(f"SExtractor objects with SNR >= 10: {len(truth)}")
    print(f"written {write_json(result_path(__file__), {'size': args.size, 'rows': rows})}")


if __name__ == "__main__":
    main()
