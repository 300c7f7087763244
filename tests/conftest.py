"""Shared fixtures: the real-data home and deterministic problem factories.

A checkout keeps the shared datasets in ``../shared/data`` beside it: when ``$CVFS_DATA`` is not
set and that folder exists, the tests (and the subprocesses they start) use it as the data home.
"""

import os
from pathlib import Path

import pytest

_CHECKOUT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
if not os.environ.get("CVFS_DATA") and _CHECKOUT_DATA.is_dir():
    os.environ["CVFS_DATA"] = str(_CHECKOUT_DATA)

from cvfs.datasets import DATASETS, data_home  # noqa: E402


@pytest.fixture(scope="session")
def real_data():
    """The data home, when it holds at least one of the registered datasets.

    Skips otherwise on a user's machine; fails under CI (``CI=true``), where the shared data
    is always beside the checkout and real-data tests must run.
    """
    home = data_home()
    if not any(ds.folder(home).is_dir() for ds in DATASETS.values()):
        msg = (f"real data not found in the data home {home}: set CVFS_DATA "
               "(`cvfs data` lists what is found)")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return home
