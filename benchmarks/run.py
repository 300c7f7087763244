"""Run one benchmark script, or list them: the one entry point of ``benchmarks/``.

    python benchmarks/run.py --list [AREA ...]           # areas, scripts, their summaries
    python benchmarks/run.py fsa/synthetic_tables --runs 1 --tables II
    python benchmarks/run.py bitwise --groups cv          # the top-level regression check

The scripts live in one folder per area (fsa, sbl, astro, keypoints, motion, scale); files whose
name starts with ``_`` are shared helpers, not benchmarks. A script runs exactly as
``python benchmarks/<area>/<script>.py [args]`` would, with BLAS, OpenMP and numba pinned to one
thread unless the environment already sets their thread counts. Every script prints its tables
and writes JSON through ``benchmarks/_bench.py`` (``write_json``: the script's keys plus a
``"run"`` record of machine, command line, cvfs version, git commit and time), by default to
``benchmarks/results/<area>/<script>.json``.
"""

import argparse
import ast
import os
import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
AREAS = ("fsa", "sbl", "astro", "keypoints", "motion", "scale")
#: top-level scripts the runner also accepts (beside the runner itself)
TOP = ("bitwise",)
THREAD_VARS = ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def scripts(areas=AREAS):
    """``{area: [script path, ...]}`` of the benchmark scripts, sorted by name."""
    return {area: sorted(p for p in (ROOT / area).glob("*.py") if not p.name.startswith("_"))
            for area in areas}


def summary(path):
    """The first paragraph of a script's docstring, on one line (read without importing it)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return " ".join(doc.strip().split("\n\n")[0].split())


def resolve(name):
    """The script file of ``area/script`` (``.py`` optional) or of a top-level script."""
    rel = name.removesuffix(".py")
    parts = rel.split("/")
    if len(parts) == 1 and rel in TOP:
        return ROOT / f"{rel}.py"
    if len(parts) == 2 and parts[0] in AREAS and not parts[1].startswith("_"):
        path = ROOT / parts[0] / f"{parts[1]}.py"
        if path.is_file():
            return path
    known = [f"{a}/{p.stem}" for a, ps in scripts().items() for p in ps] + list(TOP)
    close = [k for k in known if rel.split("/")[-1] in k]
    hint = f" (did you mean {', '.join(close[:5])}?)" if close else " (see --list)"
    raise SystemExit(f"run.py: no benchmark {name!r}{hint}")


def print_list(areas):
    bad = [a for a in areas if a not in AREAS]
    if bad:
        raise SystemExit(f"run.py: unknown area {bad[0]!r}; the areas are {', '.join(AREAS)}")
    for area, paths in scripts(areas or AREAS).items():
        print(f"{area}/")
        width = max((len(p.stem) for p in paths), default=0)
        for p in paths:
            print(f"  {area}/{p.stem:<{width}}  {summary(p)}")
    if not areas:
        print("top level")
        for name in TOP:
            print(f"  {name}  {summary(ROOT / f'{name}.py')}")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        usage="%(prog)s --list [AREA ...] | %(prog)s AREA/SCRIPT [ARGS ...]")
    ap.add_argument("--list", nargs="*", metavar="AREA", default=None,
                    help="list the scripts (of these areas) with their one-line summaries")
    ap.add_argument("script", nargs="?", help="AREA/SCRIPT, e.g. fsa/synthetic_tables")
    # everything after the script name belongs to the script, options included
    split = next((i for i, a in enumerate(argv) if not a.startswith("-")), len(argv))
    if split < len(argv) and argv[:split] and argv[split - 1] == "--list":
        split = len(argv)  # --list fsa sbl: area names, not a script
    args = ap.parse_args(argv[:split + 1])
    if args.list is not None:
        print_list(args.list)
        return 0
    if args.script is None:
        ap.error("name a script (AREA/SCRIPT) or --list")
    path = resolve(args.script)
    for var in THREAD_VARS:
        os.environ.setdefault(var, "1")
    sys.argv = [str(path), *argv[split + 1:]]
    sys.path[0] = str(path.parent)  # as when the script is run directly
    runpy.run_path(str(path), run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
