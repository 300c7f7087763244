import h5py
import numpy as np
import pytest

from cvfs.io import atomic_write_text, load_model, save_model


def test_model_roundtrip(tmp_path):
    path = tmp_path / "m.h5"
    arrays = {"coef": np.arange(6.0).reshape(2, 3), "nested/support": np.array([3, 7])}
    save_model(path, "Test", arrays, params={"k": 2}, settings={"names": ["a", "b"]},
               training={"n": 10}, random_state=4)
    m = load_model(path, kind="Test", shapes={"coef": (2, None)})
    np.testing.assert_array_equal(m.arrays["coef"], arrays["coef"])
    np.testing.assert_array_equal(m.arrays["nested/support"], [3, 7])
    assert m.params == {"k": 2} and m.settings == {"names": ["a", "b"]}
    assert m.training == {"n": 10} and m.meta["random_state"] == 4


def test_load_model_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="model file not found"):
        load_model(tmp_path / "none.h5")
    bad = tmp_path / "bad.h5"
    bad.write_bytes(b"not hdf5")
    with pytest.raises(ValueError, match="not a readable HDF5"):
        load_model(bad)
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:
        f["x"] = 1
    with pytest.raises(ValueError, match="not a cvfs model file"):
        load_model(other)
    path = save_model(tmp_path / "m.h5", "A", {"w": np.zeros(3)})
    with pytest.raises(ValueError, match="holds a 'A' model, expected 'B'"):
        load_model(path, kind="B")
    with pytest.raises(ValueError, match="has shape"):
        load_model(path, shapes={"w": (4,)})
    with pytest.raises(ValueError, match="array names"):
        save_model(path, "A", {"": np.zeros(1)})


def test_failed_write_keeps_previous_file(tmp_path):
    path = save_model(tmp_path / "m.h5", "A", {"w": np.ones(2)})
    with pytest.raises(TypeError, match="dtype object"):
        save_model(path, "A", {"w": np.array([object()])})
    np.testing.assert_array_equal(load_model(path).arrays["w"], [1, 1])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.h5"]


def test_atomic_write_text(tmp_path):
    import os

    atomic_write_text(tmp_path / "a" / "b.txt", "hi")
    assert (tmp_path / "a" / "b.txt").read_text() == "hi"
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "a" / "b.txt").stat().st_mode & 0o777 == 0o666 & ~umask


def test_estimator_roundtrip_gives_identical_predictions(tmp_path):
    from cvfs import FSAClassifier, FSARanker
    from cvfs.datasets.synthetic import make_ar1_classification
    from cvfs.io import load_estimator, save_estimator

    X, y, _ = make_ar1_classification(300, 50, k_true=3, random_state=0)
    for est in (FSAClassifier(k=3, bins=4, n_iter=50), FSARanker(k=3, n_iter=50)):
        est.fit(X, y)
        save_estimator(tmp_path / "e.h5", est, settings={"note": "x"})
        back, model = load_estimator(tmp_path / "e.h5", kind=type(est).__name__)
        np.testing.assert_array_equal(back.decision_function(X), est.decision_function(X))
        assert back.get_params() == est.get_params() and model.settings == {"note": "x"}
        assert back.history_["n_kept"].tolist() == est.history_["n_kept"].tolist()
    with pytest.raises(ValueError, match="not fitted"):
        save_estimator(tmp_path / "u.h5", FSAClassifier())
    with pytest.raises(ValueError, match="saves cvfs estimators"):
        save_estimator(tmp_path / "u.h5", object())


def test_load_estimator_rejects_other_models(tmp_path):
    from cvfs.io import load_estimator

    path = save_model(tmp_path / "m.h5", "keypoint-detector", {"w": np.zeros(2)})
    with pytest.raises(ValueError, match="not a cvfs estimator"):
        load_estimator(path)
