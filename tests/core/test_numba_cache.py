"""cvfs kernels are cached with a stamp that follows every cvfs source file, so a change in any
module (a callee numba would not revalidate) recompiles its callers; importing cvfs changes
neither the environment nor numba's configuration."""

import os
import subprocess
import sys
from pathlib import Path

from cvfs import _jit


def _tree(root, files):
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def test_digest_follows_every_source_file(tmp_path):
    _tree(tmp_path, {"a.py": "x = 1\n", "sub/b.py": "y = 2\n", "notes.txt": "n"})
    d0 = _jit.source_digest(tmp_path)
    assert d0 == _jit.source_digest(tmp_path) and len(d0) == 16
    (tmp_path / "notes.txt").write_text("changed")  # not a source
    assert _jit.source_digest(tmp_path) == d0
    (tmp_path / "sub" / "b.py").write_text("y = 3\n")  # a callee's module changes
    d1 = _jit.source_digest(tmp_path)
    assert d1 != d0
    (tmp_path / "sub" / "b.py").rename(tmp_path / "sub" / "c.py")  # same text, other name
    assert _jit.source_digest(tmp_path) not in (d0, d1)


def test_cvfs_kernels_carry_the_package_digest():
    from cvfs.core import _loss_kernels as LK

    impl = LK.rank_pairs._cache._impl
    loc = impl.locator
    if os.environ.get("NUMBA_CACHE_DIR") or os.environ.get("NUMBA_CACHE_LOCATOR_CLASSES"):
        assert not isinstance(loc, _jit._PackageStamp)  # the user's choice is kept
        return
    assert isinstance(loc, _jit._PackageStamp)
    stamp = loc.get_source_stamp()
    assert stamp[1] == _jit.source_digest(Path(_jit.__file__).parent)


def test_other_libraries_keep_numbas_locators(tmp_path):
    src = tmp_path / "other_lib.py"
    src.write_text("def f(x):\n    return x + 1\n")
    assert _jit._InTreeLocator.from_function(None, str(src)) is None
    assert _jit._UserWideLocator.from_function(None, str(src)) is None


def test_import_has_no_side_effects():
    code = (
        "import os, sys; before = dict(os.environ); import cvfs, cvfs.viz, cvfs.io; "
        "assert dict(os.environ) == before, set(os.environ) ^ set(before); "
        "assert 'numba' not in sys.modules, 'import cvfs imported numba'; "
        "import matplotlib; print(matplotlib.get_backend())"
    )
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    out = subprocess.run([sys.executable, "-c", "import matplotlib; matplotlib.use('svg'); "
                          + code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "svg"
