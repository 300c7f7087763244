"""The data home ($CVFS_DATA, else ~/cvfs_data), the dataset registry and `cvfs data`."""

from pathlib import Path

import numpy as np
import pytest

from cvfs.cli import main
from cvfs.datasets import DATASETS, data_home, faces, hopkins155, kt3dmoseg, load_mnist, uci
from cvfs.datasets.registry import dataset_folder, report, require_path


def test_data_home_from_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("CVFS_DATA", str(tmp_path / "d"))
    assert data_home() == tmp_path / "d" and not (tmp_path / "d").exists()
    assert data_home(create=True).is_dir()
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("CVFS_DATA", "~/elsewhere")
    assert data_home() == tmp_path / "elsewhere"


def test_data_home_defaults_to_a_per_user_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    for unset in (None, ""):  # unset or empty: the per-user default
        if unset is None:
            monkeypatch.delenv("CVFS_DATA", raising=False)
        else:
            monkeypatch.setenv("CVFS_DATA", unset)
        assert data_home() == tmp_path / "cvfs_data"
    assert not (tmp_path / "cvfs_data").exists()
    assert data_home(create=True) == tmp_path / "cvfs_data" and (tmp_path / "cvfs_data").is_dir()


def test_checkout_data_is_used_by_the_tests_only_through_the_variable():
    shared = Path(__file__).resolve().parents[3] / "shared" / "data"
    if shared.is_dir():
        assert data_home().is_dir()
    # the library itself no longer looks beside the source tree
    import cvfs.datasets._home as home

    assert "shared" not in Path(home.__file__).read_text()


@pytest.mark.parametrize("load, name", [
    (lambda: load_mnist("test"), "mnist"),
    (lambda: uci.load_dexter(), "uci"),
    (lambda: uci.load_colon(), "uci"),
    (lambda: uci.load_sonar(), "uci"),
    (lambda: faces.load_mtfl("train"), "faces/mtfl"),
    (lambda: faces.load_caltech_webfaces(), "faces/caltech_webfaces_dev"),
    (lambda: faces.load_aflw2000(), "faces/aflw2000_sample"),
    (lambda: hopkins155.load_hopkins155(), "hopkins155"),
    (lambda: kt3dmoseg.load_kt3dmoseg(), "motion_kt3dmoseg"),
])
def test_every_loader_says_where_to_get_its_data(load, name, tmp_path, monkeypatch):
    monkeypatch.setenv("CVFS_DATA", str(tmp_path))
    ds = DATASETS[name]
    with pytest.raises(FileNotFoundError) as info:
        load()
    msg = str(info.value)
    assert msg.startswith(f"{ds.label}: {tmp_path / name}")
    assert ds.source in msg and ds.layout in msg and f"the data home is {tmp_path}" in msg


def test_require_path_and_dataset_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("CVFS_DATA", str(tmp_path))
    (tmp_path / "uci" / "sonar").mkdir(parents=True)
    assert require_path("uci", "sonar") == tmp_path / "uci" / "sonar"
    with pytest.raises(FileNotFoundError, match=r"UCI and NIPS 2003 sets: .*uci/dexter does not"):
        require_path("uci", "dexter")
    with pytest.raises(ValueError, match="unknown dataset 'nope'; known: "):
        require_path("nope")
    assert dataset_folder(tmp_path, "hopkins155") == tmp_path
    with pytest.raises(FileNotFoundError, match="Hopkins155: data folder .*/gone does not exist"):
        dataset_folder(tmp_path / "gone", "hopkins155")


def _small_home(home):
    """Two sequences, five digits, one UCI set and an MTFL folder without its files."""
    for seq in ("a", "b"):
        (home / "hopkins155" / seq).mkdir(parents=True)
        (home / "hopkins155" / seq / f"{seq}_truth.mat").write_bytes(b"")
    (home / "mnist").mkdir()
    z = np.zeros
    np.savez_compressed(home / "mnist" / "mnist.npz", x_train=z((3, 28, 28), np.uint8),
                        y_train=z(3, np.uint8), x_test=z((2, 28, 28), np.uint8),
                        y_test=z(2, np.uint8))
    (home / "uci" / "sonar").mkdir(parents=True)
    (home / "uci" / "sonar" / "sonar.all-data").write_text("0.1,M\n")
    (home / "faces" / "mtfl").mkdir(parents=True)


def test_cvfs_data_lists_found_and_missing(tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    home.mkdir()
    _small_home(home)
    monkeypatch.setenv("CVFS_DATA", str(home))
    assert main(["data"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"data home: {home} (from CVFS_DATA)")
    found = out.split("found (3 of 10):")[1].split("missing")[0]
    rows = {line.split()[0]: line for line in found.strip().splitlines()}
    assert set(rows) == {"hopkins155", "mnist", "uci"}
    assert "2 sequences" in rows["hopkins155"] and "5 digits" in rows["mnist"]
    assert "1 of 6 sets" in rows["uci"]
    missing = out.split("missing (7); unpack each into the data home as shown:")[1]
    assert "faces/mtfl: MTFL facial landmarks" in missing
    assert "(folder present, expected files not found)" in missing
    for name in set(DATASETS) - {"hopkins155", "mnist", "uci"}:
        ds = DATASETS[name]
        assert f"  {name}: {ds.title}" in missing
        assert f"get:    {ds.source}" in missing
        assert f"layout: {home / name}/ {ds.layout}" in missing


def test_cvfs_data_creates_the_per_user_home(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("CVFS_DATA", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert main(["data"]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "cvfs_data").is_dir()
    assert out.startswith(f"data home: {tmp_path / 'cvfs_data'} (the per-user default; set "
                          "CVFS_DATA")
    assert f"missing ({len(DATASETS)})" in out and "found" not in out


def test_report_on_the_real_data(real_data):
    text = report(real_data)
    counts = {name: dict((u, n) for u, n in ds.count(real_data)) for name, ds in DATASETS.items()
              if ds.folder(real_data).is_dir()}
    if "hopkins155" in counts:
        assert counts["hopkins155"] == {"sequences": 155}
    if "mnist" in counts:
        assert counts["mnist"] == {"digits": 70_000}
    if "faces/mtfl" in counts:
        assert counts["faces/mtfl"] == {"training faces": 4151, "test faces": 2995}
    if "faces/caltech_webfaces_dev" in counts:
        assert counts["faces/caltech_webfaces_dev"] == {"images": 447, "faces": 1655}
    assert f"found ({len(counts)} of {len(DATASETS)})" in text
