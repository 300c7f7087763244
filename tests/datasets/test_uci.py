"""Loaders of the UCI / NIPS 2003 feature-selection data in their original formats."""

import numpy as np
import pytest
import scipy.sparse as sp

from cvfs.datasets import data_home
from cvfs.datasets.uci import load_colon, load_dexter, load_sonar

pytestmark = pytest.mark.skipif(
    not (data_home() / "uci").is_dir(), reason="no uci data")


def test_dexter_sparse_shape_and_labels():
    X, y = load_dexter()
    assert sp.issparse(X) and X.shape == (300, 20000)
    assert 48 <= np.diff(X.indptr).min() and np.diff(X.indptr).max() <= 329
    np.testing.assert_array_equal(np.unique(y, return_counts=True)[1], [150, 150])


def test_colon_and_sonar():
    X, y = load_colon()
    assert X.shape == (62, 2000) and (y == 1).sum() == 40
    X, y = load_sonar()
    assert X.shape == (208, 60) and (y == 1).sum() == 111 and X.min() >= 0 and X.max() <= 1


def test_dexter_too_few_features_is_an_error():
    with pytest.raises(ValueError, match="exceeds n_features=100"):
        load_dexter(data_home() / "uci" / "dexter", n_features=100)
