"""Output folders (``cvfs.io.atomic_dir``): only files of the manifest are replaced, the user's
files are kept, bad folders are refused before computing; a commit killed half-way; a CLI
command killed at random times (SIGKILL) or interrupted (SIGINT, SIGTERM)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from cvfs.io import OUTPUT_MARKER, _atomic, atomic_dir, check_output_dir

ROOT = Path(__file__).resolve().parents[2]


def _write_set(out, names, text):
    with atomic_dir(out, command="test") as tmp:
        for n in names:
            (tmp / n).write_text(text)


def _state(out):
    """``(sorted file names, marker's file list)`` of an output folder, or None if absent."""
    if not out.exists():
        return None
    names = sorted(p.name for p in out.iterdir())
    return names, json.loads((out / OUTPUT_MARKER).read_text())["files"]


def _leftovers(out):
    """Temporary files and folders beside or inside ``out``."""
    beside = [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]
    inside = [p.name for p in out.glob(".cvfs-tmp-*")] if out.is_dir() else []
    return sorted(beside + inside)


def test_atomic_dir_replaces_only_its_own_files(tmp_path):
    out = tmp_path / "out"
    _write_set(out, ["a.txt", "b.txt"], "old")
    assert _state(out) == ([OUTPUT_MARKER, "a.txt", "b.txt"], ["a.txt", "b.txt"])
    (out / "notes.txt").write_text("mine")  # the user's file in the output folder
    _write_set(out, ["c.txt"], "new")
    assert _state(out) == ([OUTPUT_MARKER, "c.txt", "notes.txt"], ["c.txt"])
    assert (out / "notes.txt").read_text() == "mine"
    with pytest.raises(RuntimeError, match="boom"):
        with atomic_dir(out) as tmp:
            (tmp / "d.txt").write_text("partial")
            raise RuntimeError("boom")
    assert _state(out)[1] == ["c.txt"] and _leftovers(out) == []
    with pytest.raises(KeyboardInterrupt):
        with atomic_dir(out) as tmp:
            (tmp / "d.txt").write_text("partial")
            raise KeyboardInterrupt
    assert _state(out)[0] == [OUTPUT_MARKER, "c.txt", "notes.txt"] and _leftovers(out) == []


def test_files_cvfs_did_not_write_are_never_replaced(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    check_output_dir(mine)  # a folder with other files may receive outputs beside them
    _write_set(mine, ["a.txt"], "x")
    assert _state(mine) == ([OUTPUT_MARKER, "a.txt", "notes.txt"], ["a.txt"])
    with pytest.raises(FileExistsError, match="would overwrite notes.txt, which cvfs did not"):
        _write_set(mine, ["a.txt", "notes.txt"], "y")
    assert (mine / "notes.txt").read_text() == "keep" and (mine / "a.txt").read_text() == "x"
    assert _leftovers(mine) == []
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError, match="exists and is not a folder"):
        check_output_dir(tmp_path / "file")
    with pytest.raises(FileExistsError, match=r"file is a file, not a folder"):
        check_output_dir(tmp_path / "file" / "sub")
    with pytest.raises(FileExistsError, match="the folder holds the input"):
        check_output_dir(mine, [mine / "notes.txt"])
    with pytest.raises(FileExistsError, match="the folder holds the input"):
        _write_set_inputs(mine, [mine / "notes.txt"])
    assert not (tmp_path / "new").exists()
    with pytest.raises(RuntimeError):  # a folder created for a failed run is removed again
        with atomic_dir(tmp_path / "new"):
            raise RuntimeError
    assert not (tmp_path / "new").exists()


def _write_set_inputs(out, inputs):
    with atomic_dir(out, command="test", inputs=inputs) as tmp:
        (tmp / "x.txt").write_text("x")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_unwritable_folder_is_refused_before_computing(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        with pytest.raises(PermissionError, match=f"--out {ro / 'out'}: the folder {ro} is not"):
            check_output_dir(ro / "out")
    finally:
        ro.chmod(0o755)


def test_unwritable_folder_check_uses_access(tmp_path, monkeypatch):
    """As the test above, for a root user: os.access says the folder is read-only."""
    real = os.access
    monkeypatch.setattr(_atomic.os, "access",
                        lambda p, mode: False if Path(p) == tmp_path else real(p, mode))
    with pytest.raises(PermissionError, match=f"the folder {tmp_path} is not writable"):
        check_output_dir(tmp_path / "out")
    with pytest.raises(PermissionError, match=f"--cache {tmp_path / 'c.h5'}: the folder"):
        _atomic.check_output_file(tmp_path / "c.h5", label="--cache")


def test_a_killed_commit_leaves_every_file_listed(tmp_path, monkeypatch):
    """A run dying between two renames of its commit: each file is complete (old or new), every
    file cvfs wrote is in the manifest, the user's file is kept; the next run cleans up."""
    out = tmp_path / "out"
    _write_set(out, ["a.txt", "b.txt"], "old")
    (out / "notes.txt").write_text("mine")
    real_replace = os.replace
    calls = []

    def dying_replace(src, dst):
        calls.append(dst)
        if len(calls) == 3:  # the manifest, a.txt, then dies before c.txt
            raise SystemExit("killed")
        real_replace(src, dst)

    monkeypatch.setattr(_atomic.os, "replace", dying_replace)
    monkeypatch.setattr(_atomic.shutil, "rmtree", lambda *a, **k: None)  # as after a SIGKILL
    with pytest.raises(SystemExit):
        _write_set(out, ["c.txt", "a.txt"], "new")
    monkeypatch.undo()
    names, listed = _state(out)
    assert set(listed) == {"a.txt", "b.txt", "c.txt"} and (out / "notes.txt").exists()
    assert (out / "a.txt").read_text() == "new" and (out / "b.txt").read_text() == "old"
    assert not (out / "c.txt").exists()
    for p in out.glob(".cvfs-tmp-*"):  # the temporary folder of a dead process
        p.rename(p.with_name(".cvfs-tmp-999999999-" + p.name.rsplit("-", 1)[1]))
    _write_set(out, ["c.txt"], "newer")
    assert _state(out) == ([OUTPUT_MARKER, "c.txt", "notes.txt"], ["c.txt"])
    assert not list(out.glob(".cvfs-tmp-*"))


# ---- a real command, killed ----

def _toy_models(d):
    from cvfs.keypoints import KeypointDetector
    from cvfs.keypoints._additive import AdditiveModel

    m = AdditiveModel([864 + 1, 0], [-0.5, 0.0], [8.0, 10.0],
                      [[0, 1, 2, 3, 4], [0, 1, 0, 1, 0]], -2.0)
    KeypointDetector({"left_eye_center": m, "nose_center": m}, {"haar_per_channel": 5},
                     max_scale=1.0).save(d / "keypoints_toy.h5")


def _images(folder, prefix, n, rng):
    folder.mkdir()
    for i in range(n):
        cv2.imwrite(str(folder / f"{prefix}{i}.png"),
                    (rng.random((48, 64, 3)) * 255).astype(np.uint8))
    return sorted(f"{prefix}{i}_keypoints.png" for i in range(n))


@pytest.fixture
def cli_env(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    _toy_models(models)
    env = dict(os.environ, CVFS_MODELS=str(models), NUMBA_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return env


def _detect(sources, out, *extra):
    return [sys.executable, "-m", "cvfs", "keypoints", "detect", *map(str, sources), "--jobs",
            "1", "--out", str(out), *extra]


@pytest.mark.slow  # seven CLI runs in subprocesses (~40-90 s)
def test_sigkill_at_random_times_keeps_every_file_complete(tmp_path, cli_env):
    rng = np.random.default_rng(0)
    old_names = _images(tmp_path / "a", "a", 2, rng)
    new_names = _images(tmp_path / "b", "b", 6, rng)
    out = tmp_path / "out"
    t0 = time.perf_counter()
    subprocess.run(_detect([tmp_path / "a"], out), env=cli_env, check=True, capture_output=True)
    runtime = time.perf_counter() - t0
    assert _state(out)[1] == old_names
    (out / "notes.txt").write_text("mine")
    for delay in rng.uniform(0.3, 1.3, size=5) * runtime:
        proc = subprocess.Popen(_detect([tmp_path / "b"], out), env=cli_env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        names, listed = _state(out)
        # every image present is complete and listed; the user's file is kept
        assert set(listed) <= set(old_names) | set(new_names), delay
        ours = [n for n in names if n.endswith(".png")]
        assert set(ours) <= set(listed) and (out / "notes.txt").read_text() == "mine"
        assert all(cv2.imread(str(out / n)) is not None for n in ours)
    subprocess.run(_detect([tmp_path / "b"], out), env=cli_env, check=True, capture_output=True)
    assert _state(out) == (sorted([OUTPUT_MARKER, "notes.txt", *new_names]), new_names)
    assert _leftovers(out) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_removes_temporary_outputs(tmp_path, cli_env, sig):
    out = tmp_path / "out"
    rng = np.random.default_rng(1)
    old_names = _images(tmp_path / "a", "a", 1, rng)
    subprocess.run(_detect([tmp_path / "a"], out), env=cli_env, check=True, capture_output=True)
    # a child of a background job inherits SIGINT ignored; restore the default (Python's
    # KeyboardInterrupt) as in an interactive shell
    proc = subprocess.Popen(_detect(["synth:scene=face,frames=400"], out), env=cli_env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while not any(n.startswith(".cvfs-tmp-") for n in _leftovers(out)):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    time.sleep(0.5)  # some frames written into the temporary folder
    proc.send_signal(sig)
    err = proc.communicate(timeout=60)[1]
    assert proc.returncode == 128 + sig, err
    assert "temporary outputs removed" in err
    assert _leftovers(out) == [] and _state(out)[1] == old_names


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_swallowed_signal_is_raised_at_the_next_frame(sig):
    """A signal whose exception a finaliser or C callback swallowed ("Exception ignored") is
    raised again by raise_pending, which the frame loops call; outside signals_raise nothing is
    pending."""
    from cvfs.io import Interrupted, raise_pending, signals_raise

    expect = KeyboardInterrupt if sig == signal.SIGINT else Interrupted
    # SIGINT as in an interactive shell (a background job's processes ignore it)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with signals_raise():
            raise_pending()  # nothing received yet
            try:
                signal.getsignal(sig)(sig, None)  # the handler, as the signal runs it
            except (KeyboardInterrupt, Interrupted):
                pass  # swallowed
            with pytest.raises(expect):
                raise_pending()
        raise_pending()  # cleared on leaving the block
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("signum", [None, signal.SIGTERM])
def test_signal_inside_a_compiled_kernel(tmp_path, monkeypatch, capsys, signum):
    """A signal handled while a numba kernel runs surfaces as a SystemError chained to the
    KeyboardInterrupt / Interrupted: the command still cleans up and exits 128 + signal."""
    import cvfs.cli as cli
    from cvfs.cli import handlers
    from cvfs.io import Interrupted

    out = tmp_path / "out"

    def command(args):
        with atomic_dir(out, command="test") as tmp:
            (tmp / "partial.txt").write_text("x")
            try:
                raise KeyboardInterrupt if signum is None else Interrupted(signum)
            except BaseException as exc:
                raise SystemError("CPUDispatcher returned a result with an exception set") \
                    from exc

    monkeypatch.setattr(handlers, "astro_denoise", command)
    code = cli.main(["astro", "denoise", "x.fits", "--out", str(out)])
    assert code == (130 if signum is None else 128 + signum)
    assert "temporary outputs removed" in capsys.readouterr().err
    assert not out.exists() and _leftovers(out) == []

