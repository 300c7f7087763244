"""Bitwise regression check: a fixed set of fits whose outputs must not change across refactors.

Runs FSA over its losses x data layouts x dtypes (dense float64/float32, CSR, CSC, memmap and
HDF5 row blocks, Dask), the multiclass, weighted and ranking fits, SBL, FGM and Infinite Push,
and one small call of each application (astronomy, motion, face keypoints). Every output array is
stored in an ``.npz`` file; ``--compare`` reruns the fits and reports each array that differs
(bit for bit) with its largest absolute difference.

    python benchmarks/bitwise.py --save ref.npz          # before a change
    python benchmarks/bitwise.py --compare ref.npz       # after it: exit 1 on any difference
    python benchmarks/run.py bitwise --compare ref.npz   # the same through the runner

Outputs are read through the public API only (``get_support(indices=True)``, ``coef_``,
``decision_function``), so the check survives changes of internal names.
"""

import argparse
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))
from benchmarks._bench import limit_threads  # noqa: E402

limit_threads()


def _problem(n=300, m=60, seed=0, task="classification"):
    from cvfs.datasets.synthetic import make_ar1_classification, make_ar1_regression

    if task == "classification":
        return make_ar1_classification(n, m, k_true=5, noise=0.1, random_state=seed)
    return make_ar1_regression(n, m, k_true=5, random_state=seed)


def _fitted(est, X_pred):
    out = {"support": np.asarray(est.get_support(indices=True)),
           "coef": np.asarray(est.coef_, dtype=np.float64)}
    if hasattr(est, "intercept_"):
        out["intercept"] = np.atleast_1d(np.asarray(est.intercept_, dtype=np.float64))
    out["decision"] = np.asarray(est.decision_function(X_pred) if hasattr(est, "decision_function")
                                 else est.predict(X_pred), dtype=np.float64)
    return out


