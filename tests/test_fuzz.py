"""Fuzzing the public API and the model files: every outcome is a result or a ValueError /
TypeError with a message; corrupted model files are always refused.

Random shapes, dtypes, scales and NaN/inf placements go through the estimators, astro, motion
and keypoint detection; model files get bit flips, truncation and crafted content (out-of-range
indices, NaN tables, missing groups, links, external datasets, colliding names) that pass the
file checksum, so the loaders' own checks are exercised. Deterministic (``derandomize``), with
few examples per test so the file runs in about two minutes. The scale-invariance cases
(data x 1e-15, 1, 1e15) are plain tests at the end.
"""

import json

import h5py
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cvfs import FSAClassifier, FSARanker, FSARegressor, SBLRegressor, astro
from cvfs.io import load_estimator, load_model, save_estimator, save_model
from cvfs.io.models import _USERBLOCK, _header, file_sha256

FUZZ = settings(derandomize=True, deadline=None, database=None, max_examples=30,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])
FEW = settings(FUZZ, max_examples=12)
ERRORS = (ValueError, TypeError)


def outcome(func, *args, **kwargs):
    """The result of ``func``, or the ValueError/TypeError it raised (which must have a
    message); any other exception fails the test."""
    try:
        return func(*args, **kwargs)
    except ERRORS as exc:
        assert str(exc), f"{type(exc).__name__} without a message"
        return exc


@st.composite
def arrays(draw, max_rows=30, max_cols=8, min_rows=2):
    """A 2-D array of random shape, dtype and scale, sometimes with NaN/inf entries."""
    n = draw(st.integers(min_rows, max_rows))
    m = draw(st.integers(1, max_cols))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, m)) * 10.0 ** draw(st.integers(-300, 300))
    dtype = draw(st.sampled_from([np.float64, np.float32, np.int64]))
    with np.errstate(over="ignore", invalid="ignore"):
        X = X.astype(dtype) if dtype is not np.int64 else np.round(
            np.clip(X, -1e6, 1e6)).astype(np.int64)
    bad = draw(st.sampled_from([None, None, np.nan, np.inf, -np.inf]))
    if bad is not None:
        X = X.astype(np.float64)
        X[draw(st.integers(0, n - 1)), draw(st.integers(0, m - 1))] = bad
    return X, rng


# ---- estimators ----

@FUZZ
@given(data=arrays(), which=st.sampled_from(["clf", "clf-pl", "reg", "reg-pl", "rank"]))
def test_fsa_estimators_never_crash(data, which):
    X, rng = data
    n = X.shape[0]
    est = {"clf": FSAClassifier(k=2, n_iter=8), "clf-pl": FSAClassifier(k=2, n_iter=8, bins=3),
           "reg": FSARegressor(k=2, n_iter=8), "reg-pl": FSARegressor(k=2, n_iter=8, bins=3),
           "rank": FSARanker(k=2, n_iter=8, bins=2)}[which]
    y = rng.integers(0, 2, n) if which.startswith("clf") else rng.standard_normal(n)
    kw = {"groups": rng.integers(0, 3, n)} if which == "rank" else {}
    res = outcome(est.fit, X, y, **kw)
    if not np.isfinite(X.astype(np.float64)).all():
        assert isinstance(res, ValueError)
    if res is est:
        assert est.support_.sum() <= min(2, X.shape[1]) and np.isfinite(est.coef_).all()
        out = outcome(est.predict, X)
        assert isinstance(out, (np.ndarray, *ERRORS))


@FUZZ
@given(data=arrays(max_rows=20, max_cols=12, min_rows=1), lam=st.floats(1e-6, 10.0))
def test_sbl_never_crashes(data, lam):
    X, rng = data
    y = rng.standard_normal(X.shape[0])
    est = SBLRegressor(lam=lam, max_iter=3)
    res = outcome(est.fit, X, y)
    if not np.isfinite(X.astype(np.float64)).all():
        assert isinstance(res, ValueError)
    if res is est:
        assert np.isfinite(est.coef_).all()
        outcome(est.predict, X)


# ---- applications ----

