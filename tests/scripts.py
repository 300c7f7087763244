"""Load a script of the repository (an app, a benchmark, a data-prep command) as a module."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_script(relpath, name=None):
    """The module of the script ``ROOT / relpath`` (e.g. ``"benchmarks/motion/motion_k.py"``)."""
    path = ROOT / relpath
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
