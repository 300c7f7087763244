"""Denoising PSNR (Def. 5.2) of synthetic 28x28 star fields across peak SNR: cvfs SBL
(sources + background) against wavelet shrinkage (skimage, BayesShrink) and BM3D, with the noisy
input as reference. All sources of a scene share the peak SNR of its row; noise sigma 1,
background 10 (estimated by every method from the image alone).

    python benchmarks/astro/astro_denoise.py [--n 10]
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
from cvfs import astro


def wavelet(img):
    from skimage.restoration import denoise_wavelet, estimate_sigma

    lo = img.min()
    return denoise_wavelet(img - lo, sigma=estimate_sigma(img), mode="soft", method="BayesShrink",
                           rescale_sigma=True) + lo


def bm3d_(img):
    import bm3d
    from skimage.restoration import estimate_sigma

    return bm3d.bm3d(img, sigma_psd=float(estimate_sigma(img)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10, help="scenes per SNR level")
    ap.add_argument("--snr", type=float, nargs="+", default=[5, 10, 20, 50])
    args = ap.parse_args(argv)
    methods = [("noisy input", lambda im: im),
               ("cvfs SBL", lambda im: astro.denoise(im, random_state=0)),
               ("wavelet (BayesShrink)", wavelet), ("BM3D", bm3d_)]
    astro.denoise(astro.make_scene(random_state=0)[0], random_state=0)  # JIT warm-up
    rows = []
    print(f"PSNR dB, mean over {args.n} scenes per level (time per image in s)")
    print(f"{'peak SNR':>9}" + "".join(f"{n:>26}" for n, _ in methods))
    for snr in args.snr:
        data = [astro.make_scene(snr=(snr, snr), random_state=4000 + 100 * int(snr) + i)
                for i in range(args.n)]
        row = {"snr": snr}
        line = f"{snr:9g}"
        for name, fn in methods:
            ps, ts = [], []
            for img, clean, _ in data:
                t0 = time.perf_counter()
                out = fn(img)
                ts.append(time.perf_counter() - t0)
                ps.append(astro.psnr(clean, out))
            row[name] = {"psnr": float(np.mean(ps)), "psnr_min": float(np.min(ps)),
                         "time": float(np.median(ts))}
            line += f"{np.mean(ps):17.2f} ({np.median(ts):5.3f})"
        rows.append(row)
        print(line, flush=True)
    path = write_json(result_path(__file__), {"rows": rows, "n": args.n})
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