@FEW
@given(size=st.integers(4, 14), scale=st.integers(-300, 300), seed=st.integers(0, 1000),
       bad=st.sampled_from([None, None, np.nan, np.inf]), const=st.booleans())
def test_astro_never_crashes(size, scale, seed, bad, const):
    rng = np.random.default_rng(seed)
    img = astro.render_psf((size, size), size / 2, size / 2, 1.2, 50.0) + \
        rng.standard_normal((size, size))
    if const:
        img[:] = 3.0
    img = img * 10.0**scale
    if bad is not None:
        img[0, 0] = bad
    res = outcome(astro.localise_and_denoise, img, n_atoms=150, random_state=0, sbl_iter=2)
    finite = img[np.isfinite(img)]
    if const or finite.size == 0 or np.ptp(finite / np.max(np.abs(finite))) == 0:
        # NaN and infinite pixels are masked; a constant or all-NaN image is an error
        assert isinstance(res, ValueError)
    else:
        assert not isinstance(res, Exception), res
        assert res.model.shape == img.shape
        assert np.isfinite(res.catalogue["x"]).all() and np.isfinite(res.catalogue["y"]).all()


@FEW
@given(n_pts=st.integers(5, 12), n_frames=st.integers(1, 4), scale=st.integers(-300, 300),
       seed=st.integers(0, 1000), bad=st.sampled_from([None, None, np.nan, np.inf]))
def test_motion_segment_never_crashes(n_pts, n_frames, scale, seed, bad):
    from cvfs.motion import segment

    pts = np.random.default_rng(seed).standard_normal((n_pts, n_frames, 2)) * 10.0**scale
    if bad is not None:
        pts[0, 0, 0] = bad
    res = outcome(segment, pts, 2)
    if bad is not None or n_pts < 8 or n_frames < 2:
        assert isinstance(res, ValueError)
    elif not isinstance(res, Exception):
        assert res.shape == (n_pts,) and set(res.tolist()) <= {0, 1}


@pytest.fixture(scope="module")
def detector():
    from cvfs.keypoints import load_detector

    return load_detector()


@settings(FUZZ, max_examples=8)
@given(h=st.integers(20, 40), w=st.integers(20, 40),
       dtype=st.sampled_from(["uint8", "float32", "float64", "int32", "uint16"]),
       scale=st.sampled_from([1.0, 1e-12, 1e3]), seed=st.integers(0, 1000),
       bad=st.sampled_from([None, np.nan]))
def test_keypoint_detect_never_crashes(detector, h, w, dtype, scale, seed, bad):
    img = np.random.default_rng(seed).random((h, w, 3)) * scale
    img = (img * 255).astype(dtype) if dtype in ("uint8", "int32", "uint16") else \
        img.astype(dtype)
    if bad is not None and img.dtype.kind == "f":
        img[0, 0, 0] = bad
    res = outcome(detector.detect, img, max_scale=1.0)
    if not isinstance(res, Exception):
        assert set(res) == set(detector.keypoints)


# ---- model files ----

@pytest.fixture(scope="module")
def ranker_file(tmp_path_factory):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 5))
    est = FSARanker(k=2, bins=2, n_iter=10).fit(X, X[:, 1], groups=np.repeat([0, 1, 2], 10))
    path = tmp_path_factory.mktemp("models") / "ranker.h5"
    save_estimator(path, est, settings={"note": "fuzz"})
    return path, est, X


@settings(FUZZ, max_examples=100)
@given(pos=st.floats(0.0, 1.0, exclude_max=True), bit=st.integers(0, 7))
def test_bit_flip_anywhere_is_refused(ranker_file, tmp_path_factory, pos, bit):
    path, _, _ = ranker_file
    data = bytearray(path.read_bytes())
    i = int(pos * len(data))
    data[i] ^= 1 << bit
    bad = tmp_path_factory.mktemp("flip") / "m.h5"
    bad.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="checksum|header|not a readable"):
        load_estimator(bad)