def _layouts(X, tmp):
    """The same X in every layout FSA reads, with a memory budget that forces row blocks."""
    import h5py
    import scipy.sparse as sp

    yield "dense", X, {}
    yield "csr", sp.csr_matrix(X), {}
    yield "csc", sp.csc_matrix(X), {}
    mm = np.memmap(os.path.join(tmp, f"X{X.dtype}.dat"), dtype=X.dtype, mode="w+", shape=X.shape)
    mm[:] = X
    mm.flush()
    yield "memmap", mm, {"max_memory": X.nbytes // 8}
    f = h5py.File(os.path.join(tmp, f"X{X.dtype}.h5"), "w")
    f.create_dataset("X", data=X, chunks=(32, X.shape[1]))
    yield "hdf5", f["X"], {"max_memory": X.nbytes // 8}
    try:
        import dask.array as da
    except ImportError:
        return
    yield "dask", da.from_array(X, chunks=(64, X.shape[1])), {}


def fsa_cases(tmp):
    from cvfs import FSAClassifier, FSARanker, FSARegressor

    Xc, yc = _problem()[:2]
    Xr, yr = _problem(task="regression")[:2]
    for dtype in (np.float64, np.float32):
        Xcd, Xrd = Xc.astype(dtype), Xr.astype(dtype)
        for name, X, kw in _layouts(Xcd, tmp):
            for loss in ("logistic", "lorenz", "svm"):
                for bins in (None, 4):
                    est = FSAClassifier(k=5, loss=loss, bins=bins, n_iter=60, **kw).fit(X, yc)
                    yield f"fsa/{loss}/bins{bins}/{name}/{np.dtype(dtype).name}", _fitted(est, Xcd)
        for name, X, kw in _layouts(Xrd, tmp):
            est = FSARegressor(k=5, n_iter=60, **kw).fit(X, yr)
            yield f"fsa/squared/{name}/{np.dtype(dtype).name}", _fitted(est, Xrd)
    est = FSAClassifier(k=5, bins=4, prior="second_order", smoothness=0.1, n_iter=60).fit(Xc, yc)
    yield "fsa/second_order", _fitted(est, Xc)
    w = np.random.default_rng(1).integers(1, 4, Xc.shape[0]).astype(np.float64)
    est = FSAClassifier(k=5, n_iter=60, class_weight="balanced").fit(Xc, yc, sample_weight=w)
    yield "fsa/weighted", _fitted(est, Xc)
    rng = np.random.default_rng(2)
    labels = rng.integers(0, 3, Xc.shape[0])
    Xm = Xc + labels[:, None] * (np.arange(Xc.shape[1]) < 6)
    for loss in ("logistic", "lorenz", "svm"):
        est = FSAClassifier(k=6, loss=loss, n_iter=60).fit(Xm, labels)
        yield f"fsa/multiclass/{loss}", _fitted(est, Xm)
    groups = np.repeat(np.arange(10), Xr.shape[0] // 10)
    est = FSARanker(k=5, n_iter=60).fit(Xr, yr, groups=groups)
    yield "fsa/ranker", _fitted(est, Xr)


def cv_cases():
    from cvfs import FSAClassifierCV

    Xc, yc = _problem(seed=3)[:2]
    est = FSAClassifierCV(ks=(3, 5, 8), cv=3, n_iter=40).fit(Xc, yc)
    out = _fitted(est, Xc)
    out["k"] = np.array([est.k_])
    yield "cv/fsa", out


def sbl_cases():
    import scipy.sparse as sp

    from cvfs import SBLClassifier, SBLRegressor

    rng = np.random.default_rng(4)
    Phi = rng.standard_normal((80, 120))
    theta = np.zeros(120)
    theta[rng.choice(120, 6, replace=False)] = 3 * rng.standard_normal(6)
    y = Phi @ theta + 0.3 * rng.standard_normal(80)
    for screening in ("wtht", "gap", None):
        est = SBLRegressor(lam=0.5, screening=screening).fit(Phi, y)
        yield f"sbl/regressor/{screening}", {"coef": np.asarray(est.coef_)}
    est = SBLRegressor(lam=0.5, positive=True).fit(sp.csr_matrix(np.abs(Phi)), np.abs(y))
    yield "sbl/regressor/positive_csr", {"coef": np.asarray(est.coef_)}
    est = SBLRegressor(lam="auto").fit(Phi, y)
    yield "sbl/regressor/auto", {"coef": np.asarray(est.coef_)}
    Xc = rng.standard_normal((120, 30))
    yc = (Xc[:, 0] + 0.5 * Xc[:, 1] > 0).astype(int)
    est = SBLClassifier(lam=0.1, n_atoms=80).fit(Xc[:80], yc[:80])
    yield "sbl/classifier", {"predict": est.predict(Xc[80:]).astype(np.float64)}


def seed_cases():
    from cvfs import FGMClassifier, InfinitePushRanker

    Xc, yc = _problem(seed=5)[:2]
    for loss in ("squared_hinge", "logistic"):
        est = FGMClassifier(B=3, C=10.0, loss=loss).fit(Xc, yc)
        yield f"seeds/fgm/{loss}", _fitted(est, Xc)
    for penalty in ("l1", "l1_l2"):
        est = InfinitePushRanker(lam=0.01, penalty=penalty, max_iter=200).fit(Xc, yc)
        yield f"seeds/infinite_push/{penalty}", {"coef": np.asarray(est.coef_, dtype=np.float64)}


def app_cases():
    from cvfs import astro, motion

    image, _ = astro.make_scene((48, 48), n_sources=6, random_state=0)[:2]
    cat = astro.localise(image, random_state=0)
    yield "apps/astro/localise", {f: np.asarray(cat[f], dtype=np.float64)
                             for f in ("x", "y", "sigma", "flux")}
    from cvfs.motion.synthetic import make_rigid_motions

    points = make_rigid_motions(3, 120, 15, random_state=0)[0]
    yield "apps/motion/segment", {"labels": motion.segment(points, 3).astype(np.float64)}
    from cvfs.motion.geometry import geometric_affinities
    from cvfs.motion.geometry_features import geometry_features

    rng = np.random.default_rng(1)
    visible = rng.random(points.shape[:2]) > 0.2  # missing entries: the masked paths
    visible[:, :2] = True
    aff = geometric_affinities(points, visible)
    out = {f"{k}_{part}": np.asarray(getattr(a, part), dtype=np.float64)
           for k, a in aff.items() for part in ("data", "indices", "indptr")}
    labels = np.stack([motion.segment(points, 3, camera=c).astype(np.int64)
                       for c in ("perspective", "auto")])
    out["labels"] = labels.astype(np.float64)
    out["features"] = geometry_features(points, labels, visible, affinities=aff)
    yield "apps/motion/geometry", out
    import skimage.data
    import skimage.transform

    from cvfs.keypoints import load_detector

    img = skimage.transform.rescale(skimage.data.astronaut(), 0.5, channel_axis=2)
    det = load_detector()
    found = det.detect(img, max_scale=1)
    yield "apps/keypoints/detect", {name: np.asarray(v, dtype=np.float64)
                                    for name, v in found.items()}
    faces = det.detect_faces(img, max_scale=1)
    yield "apps/keypoints/faces", {"faces": np.asarray(
        [[f.score, *f.box, *np.ravel([f.keypoints[k] for k in sorted(f.keypoints)])]
         for f in faces], dtype=np.float64)}


GROUPS = {"fsa": fsa_cases, "cv": cv_cases, "sbl": sbl_cases, "seeds": seed_cases,
          "apps": app_cases}


def run(groups):
    results = {}
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for g in groups:
            t0 = time.perf_counter()
            cases = GROUPS[g](tmp) if g == "fsa" else GROUPS[g]()
            n = 0
            for case, arrays in cases:
                for field, arr in arrays.items():
                    results[f"{case}::{field}"] = np.asarray(arr)
                n += 1
            print(f"{g}: {n} cases in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return results


def compare(results, ref):
    bad = 0
    for key in sorted(set(ref) | set(results)):
        if key not in results:
            print(f"MISSING  {key}")
            bad += 1
        elif key not in ref:
            print(f"NEW      {key}")
        else:
            a, b = results[key], ref[key]
            if a.shape != b.shape:
                print(f"SHAPE    {key}: {b.shape} -> {a.shape}")
                bad += 1
            elif a.tobytes() != b.tobytes():
                diff = np.nanmax(np.abs(a.astype(np.float64) - b.astype(np.float64))) \
                    if a.size else 0.0
                print(f"DIFF     {key}: max |diff| {diff:.3g}")
                bad += 1
    print(f"{len(ref)} reference arrays, {bad} differ")
    return bad


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--save", type=Path, help="write the outputs to this .npz file")
    p.add_argument("--compare", type=Path, help="compare the outputs with this .npz file")
    p.add_argument("--groups", nargs="+", choices=sorted(GROUPS), default=list(GROUPS))
    args = p.parse_args(argv)
    results = run(args.groups)
    if args.save:
        np.savez(args.save, **results)
        print(f"{len(results)} arrays written to {args.save}")
    if args.compare:
        with np.load(args.compare) as ref:
            ref = {k: ref[k] for k in ref.files if k.split("/", 1)[0] in args.groups}
        return 1 if compare(results, ref) else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
