"""The benchmarks' layout, runner and results format (no benchmark runs here)."""

import ast
import json
import math

import pytest

from tests.scripts import ROOT, load_script

BENCH = ROOT / "benchmarks"
AREAS = ("fsa", "sbl", "astro", "keypoints", "motion", "scale")
SCRIPTS = sorted(p for a in AREAS for p in (BENCH / a).glob("*.py") if not p.name.startswith("_"))


def _name(path):
    return f"{path.parent.name}/{path.stem}"


def test_every_script_sits_in_an_area_folder():
    assert sorted(p.name for p in BENCH.glob("*.py")) == ["_bench.py", "bitwise.py", "run.py"]
    folders = {p.name for p in BENCH.iterdir() if p.is_dir()} - {"results", "__pycache__"}
    assert folders == set(AREAS)


def _called(node):
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


@pytest.mark.parametrize("path", SCRIPTS, ids=_name)
def test_every_script_writes_its_json_through_write_json(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    assert ast.get_docstring(tree), "a script's docstring is its --list summary"
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    assert "write_json" in {_called(c) for c in calls}
    other = [ast.unparse(c)[:60] for c in calls
             if _called(c) in ("dump", "atomic_write_text")
             or (_called(c) == "write_text" and c.args and isinstance(c.args[0], ast.Call)
                 and _called(c.args[0]) == "dumps")]
    assert not other, f"JSON written past _bench.write_json: {other}"


def test_write_json_adds_the_run_record(tmp_path):
    bench = load_script("benchmarks/_bench.py", "bench_common")
    path = bench.write_json(tmp_path / "new" / "x.json", {"rows": [1.5, math.nan], "n": 3})
    out = json.loads(path.read_text())
    assert list(out) == ["run", "rows", "n"]
    assert out["rows"] == [1.5, None]
    run = out["run"]
    for key in ("command", "cvfs_version", "git_commit", "date_utc", "cpu", "n_cpus",
                "memory_bytes", "versions", "threads", "loadavg_start", "loadavg_end"):
        assert key in run, key
    assert run["cvfs_version"]
    assert not list(tmp_path.glob("new/*.tmp*"))
    wrapped = json.loads(bench.write_json(tmp_path / "y.json", [1, 2]).read_text())
    assert list(wrapped) == ["run", "results"] and wrapped["results"] == [1, 2]


def test_result_path_is_the_area_folder_of_results():
    bench = load_script("benchmarks/_bench.py", "bench_common")
    script = BENCH / "motion" / "motion_k.py"
    assert bench.result_path(script) == BENCH / "results" / "motion" / "motion_k.json"
    assert bench.result_path(script, "motion_k_extra") == \
        BENCH / "results" / "motion" / "motion_k_extra.json"
    assert bench.result_path(BENCH / "astro" / "astro_lambda.py", suffix=".png").name == \
        "astro_lambda.png"


def test_runner_lists_every_script_and_rejects_unknown_names(capsys):
    run = load_script("benchmarks/run.py", "bench_run")
    assert run.main(["--list"]) == 0
    listed = capsys.readouterr().out
    for path in SCRIPTS:
        assert f"  {_name(path)} " in listed
    assert "  bitwise " in listed
    assert run.resolve("fsa/synthetic_tables.py") == BENCH / "fsa" / "synthetic_tables.py"
    for bad in ("fsa/nope", "astro/_common", "nope/synthetic_tables", "run"):
        with pytest.raises(SystemExit, match="no benchmark"):
            run.resolve(bad)
    with pytest.raises(SystemExit, match="unknown area"):
        run.main(["--list", "vision"])