@settings(FUZZ, max_examples=20)
@given(frac=st.floats(0.0, 1.0, exclude_max=True))
def test_truncated_file_is_refused(ranker_file, tmp_path_factory, frac):
    path, _, _ = ranker_file
    data = path.read_bytes()
    bad = tmp_path_factory.mktemp("trunc") / "m.h5"
    bad.write_bytes(data[:int(frac * len(data))])
    with pytest.raises(ValueError, match="checksum|truncated|header|not a readable"):
        load_estimator(bad)


def _arrays_of(est):
    from cvfs.io.estimators import _SCALAR

    out = {}
    for attr, value in vars(est).items():
        if not attr.endswith("_") or attr.startswith("_"):
            continue
        if isinstance(value, dict):
            out.update({f"{attr}/{k}": np.asarray(v) for k, v in value.items()})
        elif isinstance(value, np.ndarray):
            out[attr] = value
        else:
            out[_SCALAR + attr] = np.asarray(value)
    return out


def _save_raw(path, est, arrays):
    save_model(path, type(est).__name__, arrays, params=est.get_params(), settings={})
    return path


@FUZZ
@given(index=st.integers(-2**62, 2**62), slot=st.integers(0, 1))
def test_out_of_range_support_is_refused(ranker_file, tmp_path_factory, index, slot):
    path, est, X = ranker_file
    arrays = _arrays_of(est)
    support = np.flatnonzero(arrays["support_"])  # the index form files may hold
    support[slot] = index
    bad = _save_raw(tmp_path_factory.mktemp("idx") / "m.h5", est, dict(arrays, support_=support))
    res = outcome(load_estimator, bad)
    ok = 0 <= index < X.shape[1] and np.all(np.diff(support) > 0)
    if ok:
        back = res[0]
        assert back.decision_function(X).shape == (X.shape[0],)
    else:
        assert isinstance(res, ValueError) and "support_" in str(res)


@pytest.mark.parametrize("change, match", [
    (lambda a: a.update(coef_=np.full_like(a["coef_"], np.nan)), "'coef_' holds NaN"),
    (lambda a: a.update(response_table_=a["response_table_"][:1]), "response_table_ must"),
    (lambda a: a.update(coef_=a["coef_"][:, :2]), "coef_ must"),
    (lambda a: a.update(predict=np.zeros(3)), "unexpected array 'predict'"),
    (lambda a: a.update({"__scalar__/decision_function": np.zeros(())}), "unexpected array"),
    (lambda a: a.pop("support_"), r"lacks the array\(s\) \['support_'\]"),
    (lambda a: a.update({"__scalar__/n_features_in_": np.array(-3)}), "n_features_in_"),
    (lambda a: a.update({"__scalar__/intercept_": np.array(np.inf)}), "holds NaN or infinite"),
    (lambda a: a.update(support_=np.array([3, 3])), "sorted unique"),
    (lambda a: a.update(support_=np.array([0.5, 1.0])), "integer"),
])
def test_crafted_estimator_content_is_refused(ranker_file, tmp_path, change, match):
    _, est, _ = ranker_file
    arrays = _arrays_of(est)
    change(arrays)
    with pytest.raises(ValueError, match=match):
        load_estimator(_save_raw(tmp_path / "m.h5", est, arrays))


def test_crafted_parameters_are_refused(ranker_file, tmp_path):
    _, est, _ = ranker_file
    arrays = _arrays_of(est)
    for params, match in [({"bins": 3}, "coef_ must"), ({"bins": -1}, "invalid FSARanker"),
                          ({"nonsense": 1}, "invalid FSARanker")]:
        save_model(tmp_path / "m.h5", "FSARanker", arrays, params=dict(est.get_params(), **params))
        with pytest.raises(ValueError, match=match):
            load_estimator(tmp_path / "m.h5")


def _seal(path):
    """Write the file checksum of an HDF5 file made with a 512-byte user block (the content is
    whatever the test crafted), as a tampering writer could."""
    digest = file_sha256(path, start=_USERBLOCK)
    with open(path, "r+b") as f:
        f.write(_header(digest))
    return path


def _crafted(path, build):
    """A model file with valid root attributes and file checksum, /arrays and /settings built
    by ``build(f)``."""
    with h5py.File(path, "w", userblock_size=_USERBLOCK) as f:
        for key, value in {"format_version": 2, "cvfs_version": "0", "kind": "Test",
                           "params": "{}", "training": "{}", "git_commit": "x",
                           "random_state": "null", "created": "x", "checksum": "0"}.items():
            f.attrs[key] = value
        build(f)
    return _seal(path)


