"""FSA on Dask arrays: equal to the in-memory fit on the threaded scheduler and on a local
cluster of two worker processes; Zarr input; errors; the per-iteration traffic bound."""

import contextlib

import numpy as np
import pytest

da = pytest.importorskip("dask.array")

from cvfs.core.fsa import fsa_fit  # noqa: E402
from cvfs.core.layouts.dask import _group_chunks  # noqa: E402
from cvfs.datasets.synthetic import make_ar1_classification  # noqa: E402
from cvfs.estimators import FSAClassifier, FSARanker, FSARegressor  # noqa: E402

CASES = [("logistic", None), ("lorenz", None), ("lorenz", 4)]


@pytest.fixture(scope="module")
def data():
    X, y, true = make_ar1_classification(2000, 300, k_true=8, random_state=14)
    return X.astype(np.float32), np.where(y > 0, 1.0, -1.0), true


@pytest.fixture(scope="module")
def references(data):
    X, y, _ = data
    return {case: fsa_fit(X, y, 8, loss=case[0], bins=case[1]) for case in CASES}


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        with distributed.Client(cluster, set_as_default=False) as c:
            yield c


@contextlib.contextmanager
def _scheduler(name, request):
    """Dask's threaded scheduler, or the module's local cluster as the current client."""
    if name == "threads":
        import dask

        with dask.config.set(scheduler="threads"):
            yield None
    else:
        c = request.getfixturevalue("client")
        with c.as_current():
            yield c


@pytest.fixture(params=["threads", "cluster"])
def scheduler(request):
    """Runs the test on Dask's threaded scheduler, then on the local cluster."""
    with _scheduler(request.param, request) as c:
        yield c


