"""Shared fixtures: the real-data home and deterministic problem factories."""

import os

import pytest

from cvfs.datasets import data_home


@pytest.fixture(scope="session")
def real_data():
    """The data home (``$CVFS_DATA`` or ``../shared/data``).

    Skips when absent on a user's machine; fails under CI (``CI=true``), where the shared data
    is always beside the checkout and real-data tests must run.
    """
    home = data_home()
    if home is None or not home.is_dir():
        msg = "real data not found: set CVFS_DATA (see README, 'Data')"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return home