def test_crafted_layouts_are_refused(tmp_path):
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.arange(4.0).tobytes())
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as g:
        g["w"] = np.zeros(3)

    def external(f):
        f.create_group("settings")
        f.create_group("arrays").create_dataset("w", shape=(4,), dtype="f8",
                                                external=[(str(secret), 0, 32)])

    def virtual(f):
        f.create_group("settings")
        layout = h5py.VirtualLayout(shape=(3,), dtype="f8")
        layout[:] = h5py.VirtualSource(str(other), "w", shape=(3,))
        f.create_group("arrays").create_virtual_dataset("w", layout)

    def soft(f):
        f.create_group("settings")
        f.create_group("arrays")["w"] = h5py.SoftLink("/settings")

    def extlink(f):
        f.create_group("settings")
        f.create_group("arrays")["w"] = h5py.ExternalLink(str(other), "w")

    def no_settings(f):
        f.create_group("arrays")["w"] = np.zeros(2)

    def strings(f):
        f.create_group("settings")
        f.create_group("arrays")["w"] = np.array([b"a", b"b"])

    def bad_json(f):
        f.create_group("settings").attrs["x"] = "{not json"
        f.create_group("arrays")["w"] = np.zeros(2)

    cases = [(external, "outside the file"), (virtual, "outside the file"),
             (soft, "SoftLink"), (extlink, "ExternalLink"),
             (no_settings, "lacks the group /settings"), (strings, "has dtype"),
             (bad_json, "content checksum")]
    for build, match in cases:
        path = _crafted(tmp_path / f"{build.__name__}.h5", build)
        with pytest.raises(ValueError, match=match):
            load_model(path)


def test_version_one_files_are_refused_and_upgraded(tmp_path, ranker_file):
    from cvfs.io import upgrade_model

    path, est, X = ranker_file
    old = tmp_path / "v1.h5"
    m = load_model(path)
    with h5py.File(old, "w") as f:  # the version-1 layout: no user block, no checksum
        for key in ("cvfs_version", "git_commit", "created"):
            f.attrs[key] = m.meta[key]
        f.attrs["format_version"] = 1
        f.attrs["kind"] = m.kind
        for key in ("params", "training"):
            f.attrs[key] = json.dumps(getattr(m, key), sort_keys=True)
        f.attrs["random_state"] = "null"
        for name, a in m.arrays.items():
            f.create_dataset(f"arrays/{name}", data=a)
        f.create_group("settings").attrs["note"] = '"fuzz"'
    with pytest.raises(ValueError, match="upgrade_model"):
        load_estimator(old)
    with pytest.raises(ValueError, match="does not match sha256"):
        upgrade_model(old, tmp_path / "new.h5", sha256="0" * 64)
    upgrade_model(old, tmp_path / "new.h5", sha256=file_sha256(old))
    back, _ = load_estimator(tmp_path / "new.h5")
    np.testing.assert_array_equal(back.decision_function(X), est.decision_function(X))


# ---- keypoint detector files ----

@pytest.fixture(scope="module")
def small_detector(tmp_path_factory):
    from cvfs.keypoints._additive import AdditiveModel
    from cvfs.keypoints.detector import KeypointDetector

    clf = AdditiveModel([3, 900], [0.0, -1.0], [4.0, 2.0], np.arange(6.0).reshape(2, 3) / 10,
                        -0.1)
    det = KeypointDetector({"nose_center": clf}, {"haar_per_channel": 20,
                                                  "hog_border": "window"})
    path = det.save(tmp_path_factory.mktemp("det") / "det.h5")
    return path, load_model(path)


def _resave(path, model, arrays=None, settings=None):
    save_model(path, model.kind, model.arrays if arrays is None else arrays,
               settings=model.settings if settings is None else settings)
    return path