def _same(res, ref):
    np.testing.assert_array_equal(res.support, ref.support)
    np.testing.assert_allclose(res.coef, ref.coef, rtol=1e-6, atol=1e-8)
    assert res.intercept == pytest.approx(ref.intercept, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("case", CASES)
def test_dask_fit_equals_in_memory(data, references, scheduler, case):
    """Kept columns on disk, then persisted, then the in-memory loop: same model."""
    X, y, true = data
    Xd = da.from_array(X, chunks=(250, 100))  # column chunks are merged into whole rows
    res = fsa_fit(Xd, y, 8, loss=case[0], bins=case[1], max_memory=X.nbytes // 8,
                  worker_memory=X.nbytes // 3)
    ref = references[case]
    _same(res, ref)
    np.testing.assert_array_equal(res.support, true)
    h = res.history
    n_dask = h["out_of_core_iterations"]
    assert n_dask >= 3 and h["dask"]["n_chunks"] == 8
    # persisted once the kept columns fit a third of X, gathered once they fit an eighth
    first = h["dask"]["persisted_at"][0]
    assert 2000 * h["n_kept"][first] * 4 <= X.nbytes // 3 < 2000 * 300 * 4
    assert 2000 * h["n_kept"][n_dask - 1] * 4 <= X.nbytes // 8
    # iteration 0 from the statistics pass; its kept columns (more than a third of X) to disk
    assert h["width"][0] == 0 and h["dask"]["spilled_at"][0] == 0
    assert h["width"][1] == h["n_kept"][0] < 300
    assert h["width"][first + 1] == h["n_kept"][first]  # then the persisted columns
    np.testing.assert_allclose(h["loss"], ref.history["loss"], rtol=1e-6)


def test_ranker_on_dask_equals_in_memory(scheduler):
    rng = np.random.default_rng(13)
    X = rng.normal(size=(2000, 60)).astype(np.float32)
    y = 2 * X[:, 4] - X[:, 17] + 0.3 * rng.normal(size=2000)
    groups = np.repeat(np.arange(200), 10)
    params = dict(k=4, n_iter=100, max_memory=X.nbytes // 8)
    ref = FSARanker(**params).fit(X, y, groups)
    # chunks of 333 rows cut groups of 10: the rows are rechunked at group boundaries
    Xd = da.from_array(X, chunks=(333, 60))
    est = FSARanker(**params).fit(Xd, da.from_array(y, chunks=500), groups)
    np.testing.assert_array_equal(est.get_support(indices=True), ref.get_support(indices=True))
    assert {4, 17} <= set(est.get_support(indices=True).tolist())
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-6, atol=1e-8)
    assert est.history_["out_of_core_iterations"] >= 3
    assert est.history_["dask"]["n_chunks"] == 6


def test_group_chunks_move_cuts_past_pairs():
    pi = np.array([0, 3, 4, 8])
    pj = np.array([2, 5, 6, 9])  # pairs span rows 0-2, 3-6 and 8-9
    assert _group_chunks((3, 3, 4), pi, pj) == (3, 4, 3)
    assert _group_chunks((5, 5), pi, pj) == (7, 3)
    assert _group_chunks((9, 1), pi, pj) == (10,)  # no cut left: one chunk


def test_zarr_input_and_dask_targets(tmp_path, data, references):
    pytest.importorskip("zarr")
    X, y, true = data
    da.from_array(X, chunks=(500, 300)).to_zarr(str(tmp_path / "x.zarr"))
    Xz = da.from_zarr(str(tmp_path / "x.zarr"))
    clf = FSAClassifier(k=8, loss="lorenz", max_memory=X.nbytes // 8).fit(
        Xz, da.from_array(y, chunks=700))
    ref = references[("lorenz", None)]
    np.testing.assert_array_equal(clf.get_support(indices=True), ref.support)
    np.testing.assert_allclose(clf.coef_, ref.coef[:, 0], rtol=1e-6, atol=1e-8)
    assert clf.n_features_in_ == 300
    assert clf.history_["dask"]["source"] == "zarr"  # read straight from the Zarr array
    # row chunks unlike the store's (whose column chunks the read merges): same fit
    da.from_array(X, chunks=(700, 100)).to_zarr(str(tmp_path / "y.zarr"))
    Xy = da.from_zarr(str(tmp_path / "y.zarr"), chunks=(450, 300))
    clf2 = FSAClassifier(k=8, loss="lorenz", max_memory=X.nbytes // 8).fit(Xy, y)
    assert clf2.history_["dask"]["source"] == "zarr"
    np.testing.assert_array_equal(clf2.get_support(indices=True), ref.support)
    np.testing.assert_allclose(clf2.coef_, ref.coef[:, 0], rtol=1e-6, atol=1e-8)
    # a transformed array is read through Dask's tasks
    clf3 = FSAClassifier(k=8, loss="lorenz", max_memory=X.nbytes // 8).fit(Xy + 0.0, y)
    assert clf3.history_["dask"]["source"] == "dask"
    np.testing.assert_array_equal(clf3.get_support(indices=True), ref.support)
    mem = FSAClassifier(k=8, loss="lorenz").fit(X, y)
    np.testing.assert_allclose(clf.decision_function(Xz), mem.decision_function(X), rtol=1e-6,
                               atol=1e-8)
    np.testing.assert_array_equal(clf.predict(Xz), clf.predict(X))
    with pytest.raises(ValueError, match="expecting 300 features"):
        clf.predict(Xz[:, :5])
    reg = FSARegressor(k=8, max_memory=X.nbytes // 8).fit(Xz, y)
    np.testing.assert_array_equal(reg.support_, FSARegressor(k=8).fit(X, y).support_)


def test_hdf5_through_dask(tmp_path, data, references):
    """An HDF5 dataset wrapped by ``da.from_array`` (Dask's local scheduler: h5py datasets do
    not pickle, so a process cluster needs Zarr or a loader that opens the file per chunk)."""
    import dask
    import h5py

    X, y, _ = data
    with h5py.File(tmp_path / "x.h5", "w") as f:
        f.create_dataset("X", data=X, chunks=(200, 300))
    with h5py.File(tmp_path / "x.h5", "r") as f, dask.config.set(scheduler="threads"):
        res = fsa_fit(da.from_array(f["X"], chunks=(400, 300)), y, 8, loss="lorenz", bins=4,
                      max_memory=X.nbytes // 8)
    _same(res, references[("lorenz", 4)])
    assert res.history["dask"]["persisted_at"][0] == "start"  # X fits the default memory


def test_dask_errors(data):
    X, y, _ = data
    Xn = X.copy()
    Xn[1234, 7] = np.nan
    with pytest.raises(ValueError, match=r"NaN or infinity \(first in row 1234, column 7\) "
                                         r"\(row chunk 4\)"):
        fsa_fit(da.from_array(Xn, chunks=(250, 300)), y, 8, max_memory=1)
    Xd = da.from_array(X, chunks=(250, 300))
    with pytest.raises(ValueError, match="y must be 1-D with X.shape"):
        FSAClassifier().fit(Xd, y[:-1])
    with pytest.raises(ValueError, match="y must be 1-D with X.shape"):
        fsa_fit(Xd, y[:-1], 8)
    with pytest.raises(ValueError, match="X must be 2-D"):
        FSARegressor().fit(da.zeros((4, 3, 2)), np.zeros(4))
    with pytest.raises(ValueError, match="unknown row chunk sizes"):
        fsa_fit(Xd[da.from_array(y) > 0], y[y > 0], 8)


def test_traffic_per_iteration_is_independent_of_n(scheduler):
    """Once the kept columns are persisted, an iteration moves O(M G + n_chunks) bytes between
    client and workers, the same for N and 2N rows."""
    rng = np.random.default_rng(2)
    M, n_chunks = 400, 8
    out = []
    for N in (1600, 3200):
        X = rng.normal(size=(N, M)).astype(np.float32)
        y = np.where(X[:, 3] - X[:, 9] + 0.5 * rng.normal(size=N) > 0, 1.0, -1.0)
        res = fsa_fit(da.from_array(X, chunks=(N // n_chunks, M)), y, 5, loss="logistic",
                      n_iter=60, max_memory=N * 10 * 4, worker_memory=X.nbytes // 2)
        h = res.history
        tr = h["dask"]
        e0, e1 = tr["persisted_at"][0] + 1, h["out_of_core_iterations"]
        assert e1 - e0 >= 3
        moved = tr["sent_bytes"][e0:e1] + tr["received_bytes"][e0:e1]
        m = h["n_kept"][e0 - 1:e1 - 1]  # kept columns each iteration reads
        # arguments cols, fp (3 columns), beta, v and the sums g, h: 8 floats per kept column;
        # each task spec (function name and keys) < 512 bytes; one task per chunk, the
        # reduction tree, and one more per chunk when the kept columns are persisted anew
        assert np.all(moved <= 8 * 8 * m + 512 * 3 * n_chunks + 4096)
        assert np.all(tr["tasks"][e0:e1] <= 3 * n_chunks)
        out.append(moved)
    np.testing.assert_allclose(out[0], out[1], rtol=0.05)


def _scratch_dirs(client=None):
    """This fit's spill directories left behind (here, and on the cluster's workers)."""
    import glob
    import tempfile

    found = glob.glob(f"{tempfile.gettempdir()}/cvfs-fsa-*")
    if client is not None:
        found += sum(client.run(
            lambda dask_worker: glob.glob(f"{dask_worker.local_directory}/cvfs-fsa-*")).values(),
            [])
    return found


@pytest.mark.parametrize("sched, case", [("threads", ("lorenz", None)), ("threads", ("lorenz", 4)),
                                         ("cluster", ("lorenz", 4))])
def test_spill_to_disk_equals_persisted(data, references, request, sched, case):
    """Kept columns too large for ``worker_memory``: written to the workers' disk after the
    first drop, read back column by column as they shrink, then persisted in memory and
    gathered; the model is the one of the fit whose columns stay in memory, and no spill file
    is left. On the cluster the piecewise-linear case only (the Lorenz spill path is the same
    tasks with other sums)."""
    X, y, true = data
    Xd = da.from_array(X, chunks=(250, 300))
    with _scheduler(sched, request) as c:
        _check_spill(X, Xd, y, references[case], case, c)


def _check_spill(X, Xd, y, ref, case, scheduler):
    before = set(_scratch_dirs(scheduler))
    # gathered once 20 kept columns fit max_memory: 17 iterations on the workers
    kw = dict(loss=case[0], bins=case[1], max_memory=X.nbytes // 15)
    res = fsa_fit(Xd, y, 8, worker_memory=X.nbytes // 12, **kw)
    mem = fsa_fit(Xd, y, 8, worker_memory=X.nbytes, **kw)  # X persisted from the start
    assert set(_scratch_dirs(scheduler)) == before
    np.testing.assert_array_equal(res.support, mem.support)
    # the same sums, in another order where the kernels read compacted columns
    np.testing.assert_allclose(res.coef, mem.coef, rtol=1e-8, atol=1e-10)
    assert res.intercept == pytest.approx(mem.intercept, rel=1e-8, abs=1e-8)
    _same(res, ref)
    h, tr = res.history, res.history["dask"]
    spilled, persisted = tr["spilled_at"], tr["persisted_at"]
    assert spilled == [0] and persisted and persisted[0] > 0
    p0 = persisted[0]
    assert 2000 * h["n_kept"][p0 - 1] * 4 > X.nbytes // 12 >= 2000 * h["n_kept"][p0] * 4
    assert [int(h["width"][e]) for e in range(1, p0 + 1)] == list(h["n_kept"][:p0])
    assert h["n_kept"][p0 - 1] < h["n_kept"][0] < 300
    # the kept columns of largest |beta| that fit worker_memory stay in the workers' memory
    # (25 of them), the others go to feature-major files written once; every pass reads
    # only the files' columns still kept, and re-packs them once they are at most half
    held = (X.nbytes // 12) // (2000 * 4)
    passes = tr["passes"]
    written = [b for p, b in zip(passes["pass"], passes["written_bytes"]) if p == "spill"]
    assert written == [2000 * (h["n_kept"][0] - held) * 4]
    row = [i for i, p in enumerate(passes["pass"]) if p == "row"][:p0]
    assert [passes["read_bytes"][i] for i in row] == [2000 * int(h["n_kept"][e - 1]) * 4
                                                     for e in range(1, p0 + 1)]
    from_files = [passes["spill_read_bytes"][i] for i in row]
    repacked = [passes["written_bytes"][i] for i in row]
    _check_file_reads(h, from_files, repacked, held, written[0])
    assert sum(from_files) < sum(passes["read_bytes"][i] for i in row)


def _check_file_reads(h, from_files, repacked, held, written):
    """The spill files' columns read by each row pass: all of them first, then fewer; after
    a pass the workers' memory rows hold kept columns again (the files' kept columns of
    largest |beta| fill the rows of dropped ones), so the next pass reads at most the
    previous kept count less those rows; re-packs write at most what the pass read."""
    assert from_files[0] == written
    assert all(a >= b for a, b in zip(from_files, from_files[1:]))
    cols = [b // (2000 * 4) for b in from_files]
    kept = [int(h["n_kept"][e]) for e in range(len(cols))]
    assert all(c <= max(0, kept[e] - held) for e, c in enumerate(cols[1:]))
    assert all(w <= r for w, r in zip(repacked, from_files)) and any(repacked)


def test_spill_holds_kept_columns_in_worker_memory(data, references):
    """Half the first kept set fits worker_memory: those columns stay in memory, the files
    hold the rest, and columns of the files move into memory as kept ones are dropped."""
    import dask

    X, y, _ = data
    Xd = da.from_array(X, chunks=(250, 300))
    ref = references[("lorenz", None)]
    with dask.config.set(scheduler="threads"):
        res = fsa_fit(Xd, y, 8, loss="lorenz", max_memory=X.nbytes // 15,
                      worker_memory=X.nbytes // 4)
    _same(res, ref)
    h, tr = res.history, res.history["dask"]
    held = (X.nbytes // 4) // (2000 * 4)
    assert tr["spilled_at"] == [0] and held < h["n_kept"][0] < 2 * held
    passes = tr["passes"]
    p0 = tr["persisted_at"][0]
    row = [i for i, p in enumerate(passes["pass"]) if p == "row"][:p0]
    from_files = [passes["spill_read_bytes"][i] for i in row]
    written = [b for p, b in zip(passes["pass"], passes["written_bytes"]) if p == "spill"]
    assert written == [2000 * (h["n_kept"][0] - held) * 4]
    _check_file_reads(h, from_files, [passes["written_bytes"][i] for i in row], held,
                      written[0])


def test_estimators_take_worker_memory(data):
    from sklearn.base import clone

    X, y, _ = data
    clf = FSAClassifier(k=8, loss="lorenz", max_memory=X.nbytes // 25,
                        worker_memory=X.nbytes // 12)
    assert clone(clf).get_params()["worker_memory"] == X.nbytes // 12
    import dask

    with dask.config.set(scheduler="threads"):
        clf.fit(da.from_array(X, chunks=(250, 300)), y)
    assert clf.history_["dask"]["spilled_at"][0] == 0
    np.testing.assert_array_equal(clf.support_, FSAClassifier(k=8, loss="lorenz").fit(X, y)
                                  .support_)
    for est in (FSAClassifier(worker_memory=0), FSARegressor(worker_memory=-5),
                FSARanker(worker_memory=1.5)):
        with pytest.raises(ValueError, match="worker_memory"):
            est.fit(X, y) if not isinstance(est, FSARanker) else est.fit(X, y, np.zeros(2000))


def test_zarr_chunk_files_read_rows(tmp_path):
    """Raw chunk files of an uncompressed Zarr array are read with preadv into the buffer:
    any row range, across chunks, a chunk never written (the fill value); other layouts are
    read through zarr."""
    zarr = pytest.importorskip("zarr")
    from cvfs.core.layouts._dask_tasks import _chunk_files, _read_rows

    rng = np.random.default_rng(5)
    X = rng.normal(size=(103, 7)).astype(np.float32)
    X[40:60] = 0.0  # the chunk of rows 40:60 equals the fill value: zarr writes no file
    z = zarr.create_array(str(tmp_path / "a.zarr"), shape=X.shape, dtype=X.dtype,
                          chunks=(20, 7), compressors=None)
    z[:] = X
    files = _chunk_files(z)
    assert files is not None and files.chunk_rows == 20
    for r0, r1 in [(0, 20), (5, 103), (39, 61), (100, 103), (45, 55)]:
        np.testing.assert_array_equal(_read_rows(files, r0, r1), X[r0:r1])
    res = fsa_fit(da.from_zarr(z, chunks=(33, 7)), np.where(X[:, 1] > 0, 1.0, -1.0), 2,
                  n_iter=20, max_memory=1)
    assert res.history["dask"]["zarr_files"]
    ref = fsa_fit(X, np.where(X[:, 1] > 0, 1.0, -1.0), 2, n_iter=20)
    np.testing.assert_array_equal(res.support, ref.support)
    # compressed, or chunked by columns: read through zarr
    zc = zarr.create_array(str(tmp_path / "c.zarr"), shape=X.shape, dtype=X.dtype,
                           chunks=(20, 7))
    zs = zarr.create_array(str(tmp_path / "s.zarr"), shape=X.shape, dtype=X.dtype,
                           chunks=(20, 3), compressors=None)
    assert _chunk_files(zc) is None and _chunk_files(zs) is None
