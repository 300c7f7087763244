"""The layout contract: every data layout gives the in-memory dense fit, for every loss and
dtype; the registry picks layouts by type and takes user layouts; the worked example of
docs/layouts.md runs; the layouts and the fit pipeline import each other only at module level."""

import ast
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import cvfs
from cvfs.core.fsa import decision_function, fsa_fit
from cvfs.core.layouts import Layout, layout_for, register_layout, unregister_layout
from cvfs.core.layouts.dask import DaskLayout
from cvfs.core.layouts.dense import DenseLayout
from cvfs.core.layouts.memmap import MemmapLayout
from cvfs.core.layouts.sparse import SparseLayout

ROOT = Path(__file__).resolve().parents[2]
N, M, K_SEL = 150, 40, 4
LOSSES = ("squared", "logistic", "lorenz", "svm", "rank")
# row blocks of 50 rows: three blocks, and a power-iteration start of 50 rows
BLOCK = 50 * M * 8


def _data(loss, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, M)) * rng.uniform(0.5, 3.0, M) + rng.uniform(-1, 1, M)
    score = X[:, :K_SEL] @ np.array([2.0, -1.5, 1.0, 0.8])
    y = score + 0.3 * rng.standard_normal(N)
    kw = {}
    if loss == "rank":
        i, j = np.triu_indices(N, 1)
        pick = rng.choice(i.size, 2000, replace=False)
        i, j = i[pick], j[pick]
        kw["pairs"] = (i, j, (y[i] > y[j]).astype(np.float64))
    elif loss != "squared":
        y = np.where(y > np.median(y), 1.0, -1.0)
    return X, y, kw


def _layout(name, X, tmp_path):
    """X in the layout ``name``, and the keyword arguments that make the layout read it in
    passes for the first iterations (max_memory: the in-memory loop takes 10 kept columns)."""
    budget = {"max_memory": N * 10 * X.dtype.itemsize}
    if name == "dense":
        return X, {}
    if name == "csr":
        return sp.csr_matrix(X), {}
    if name == "csc":
        return sp.csc_matrix(X), {}
    if name == "memmap":
        np.save(tmp_path / "x.npy", X)
        return np.load(tmp_path / "x.npy", mmap_mode="r"), budget
    if name == "hdf5":
        h5py = pytest.importorskip("h5py")
        with h5py.File(tmp_path / "x.h5", "w") as f:
            f.create_dataset("X", data=X)
        f = h5py.File(tmp_path / "x.h5", "r")
        return f["X"], budget
    da = pytest.importorskip("dask.array")
    return da.from_array(X, chunks=(50, M)), budget


# layouts that keep the power-iteration step sizes of the passes they read X in (the
# in-memory loop stops the power iteration once the estimate is stable): the same support,
# coefficients within 1e-3
LOOSE = {"memmap", "hdf5", "dask"}


@pytest.fixture(autouse=True)
def _synchronous_dask():
    dask = pytest.importorskip("dask")
    with dask.config.set(scheduler="synchronous"):
        yield


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("name", ["dense", "csr", "csc", "memmap", "hdf5", "dask"])
def test_every_layout_gives_the_in_memory_fit(name, loss, dtype, tmp_path):
    X, y, kw = _data(loss)
    X = X.astype(dtype)
    kw.update(loss=loss, n_iter=40, block_bytes=BLOCK)
    ref = fsa_fit(X, y, K_SEL, **kw)
    Xl, extra = _layout(name, X, tmp_path)
    res = fsa_fit(Xl, y, K_SEL, **kw, **extra)
    np.testing.assert_array_equal(res.support, ref.support)
    rtol = 1e-3 if name in LOOSE else (1e-5 if dtype == np.float32 else 1e-9)
    atol = rtol * float(np.abs(ref.coef).max())
    np.testing.assert_allclose(res.coef, ref.coef, rtol=rtol, atol=atol)
    np.testing.assert_allclose(res.intercept, ref.intercept, rtol=rtol, atol=atol)
    if name in LOOSE:  # the layout's passes ran before the in-memory loop took over
        assert res.history["out_of_core_iterations"] > 0
    scores = decision_function(Xl, res.support, res.table, res.bins, res.coef, res.intercept)
    np.testing.assert_allclose(scores, res.decision_function(X), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["csr", "csc", "memmap", "dask"])
def test_piecewise_linear_responses_in_every_layout(name, tmp_path):
    X, y, kw = _data("logistic", seed=1)
    kw.update(loss="logistic", n_iter=40, bins=4, block_bytes=BLOCK)
    ref = fsa_fit(X, y, K_SEL, **kw)
    Xl, extra = _layout(name, X, tmp_path)
    res = fsa_fit(Xl, y, K_SEL, **kw, **extra)
    np.testing.assert_array_equal(res.support, ref.support)
    rtol = 1e-3 if name in LOOSE else 1e-9
    np.testing.assert_allclose(res.coef, ref.coef, rtol=rtol,
                               atol=rtol * float(np.abs(ref.coef).max()))


def test_layout_for_picks_by_type(tmp_path):
    X = np.zeros((4, 3))
    assert layout_for(X) is DenseLayout
    assert layout_for(X.tolist()) is DenseLayout
    assert layout_for(sp.csr_matrix(X)) is SparseLayout
    np.save(tmp_path / "x.npy", X)
    assert layout_for(np.load(tmp_path / "x.npy", mmap_mode="r")) is MemmapLayout
    da = pytest.importorskip("dask.array")
    assert layout_for(da.zeros((4, 3))) is DaskLayout


def test_register_layout_is_asked_first_and_checks_its_argument():
    class Everything(DenseLayout):
        name = "everything"

        @classmethod
        def accepts(cls, X):
            return True

    register_layout(Everything)
    try:
        assert layout_for(sp.csr_matrix(np.eye(3))) is Everything
    finally:
        unregister_layout(Everything)
    assert layout_for(sp.csr_matrix(np.eye(3))) is SparseLayout
    with pytest.raises(TypeError, match="subclass of cvfs.core.layouts.Layout"):
        register_layout(object)
    with pytest.raises(ValueError, match="fallback"):
        unregister_layout(DenseLayout)
    assert issubclass(Everything, Layout)


def test_the_worked_example_of_docs_layouts_runs():
    """The Python blocks of docs/layouts.md, run in order (they end with their own checks)."""
    text = (ROOT / "docs" / "layouts.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks
    namespace = {}
    try:
        for block in blocks:
            exec(compile(block, "docs/layouts.md", "exec"), namespace)  # noqa: S102
    finally:
        for value in namespace.values():
            if isinstance(value, type) and issubclass(value, Layout) and value.__module__ \
                    == "builtins" and value is not Layout:
                unregister_layout(value)


def _function_level_cvfs_imports(path):
    tree = ast.parse(path.read_text())
    bad = []
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(func):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cvfs"):
                bad.append(f"{path.name}:{node.lineno} {node.module}")
            elif isinstance(node, ast.Import):
                bad += [f"{path.name}:{node.lineno} {a.name}" for a in node.names
                        if a.name.startswith("cvfs")]
    return bad


def test_no_import_circle_between_the_pipeline_and_the_layouts():
    core = Path(cvfs.__file__).parent / "core"
    files = [core / "fsa.py", core / "_driver.py", *sorted((core / "layouts").glob("*.py"))]
    bad = [b for f in files for b in _function_level_cvfs_imports(f)]
    assert not bad, f"imports inside functions: {bad}"
    for f in (core / "layouts").glob("*.py"):  # the layouts never import the pipeline
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert not (node.module or "").startswith("cvfs.core.fsa"), f.name