@FUZZ
@given(index=st.integers(-2**40, 2**40), slot=st.integers(0, 1))
def test_detector_feature_index_is_checked(small_detector, tmp_path_factory, index, slot):
    from cvfs.keypoints import load_detector

    path, model = small_detector
    feats = model.arrays["clf0/features"].copy()
    feats[slot] = index
    bad = _resave(tmp_path_factory.mktemp("det") / "d.h5", model,
                  dict(model.arrays, **{"clf0/features": feats}))
    res = outcome(load_detector, bad)
    n_features = 864 + 3 * 20
    if 0 <= index < n_features:
        img = np.random.default_rng(0).random((30, 30, 3))
        assert set(res.detect(img, max_scale=1.0)) == {"nose_center"}
    else:
        assert isinstance(res, ValueError) and "outside the feature pool" in str(res)


@pytest.mark.parametrize("arrays, settings, match", [
    ({"clf0/table": np.full((2, 3), np.nan)}, None, "holds NaN"),
    ({"clf0/lo": np.array([0.0, 1e300])}, None, "lo must lie"),
    ({"clf0/scale": np.array([-1.0, 1.0])}, None, "scale in"),
    ({"clf0/table": np.zeros((3, 3))}, None, "table must be"),
    ({"clf0/step": np.array([7])}, None, "step must be a bool"),
    ({"clf0/cascade_ends": np.array([5]), "clf0/cascade_thresholds": np.array([0.0])}, None,
     "cascade_ends must increase"),
    ({"clf1/features": np.array([1])}, None, "unexpected arrays"),
    ({"predict": np.zeros(1)}, None, "unexpected arrays"),
    (None, {"keypoints": ["third_eye"]}, "setting 'keypoints'"),
    (None, {"thresholds": {"nose_center": None}}, "setting 'thresholds'"),
    (None, {"pool": {"haar_per_channel": 10**9}}, "not a valid feature pool"),
    (None, {"scales_per_octave": 10**9}, "scales_per_octave"),
    (None, {"max_scale": float("nan")}, "max_scale"),
    (None, {"window": 48}, "window"),
    (None, {"pool": None}, "setting 'pool'"),
])
def test_crafted_detector_content_is_refused(small_detector, tmp_path, arrays, settings, match):
    from cvfs.keypoints import load_detector

    _, model = small_detector
    a = dict(model.arrays, **(arrays or {}))
    s = dict(model.settings, **(settings or {}))
    with pytest.raises(ValueError, match=match):
        load_detector(_resave(tmp_path / "d.h5", model, a, s))


def test_detector_missing_setting_and_array(small_detector, tmp_path):
    from cvfs.keypoints import load_detector

    _, model = small_detector
    s = {k: v for k, v in model.settings.items() if k != "thresholds"}
    with pytest.raises(ValueError, match="lacks the setting 'thresholds'"):
        load_detector(_resave(tmp_path / "d.h5", model, settings=s))
    a = {k: v for k, v in model.arrays.items() if k != "clf0/table"}
    with pytest.raises(ValueError, match=r"lacks the arrays \['clf0/table'\]"):
        load_detector(_resave(tmp_path / "d.h5", model, arrays=a))


def test_motion_ranker_checks(tmp_path):
    from cvfs.datasets import models_dir
    from cvfs.motion import segment
    from cvfs.motion.ranking import load_ranker

    model = load_model(models_dir() / "motion_ranker.h5")
    pts = np.random.default_rng(0).standard_normal((10, 3, 2))
    for arrays, new, match in [
        ({"coef_": np.full_like(model.arrays["coef_"], np.nan)}, None, "'coef_' holds"),
        ({"support_": model.arrays["support_"] + 10**6}, None, "support_"),
        (None, {"n_features": 7}, "n_features"),
        (None, {"alphas": [-1.0]}, "alphas"),
        (None, {"cluster_floor": "x"}, "cluster_floor"),
    ]:
        path = tmp_path / "r.h5"
        save_model(path, model.kind, dict(model.arrays, **(arrays or {})), params=model.params,
                   settings=dict(model.settings, **(new or {})))
        with pytest.raises(ValueError, match=match):
            load_ranker(path)
        with pytest.raises(ValueError, match=match):
            segment(pts, 2, model=path)
    path = tmp_path / "r.h5"
    save_model(path, model.kind, model.arrays, params=model.params,
               settings={k: v for k, v in model.settings.items() if k != "alphas"})
    with pytest.raises(ValueError, match=r"lacks the setting\(s\) \['alphas'\]"):
        load_ranker(path)


