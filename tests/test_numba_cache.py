"""cvfs keeps numba's compiled kernels in a directory named by a digest of its sources, so a
change in any module (a callee numba would not revalidate) starts from a fresh cache."""

import os
import time
from pathlib import Path

import numba

import cvfs


def _tree(root, files):
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def test_digest_follows_every_source_file(tmp_path):
    _tree(tmp_path, {"a.py": "x = 1\n", "sub/b.py": "y = 2\n", "notes.txt": "n"})
    d0 = cvfs._source_digest(tmp_path)
    assert d0 == cvfs._source_digest(tmp_path) and len(d0) == 16
    (tmp_path / "notes.txt").write_text("changed")  # not a source
    assert cvfs._source_digest(tmp_path) == d0
    (tmp_path / "sub" / "b.py").write_text("y = 3\n")  # a callee's module changes
    d1 = cvfs._source_digest(tmp_path)
    assert d1 != d0
    (tmp_path / "sub" / "b.py").rename(tmp_path / "sub" / "c.py")  # same text, other name
    assert cvfs._source_digest(tmp_path) not in (d0, d1)


def test_cache_dir_per_digest_and_stale_ones_removed(tmp_path, monkeypatch):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    _tree(tmp_path, {"a.py": "x = 1\n"})
    base = tmp_path / "__pycache__" / "numba"
    old, recent = base / "0123456789abcdef", base / "fedcba9876543210"
    old.mkdir(parents=True)
    recent.mkdir()
    (old / "k.nbi").write_text("stale")
    past = time.time() - 7200
    os.utime(old, (past, past))
    target = cvfs._numba_cache_dir(tmp_path, stale_after=3600)
    assert target == str(base / cvfs._source_digest(tmp_path)) and Path(target).is_dir()
    assert not old.exists()  # unused for 2 h: removed
    assert recent.exists()  # maybe still in use by a running process: kept


def test_user_cache_dir_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "mine"))
    assert cvfs._numba_cache_dir(tmp_path) is None


def test_this_process_caches_under_the_package_digest():
    target = os.environ.get("NUMBA_CACHE_DIR", "")
    pkg = Path(cvfs.__file__).resolve().parent
    if not target.startswith(str(pkg)):  # the user chose a cache directory: theirs is used
        assert numba.config.CACHE_DIR == target
        return
    assert Path(target) == pkg / "__pycache__" / "numba" / cvfs._source_digest(pkg)
    assert numba.config.CACHE_DIR == target
    from cvfs.core import _loss_kernels as LK

    assert Path(LK.loss_rows.stats.cache_path).is_relative_to(target)
