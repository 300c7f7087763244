"""Kernel groups, the cold-cache check, the CLI's compile notice and `cvfs warmup`."""

import os
import subprocess
import sys
import textwrap

import pytest
from numba.core import event

from cvfs.cli import main, warmup
from cvfs.cli.app import compile_notice
from cvfs.cli.parser import build_parser


def test_groups_name_cached_kernels_and_commands_name_groups():
    for group in warmup.GROUPS.values():
        assert group.seconds > 0 and group.probes
        for probe in group.probes:
            disp = warmup._dispatcher(probe)
            assert disp._cache._cache_file is not None, probe  # njit(cache=True)
    parser = build_parser()
    for key, groups in warmup.COMMAND_GROUPS.items():
        assert set(groups) <= set(warmup.GROUPS), key
        argv = key.split()
        if argv[0] == "demo":
            argv = ["demo", "--parts", argv[1]]
        else:
            argv += ["x"] if argv[0] in ("motion", "astro") and argv[1] != "evaluate" else []
            argv += ["--out", "o.h5"] if argv[1] == "train" else []
            argv += ["x"] if argv[1] == "detect" else []
        parser.parse_args(argv)  # every key is a real command
    assert set(warmup._WARM) == set(warmup.GROUPS)


def test_expected_wait_counts_shared_kernels_once():
    g = warmup.GROUPS
    assert warmup.expected_seconds(["keypoints"]) == g["keypoints"].seconds
    assert warmup.expected_seconds(["fsa-pl", "keypoints", "fsa-pl"]) == \
        g["fsa-pl"].seconds + g["keypoints"].seconds
    assert warmup.expected_seconds(["fsa", "fsa-pl", "fsa-rank"]) == \
        g["fsa"].seconds + g["fsa-pl"].extra + g["fsa-rank"].extra
    assert [warmup.wait_text(s) for s in (3, 44, 89, 90, 250)] == \
        ["about 10 s", "about 40 s", "about 90 s", "about 2 min", "about 4 min"]


def test_unknown_group_is_an_error():
    with pytest.raises(ValueError, match="unknown kernel group 'gpu'; known: "):
        warmup.cold_groups(["gpu"])
    with pytest.raises(ValueError, match="unknown kernel group 'gpu'"):
        warmup.compile_group("gpu")


def test_cache_check_follows_numbas_index(tmp_path):
    """A cached kernel is cold before its first call, warm after it, cold again when its
    source changes (numba's stamp), and warm in a new process that only reads the cache."""
    mod = tmp_path / "kmod.py"
    mod.write_text("from numba import njit\n\n@njit(cache=True)\ndef f(x):\n    return x + 1\n")
    code = textwrap.dedent("""
        import sys; sys.path.insert(0, sys.argv[1])
        import kmod
        from cvfs.cli.warmup import _cached
        before = _cached(kmod.f)
        if sys.argv[2] == "call":
            kmod.f(1.0)
        print(before, _cached(kmod.f))
    """)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))

    def run(mode):
        out = subprocess.run([sys.executable, "-c", code, str(tmp_path), mode], env=env,
                             capture_output=True, text=True, check=True)
        return out.stdout.split()

    assert run("call") == ["False", "True"]
    assert run("look") == ["True", "True"]
    mod.write_text(mod.read_text().replace("x + 1", "x + 2"))
    assert run("look") == ["False", "False"]


def test_fresh_cache_makes_every_group_cold(tmp_path):
    code = "from cvfs.cli.warmup import GROUPS, cold_groups; print(' '.join(cold_groups(GROUPS)))"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == list(warmup.GROUPS)