# ---- scale invariance (deterministic) ----

SCALES = (1e-15, 1.0, 1e15)


@pytest.mark.parametrize("bins", [None, 3])
def test_fsa_results_do_not_depend_on_the_scale_of_x(bins):
    from cvfs.datasets.synthetic import make_ar1_classification

    X, y, _ = make_ar1_classification(200, 30, k_true=3, random_state=0)
    ref = None
    for c in SCALES:
        clf = FSAClassifier(k=3, n_iter=40, bins=bins).fit(X * c, y)
        reg = FSARegressor(k=3, n_iter=40, bins=bins).fit(X * c, X[:, 4] - X[:, 9])
        out = (clf.support_, clf.predict(X * c), reg.support_, reg.predict(X * c))
        if ref is None:
            ref = out
            assert clf.score(X, y) > 0.7
        np.testing.assert_array_equal(out[0], ref[0])
        np.testing.assert_array_equal(out[1], ref[1])
        np.testing.assert_array_equal(out[2], ref[2])
        np.testing.assert_allclose(out[3], ref[3], rtol=1e-6, atol=1e-9)


def test_fsa_constant_columns_are_relative_to_their_magnitude():
    rng = np.random.default_rng(0)
    n = 200
    signal = rng.standard_normal(n)
    y = np.where(signal + 0.3 * rng.standard_normal(n) > 0, 1, -1)
    X = np.column_stack([
        np.full(n, 7.0),                          # constant
        1.0 + 1e-14 * rng.standard_normal(n),     # spread 1e-14 of its magnitude: constant
        1e-13 + 1e-14 * signal,                   # tiny absolute spread: a real feature
        rng.standard_normal(n),
    ])
    clf = FSAClassifier(k=1, n_iter=40).fit(X, y)
    assert clf.get_support(indices=True).tolist() == [2] and clf.score(X, y) > 0.8
    clf = FSAClassifier(k=4, n_iter=40).fit(X, y)
    assert clf.coef_[:2].tolist() == [0.0, 0.0]


@pytest.mark.parametrize("bins", [None, 3])
def test_fsa_overflowing_values_are_a_clear_error(bins):
    X = np.random.default_rng(0).standard_normal((20, 3))
    X[4, 1] = 1e300
    with pytest.raises(ValueError, match="X column 1 has values too large"):
        FSAClassifier(k=1, n_iter=5, bins=bins).fit(X, np.arange(20) % 2)


def test_astro_results_do_not_depend_on_the_scale_of_the_image():
    img, _, _ = astro.make_scene((16, 16), 3, random_state=1)
    ref = astro.localise_and_denoise(img, n_atoms=1000, random_state=0)
    assert len(astro.leaves(ref.catalogue)) == 3  # one blend: a parent row and its 2 sources
    for c in (1e-15, 1e15, 1e-300, 1e300):
        res = astro.localise_and_denoise(img * c, n_atoms=1000, random_state=0)
        cat = res.catalogue
        assert len(cat) == len(ref.catalogue)
        for f in ("x", "y", "sigma"):
            np.testing.assert_allclose(cat[f], ref.catalogue[f], atol=1e-5)
        np.testing.assert_allclose(cat["flux"] / c, ref.catalogue["flux"], rtol=1e-5)
        np.testing.assert_allclose(res.model / c, ref.model, rtol=1e-5)
        np.testing.assert_allclose(astro.denoise(img * c, n_atoms=1000, random_state=0) / c,
                                   ref.model, rtol=1e-5)
        assert res.noise_sigma / c == pytest.approx(ref.noise_sigma, rel=1e-9)
    with pytest.raises(ValueError, match="image is constant"):
        astro.localise(np.full((8, 8), 1e-300))
    with pytest.raises(ValueError, match="noise_sigma=1e-20 is below the float64 resolution"):
        astro.localise(img, noise_sigma=1e-20)
