"""Shared helpers of the benchmark scripts: threads, timing, the FSA plug, tables, JSON.

Not a benchmark itself. Every comparison in ``benchmarks/`` is single-threaded: ``limit_threads``
pins BLAS/OpenMP (threadpoolctl) and numba to one thread, and the peers get ``thread=1`` /
``n_jobs=None`` where they have such a parameter. Times are CPU seconds of the process
(``time.process_time``, all threads counted) next to wall seconds (``time.perf_counter``); on a
shared machine the CPU time is the steadier of the two.

FSA is built in one place, ``fsa_estimator``: ``cvfs.FSAClassifier`` / ``FSARegressor`` with
default parameters.

One results format: every script writes its JSON through ``write_json``, which puts a ``"run"``
record (``run_info``: machine, command line, cvfs version, git commit, time) beside the script's
own keys; the default file of ``benchmarks/<area>/<script>.py`` is
``benchmarks/results/<area>/<script>.json`` (``result_path``).
"""

import json
import os
import platform
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

__all__ = [
    "THREAD_VARS",
    "best_time",
    "fsa_estimator",
    "format_table",
    "limit_threads",
    "machine_info",
    "result_path",
    "run_info",
    "timed",
    "to_jsonable",
    "write_json",
]

ROOT = Path(__file__).resolve().parent
#: where the scripts write by default: one folder per area (not part of the repository)
RESULTS = ROOT / "results"

THREAD_VARS = ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def limit_threads():
    """Pin BLAS, OpenMP and numba to one thread (also for child processes via the environment)."""
    for var in THREAD_VARS:
        os.environ.setdefault(var, "1")
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)
    try:
        import numba
        from numba.core import config
    except ImportError:  # pragma: no cover - numba always present in cvfs
        return
    # numba reads NUMBA_NUM_THREADS again before every compilation and refuses a value other
    # than the one its thread pool was launched with: make the two agree.
    try:
        config.reload_config()
    except RuntimeError:  # the pool is already running: keep its size in the environment
        os.environ["NUMBA_NUM_THREADS"] = str(numba.config.NUMBA_NUM_THREADS)
    numba.set_num_threads(1)


def machine_info():
    """What ran the benchmark: CPU, cores, memory, load, library versions, thread settings."""
    import importlib.metadata as md

    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        mem = None
    versions = {}
    for pkg in ("cvfs", "numpy", "scipy", "numba", "scikit-learn", "abess", "h5py"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = None
    return {
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": platform.node(),
        "python": platform.python_version(),
        "cpu": cpu,
        "n_cpus": os.cpu_count(),
        "memory_bytes": mem,
        "loadavg_start": list(os.getloadavg()),
        "threads": {var: os.environ.get(var) for var in THREAD_VARS},
        "versions": versions,
    }


@contextmanager
def timed():
    """Measure a block: yields a dict that gets ``cpu`` and ``wall`` seconds on exit."""
    out = {}
    c0, w0 = time.process_time(), time.perf_counter()
    try:
        yield out
    finally:
        out["cpu"] = time.process_time() - c0
        out["wall"] = time.perf_counter() - w0


def best_time(f, repeats):
    """Best wall seconds of ``repeats`` calls of ``f()`` after one untimed call (warm caches,
    JIT compiled)."""
    f()
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best


def fsa_estimator(loss, k, random_state, **params):
    """The one place the benchmarks build FSA: default parameters except ``k`` and the loss.

    ``loss`` is ``"logistic"``, ``"lorenz"``, ``"svm"`` (classifier) or ``"squared"``
    (regressor). Extra ``params`` (e.g. ``max_memory``) are estimator parameters.
    """
    from cvfs import FSAClassifier, FSARegressor

    cls = FSARegressor if loss == "squared" else FSAClassifier
    return cls(k=k, loss=loss, random_state=random_state, **params)


def format_table(headers, rows, title=None):
    """Plain-text table: text columns left-aligned, numbers right-aligned.

    ``rows`` hold already formatted strings (or None, shown as ``-``); a row ``None`` draws a rule.
    """
    cells = [[("-" if c is None else str(c)) for c in r] if r is not None else None for r in rows]
    width = [len(h) for h in headers]
    for r in cells:
        if r is not None:
            width = [max(w, len(c)) for w, c in zip(width, r, strict=True)]

    def is_num(text):
        return text[:1].isdigit() or (text[:1] in "-+." and text[1:2].isdigit())

    data = [r for r in cells if r is not None]
    right = [
        any(is_num(r[i]) for r in data) and all(is_num(r[i]) or r[i] == "-" for r in data)
        for i in range(len(headers))
    ]

    def fmt(r):
        return "  ".join(
            c.rjust(w) if rj else c.ljust(w) for c, w, rj in zip(r, width, right, strict=True)
        ).rstrip()

    rule = "  ".join("-" * w for w in width)
    out = []
    if title:
        out.append(title)
    out += [fmt(list(headers)), rule]
    out += [rule if r is None else fmt(r) for r in cells]
    return "\n".join(out)


def to_jsonable(obj):
    """Turn numpy scalars/arrays (and NaN) into plain JSON values."""
    if isinstance(obj, dict):
        return {str(key): to_jsonable(val) for key, val in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_jsonable(val) for val in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    return obj


def result_path(script, name=None, suffix=".json"):
    """Default output of the script file ``script``: ``results/<area>/<name or stem><suffix>``."""
    script = Path(script).resolve()
    return RESULTS / script.parent.relative_to(ROOT) / f"{name or script.stem}{suffix}"


def _git_commit():
    """The checked-out commit of the repository (``+dirty`` with uncommitted changes), or None."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if dirty else "")


def run_info():
    """The ``"run"`` record of every result file: machine, command line, cvfs version, commit.

    The version is the imported package's when cvfs is loaded, else the installed one's (a peer
    environment without cvfs, e.g. the dlib baselines, records None).
    """
    cvfs = sys.modules.get("cvfs")
    info = machine_info()
    version = getattr(cvfs, "__version__", None) or info["versions"]["cvfs"]
    return {**info, "command": [sys.executable, *sys.argv], "cvfs_version": version,
            "git_commit": _git_commit(), "loadavg_end": list(os.getloadavg())}


def write_json(path, obj):
    """Write ``obj`` as indented JSON, atomically; return the path.

    A dict gets the ``"run"`` record (:func:`run_info`) in front of its own keys; anything else is
    written as ``{"run": ..., "results": obj}``. Missing folders are made.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = obj if isinstance(obj, dict) else {"results": obj}
    text = json.dumps(to_jsonable({"run": run_info(), **body}), indent=1) + "\n"
    try:
        from cvfs.io import atomic_write_text
    except ImportError:  # a peer environment without cvfs's dependencies: same temp + rename
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    else:
        atomic_write_text(path, text)
    return path
