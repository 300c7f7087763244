"""CPU seconds of ``segment(points)`` with K chosen on large synthetic scenes, against a baseline.

Usage::

    python benchmarks/motion/motion_segment_speed.py [--baseline REV] [--rounds N]
        [--scenes K:P:F ...] [--seed S] [--profile N]

Each scene is ``cvfs.motion.synthetic.make_rigid_motions(K, P, F, random_state=seed)`` (default
1,000 tracks x 20 frames with 2, 3 and 4 motions), made once and segmented with K chosen
(``cvfs.motion.segment(points)``) by this tree and by the ``cvfs`` package of git revision
``--baseline`` (default ``main``; ``none`` times this tree alone), each in its own subprocess
(one small warm-up call first), alternating for ``--rounds`` rounds (baseline first on even
rounds). The table gives per scene the K chosen, the misclassification, the median CPU seconds
(``time.process_time``) of each tree, their ratio and whether the labels are equal in every
round. ``--profile N`` also prints this tree's N most expensive functions (cProfile, cumulative)
on the first scene. BLAS, OpenMP and numba are pinned to one thread.

Writes ``benchmarks/results/motion/motion_segment_speed.json``.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository root, for benchmarks.*
    sys.path.insert(0, str(REPO))

from benchmarks._bench import THREAD_VARS, format_table, result_path, write_json

DEFAULT_SCENES = ("2:1000:20", "3:1000:20", "4:1000:20")


def _child(tree, scenes_file, profile):
    """Run in a subprocess with ``tree`` first on sys.path: segment every scene, print JSON."""
    sys.path.insert(0, tree)
    import time

    from benchmarks._bench import limit_threads

    limit_threads()
    import cvfs
    from cvfs.motion import segment
    from cvfs.motion.synthetic import make_rigid_motions

    assert Path(cvfs.__file__).resolve().is_relative_to(Path(tree).resolve()), cvfs.__file__
    segment(make_rigid_motions(2, 80, 20, random_state=0)[0])  # imports, model load, JIT
    data = np.load(scenes_file)
    out = []
    for i in range(len(data.files) // 2):
        points = data[f"points{i}"]
        if profile and i == 0:
            import cProfile
            import io
            import pstats

            prof = cProfile.Profile()
            prof.enable()
            segment(points)
            prof.disable()
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(profile)
            print(buf.getvalue(), file=sys.stderr)
        c0, w0 = time.process_time(), time.perf_counter()
        labels = segment(points)
        out.append({"cpu": time.process_time() - c0, "wall": time.perf_counter() - w0,
                    "labels": labels.tolist()})
    print(json.dumps(out))


def _run(tree, scenes_file, profile=0):
    env = dict(os.environ, PYTHONPATH=tree)
    for var in THREAD_VARS:
        env.setdefault(var, "1")
    res = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", tree,
                          "--scenes-file", scenes_file, "--profile", str(profile)],
                         capture_output=True, text=True, env=env, cwd=str(REPO))
    if res.returncode:
        raise RuntimeError(f"{tree}: {res.stderr[-2000:]}")
    if profile:
        print(res.stderr)
    return json.loads(res.stdout.strip().splitlines()[-1])


def _error(labels, truth):
    from cvfs.motion.evaluate import misclassification

    return 100.0 * misclassification(np.asarray(labels), truth)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="main", help="git revision compared against, or none")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--scenes", nargs="+", default=list(DEFAULT_SCENES),
                    help="K:P:F (motions, tracks, frames) per scene")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", type=int, default=0, help="print the N costliest functions")
    ap.add_argument("--out", default=str(result_path(__file__)))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--scenes-file", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        _child(a.child, a.scenes_file, a.profile)
        return 0
    from cvfs.motion.synthetic import make_rigid_motions

    scenes = [tuple(int(v) for v in s.split(":")) for s in a.scenes]
    with tempfile.TemporaryDirectory(prefix="cvfs_segment_speed_") as tmp:
        arrays, truths = {}, []
        for i, (k, p, f) in enumerate(scenes):
            pts, truth = make_rigid_motions(k, p, f, random_state=a.seed)
            arrays[f"points{i}"], arrays[f"truth{i}"] = pts, truth
            truths.append(truth)
        scenes_file = str(Path(tmp) / "scenes.npz")
        np.savez(scenes_file, **arrays)
        trees = {"this": str(REPO)}
        if a.baseline != "none":
            base = Path(tmp) / "baseline"
            base.mkdir()
            tar = subprocess.run(["git", "-C", str(REPO), "archive", a.baseline, "cvfs"],
                                 check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(base)], input=tar, check=True)
            trees["baseline"] = str(base)
        runs = {name: [] for name in trees}
        for r in range(a.rounds):
            order = list(trees) if r % 2 else list(trees)[::-1]
            for name in order:
                runs[name].append(_run(trees[name], scenes_file,
                                       a.profile if (name == "this" and r == 0) else 0))
    rows, table = [], []
    for i, ((k, p, f), truth) in enumerate(zip(scenes, truths, strict=True)):
        row = {"scene": f"{k} motions, {p} x {f}", "k_true": k}
        for name in trees:
            res = [run[i] for run in runs[name]]
            labels = res[0]["labels"]
            row[name] = {"k_chosen": int(max(labels)) + 1, "error_pct": _error(labels, truth),
                         "cpu_s": [x["cpu"] for x in res], "wall_s": [x["wall"] for x in res],
                         "cpu_s_median": float(np.median([x["cpu"] for x in res]))}
        if "baseline" in trees:
            row["labels_equal"] = all(x[i]["labels"] == runs["this"][0][i]["labels"]
                                      for name in trees for x in runs[name])
            row["cpu_ratio"] = row["this"]["cpu_s_median"] / row["baseline"]["cpu_s_median"]
        rows.append(row)
        cells = [row["scene"]]
        for name in trees:
            cells += [row[name]["k_chosen"], f"{row[name]['error_pct']:.2f}",
                      f"{row[name]['cpu_s_median']:.2f}"]
        if "baseline" in trees:
            cells += [f"{row['cpu_ratio']:.2f}", "yes" if row["labels_equal"] else "NO"]
        table.append(cells)
    head = ["scene"]
    for name in trees:
        label = a.baseline if name == "baseline" else "this"
        head += [f"{label} K", f"{label} err %", f"{label} CPU s"]
    if "baseline" in trees:
        head += ["this / base", "labels equal"]
    print(f"segment(points), K chosen; median CPU s of {a.rounds} rounds")
    print(format_table(head, table))
    path = write_json(a.out, {"baseline": a.baseline, "rounds": a.rounds, "seed": a.seed,
                              "scenes": a.scenes, "rows": rows})
    print(f"written {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
