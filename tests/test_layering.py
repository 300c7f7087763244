"""The dependency rule of ARCHITECTURE.md, enforced by parsing imports."""

import ast
from pathlib import Path

import cvfs

PKG = Path(cvfs.__file__).parent
APPS = {"keypoints", "motion", "astro"}
# what each layer may import from cvfs (besides itself)
ALLOWED = {
    "_jit": set(),
    "core": {"core", "base", "_jit"},
    "base": {"base"},
    "estimators": {"core", "base", "estimators"},
    "model_selection": {"core", "base", "estimators", "model_selection"},
    "io": {"io", "base", "estimators"},
    "datasets": {"datasets", "io", "base"},
    "viz": {"viz", "io", "base", "core"},
    "models": set(),  # the shipped model files (package data)
    "vision": {"vision", "core", "estimators", "base", "io", "datasets", "viz", "_jit"},
    "keypoints": {"keypoints", "vision", "core", "estimators", "base", "io", "datasets", "viz",
                  "_jit"},
    "motion": {"motion", "core", "estimators", "base", "io", "datasets", "viz", "_jit"},
    "astro": {"astro", "core", "estimators", "base", "io", "datasets", "viz", "_jit"},
}
# the top layer: the console script (with its kernel warm-up), the demo and the package's lazy
# re-exports import anything
TOP = {"cli", "demo", "__main__", "__init__"}


def _layer(path):
    rel = path.relative_to(PKG)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _cvfs_imports(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for n in names:
            seg = n.split(".")
            if seg[0] == "cvfs" and len(seg) > 1:
                yield seg[1]


def test_every_module_has_a_layer():
    unplaced = sorted(str(p.relative_to(PKG)) for p in PKG.rglob("*.py")
                      if _layer(p) not in ALLOWED and _layer(p) not in TOP)
    assert not unplaced, f"modules outside every layer of ALLOWED / TOP: {unplaced}"


def test_layers_import_only_what_they_may():
    bad = []
    for path in PKG.rglob("*.py"):
        layer = _layer(path)
        if layer in TOP:
            continue
        for target in _cvfs_imports(path):
            if target == "__version__":
                continue
            if target not in ALLOWED[layer]:
                bad.append(f"{path.relative_to(PKG)} ({layer}) imports cvfs.{target}")
    assert not bad, "\n".join(bad)