@pytest.mark.parametrize("argv, groups", [
    (["demo", "--parts", "fsa", "keypoints"], ["fsa", "keypoints"]),
    (["keypoints", "detect", "photo.jpg"], ["keypoints"]),
    (["keypoints", "train", "--out", "m.h5"], ["keypoints", "fsa-pl"]),
    (["motion", "segment", "v.avi"], ["motion"]),
    (["astro", "denoise", "f.fits"], ["astro"]),
    (["warmup", "--groups", "astro"], ["astro"]),
])
def test_compile_notice_names_the_cold_groups_and_the_wait(argv, groups, monkeypatch, capsys):
    asked = []

    def cold(names):
        asked.append(list(names))
        return list(names)

    monkeypatch.setattr(warmup, "cold_groups", cold)
    stop = compile_notice(build_parser().parse_args(argv))
    try:
        assert asked == [groups] and capsys.readouterr().err == ""  # nothing compiled yet
        for _ in range(2):  # printed once, as numba starts compiling
            with event.trigger_event("numba:compile", data={}):
                pass
    finally:
        stop()
    with event.trigger_event("numba:compile", data={}):
        pass
    err = capsys.readouterr().err
    wait = warmup.wait_text(warmup.expected_seconds(groups))
    assert err.count("\n") == 1 and err.startswith(f"cvfs: compiling numba kernels "
                                                   f"({', '.join(groups)})")
    assert f"{wait} on an idle 2-core machine" in err
    assert ("cvfs warmup" in err) == (argv[0] != "warmup")


def test_no_notice_when_warm_or_without_kernels(monkeypatch, capsys):
    monkeypatch.setattr(warmup, "cold_groups", lambda names: [])
    assert compile_notice(build_parser().parse_args(["demo"])) is None
    assert capsys.readouterr().err == ""

    def fail(names):
        raise AssertionError("cvfs data compiles nothing")

    monkeypatch.setattr(warmup, "cold_groups", fail)
    assert compile_notice(build_parser().parse_args(["data"])) is None
    assert capsys.readouterr().err == ""


def test_cache_check_failure_never_stops_a_command(monkeypatch, capsys):
    def broken(names):
        raise OSError("unreadable cache")

    monkeypatch.setattr(warmup, "cold_groups", broken)
    assert compile_notice(build_parser().parse_args(["astro", "denoise", "f.fits"])) is None
    assert capsys.readouterr().err == ""


def test_notice_comes_with_the_first_real_compile(tmp_path):
    """In a fresh cache the notice is printed once numba compiles; a command that fails on its
    input before compiling prints only its error."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    (tmp_path / "kmod2.py").write_text("from numba import njit\n\n@njit(cache=True)\n"
                                       "def f(x):\n    return x + 1\n\n@njit\n"
                                       "def g(x):\n    return x * 2\n")
    code = textwrap.dedent("""
        import sys; sys.path.insert(0, sys.argv[1])
        import kmod2
        from cvfs.cli.warmup import on_first_compile
        stop = on_first_compile(lambda: print("notice", file=sys.stderr))
        kmod2.f(1.0)
        if sys.argv[2] == "both":
            kmod2.g(1.0)
        stop()
    """)

    def run(which):
        return subprocess.run([sys.executable, "-c", code, str(tmp_path), which], env=env,
                              capture_output=True, text=True, check=True).stderr.splitlines()

    assert run("both") == ["notice"]  # two compiles, one notice
    assert run("f") == []  # f loaded from the cache: nothing compiles
    assert run("both") == ["notice"]  # g is not cached: it compiles again
    out = subprocess.run([sys.executable, "-m", "cvfs", "motion", "segment",
                          str(tmp_path / "none.avi")], env=env, capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.startswith("cvfs motion segment: error: source not found"), out.stderr


def test_warmup_command_runs_the_groups(monkeypatch, capsys):
    ran = []
    monkeypatch.setattr(warmup, "compile_group", ran.append)
    monkeypatch.setattr(warmup, "cold_groups", lambda names: [n for n in names if n == "fsa"])
    assert main(["warmup", "--groups", "fsa", "motion", "--quiet"]) == 0
    assert ran == ["fsa", "motion"]
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:2] == ["group", "state"]
    assert out[1].split()[:2] == ["fsa", "compiled"]
    assert out[2].split()[:2] == ["motion", "cached"]
    with pytest.raises(SystemExit):
        main(["warmup", "--groups", "gpu"])
