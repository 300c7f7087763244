"""The synthetic designs written out of core: Zarr store of the equally correlated data."""

import numpy as np
import pytest

from cvfs.datasets import synthetic

zarr = pytest.importorskip("zarr")


def test_zarr_store_rows_labels_and_chunks(tmp_path):
    path = tmp_path / "eq.zarr"
    true = synthetic.write_equicorrelated_zarr(path, 1000, 60, k_true=5, chunk_rows=300,
                                               random_state=3)
    root = zarr.open_group(str(path), mode="r")
    X, y = root["X"][:], root["y"][:]
    assert X.shape == (1000, 60) and X.dtype == np.float32 and root["X"].chunks == (300, 60)
    np.testing.assert_array_equal(true, [9, 19, 29, 39, 49])
    np.testing.assert_array_equal(y, X[:, true].sum(axis=1, dtype=np.float64) > 0)
    # equally correlated: every pair of features has correlation alpha^2 / (1 + alpha^2) = 0.2
    c = np.corrcoef(X[:, :10].T)[np.triu_indices(10, 1)]
    assert abs(c.mean() - 0.2) < 0.03
    again = tmp_path / "again.zarr"
    synthetic.write_equicorrelated_zarr(again, 1000, 60, k_true=5, chunk_rows=300, random_state=3)
    np.testing.assert_array_equal(zarr.open_group(str(again), mode="r")["X"][:], X)


def test_zarr_interrupted_write_leaves_nothing(tmp_path, monkeypatch):
    path = tmp_path / "eq.zarr"
    synthetic.write_equicorrelated_zarr(path, 200, 20, k_true=2, random_state=0)
    before = zarr.open_group(str(path), mode="r")["X"][:]
    calls = []

    def failing(*args, **kwargs):
        if calls:
            raise KeyboardInterrupt
        calls.append(1)
        return np.zeros((args[0], args[1]), np.float32)

    monkeypatch.setattr(synthetic, "equicorrelated_design", failing)
    with pytest.raises(KeyboardInterrupt):
        synthetic.write_equicorrelated_zarr(path, 400, 20, k_true=2, chunk_rows=100,
                                            random_state=1)
    np.testing.assert_array_equal(zarr.open_group(str(path), mode="r")["X"][:], before)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eq.zarr"]


def test_zarr_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="n_features"):
        synthetic.write_equicorrelated_zarr(tmp_path / "x.zarr", 10, 20, k_true=5)
    assert not (tmp_path / "x.zarr").exists()
