"""Atomic output sets (``cvfs.io.atomic_dir``): the unit behaviour, each crash point of the swap,
and a CLI command killed at random times (SIGKILL) or interrupted (SIGINT, SIGTERM)."""

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

ROOT = Path(__file__).resolve().parents[1]


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
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


def test_atomic_dir_replaces_the_whole_set(tmp_path):
    out = tmp_path / "out"
    _write_set(out, ["a.txt", "b.txt"], "old")
    assert _state(out) == ([OUTPUT_MARKER, "a.txt", "b.txt"], ["a.txt", "b.txt"])
    _write_set(out, ["c.txt"], "new")
    assert _state(out) == ([OUTPUT_MARKER, "c.txt"], ["c.txt"])
    with pytest.raises(RuntimeError, match="boom"):
        with atomic_dir(out) as tmp:
            (tmp / "d.txt").write_text("partial")
            raise RuntimeError("boom")
    assert _state(out) == ([OUTPUT_MARKER, "c.txt"], ["c.txt"]) and _leftovers(out) == []
    with pytest.raises(KeyboardInterrupt):
        with atomic_dir(out) as tmp:
            (tmp / "d.txt").write_text("partial")
            raise KeyboardInterrupt
    assert _state(out)[0] == [OUTPUT_MARKER, "c.txt"] and _leftovers(out) == []


def test_foreign_folders_are_never_replaced(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(FileExistsError, match=f"holds no {OUTPUT_MARKER}"):
        check_output_dir(mine)
    with pytest.raises(FileExistsError, match=f"holds no {OUTPUT_MARKER}"):
        _write_set(mine, ["a.txt"], "x")
    assert (mine / "notes.txt").read_text() == "keep" and _leftovers(mine) == []
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError, match="exists and is not a folder"):
        check_output_dir(tmp_path / "file")
    empty = tmp_path / "empty"
    empty.mkdir()
    _write_set(empty, ["a.txt"], "x")  # an empty folder may receive a set
    assert _state(empty)[1] == ["a.txt"]


@pytest.mark.parametrize("crash_at", [1, 2])
def test_two_rename_swap_survives_a_crash_at_each_step(tmp_path, monkeypatch, crash_at):
    """Without RENAME_EXCHANGE: a process dying after rename 1 (old set moved aside) or before
    it leaves ``out`` recoverable; the next atomic_dir restores the old set, then swaps."""
    out = tmp_path / "out"
    _write_set(out, ["a.txt"], "old")
    monkeypatch.setattr(_atomic, "_exchange", lambda a, b: False)
    real_rename = os.rename
    calls = []

    def dying_rename(src, dst):
        calls.append((src, dst))
        if len(calls) == crash_at:
            raise SystemExit("killed")  # the process dies here: no cleanup runs below
        real_rename(src, dst)

    monkeypatch.setattr(_atomic.os, "rename", dying_rename)
    monkeypatch.setattr(_atomic.shutil, "rmtree", lambda *a, **k: None)  # as after a SIGKILL
    with pytest.raises(SystemExit):
        _write_set(out, ["b.txt"], "new")
    monkeypatch.setattr(_atomic.os, "rename", real_rename)
    monkeypatch.undo()
    if crash_at == 1:
        assert _state(out)[1] == ["a.txt"]
    else:
        assert not out.exists()  # between the two renames: the old set is in the backup
    # the leftovers belong to a dead process: pretend by renaming their pid
    for p in tmp_path.iterdir():
        if p.name.startswith(".out."):
            kind, rest = p.name[len(".out."):].split("-", 1)
            p.rename(p.with_name(f".out.{kind}-999999999-{rest.split('-', 1)[1]}"))
    _atomic._recover(out.absolute())
    assert _state(out)[1] == ["a.txt"] and _leftovers(out) == []
    _write_set(out, ["b.txt"], "new")
    assert _state(out)[1] == ["b.txt"] and _leftovers(out) == []


def test_exchange_swap_is_used_on_linux(tmp_path, monkeypatch):
    out = tmp_path / "out"
    _write_set(out, ["a.txt"], "old")
    used = []
    real = _atomic._exchange
    monkeypatch.setattr(_atomic, "_exchange", lambda a, b: used.append(real(a, b)) or used[-1])
    _write_set(out, ["b.txt"], "new")
    assert len(used) == 1 and _state(out)[1] == ["b.txt"] and _leftovers(out) == []


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


def test_sigkill_at_random_times_leaves_a_complete_set(tmp_path, cli_env):
    rng = np.random.default_rng(0)
    old_names = _images(tmp_path / "a", "a", 2, rng)
    new_names = _images(tmp_path / "b", "b", 6, rng)
    out = tmp_path / "out"
    t0 = time.perf_counter()
    subprocess.run(_detect([tmp_path / "a"], out), env=cli_env, check=True, capture_output=True)
    runtime = time.perf_counter() - t0
    assert _state(out)[1] == old_names
    for delay in rng.uniform(0.3, 1.3, size=5) * runtime:
        proc = subprocess.Popen(_detect([tmp_path / "b"], out), env=cli_env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        names, listed = _state(out)  # never absent: a previous set existed
        assert listed in (old_names, new_names), delay
        assert names == sorted([OUTPUT_MARKER, *listed])
        assert all(cv2.imread(str(out / n)) is not None for n in listed)
    subprocess.run(_detect([tmp_path / "b"], out), env=cli_env, check=True, capture_output=True)
    assert _state(out)[1] == new_names and _leftovers(out) == []


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
    while not any(n.startswith(".out.tmp-") for n in _leftovers(out)):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    time.sleep(0.5)  # some frames written into the temporary folder
    proc.send_signal(sig)
    err = proc.communicate(timeout=60)[1]
    assert proc.returncode == 128 + sig, err
    assert "temporary outputs removed" in err
    assert _leftovers(out) == [] and _state(out)[1] == old_names


@pytest.mark.parametrize("signum", [None, signal.SIGTERM])
def test_signal_inside_a_compiled_kernel(tmp_path, monkeypatch, capsys, signum):
    """A signal handled while a numba kernel runs surfaces as a SystemError chained to the
    KeyboardInterrupt / Interrupted: the command still cleans up and exits 128 + signal."""
    import cvfs.cli as cli
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

    monkeypatch.setattr(cli, "_cmd_astro_denoise", command)
    code = cli.main(["astro", "denoise", "x.fits", "--out", str(out)])
    assert code == (130 if signum is None else 128 + signum)
    assert "temporary outputs removed" in capsys.readouterr().err
    assert not out.exists() and _leftovers(out) == []

