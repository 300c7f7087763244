"""The dependency rule of ARCHITECTURE.md, enforced by parsing imports."""

import ast
from pathlib import Path

import cvfs

PKG = Path(cvfs.__file__).parent
APPS = {"keypoints", "motion", "astro"}
# what each layer may import from cvfs (besides itself)
ALLOWED = {
    "core": {"core", "base"},
    "base": {"base"},
    "estimators": {"core", "base", "estimators"},
    "io": {"io", "base", "estimators"},
    "datasets": {"datasets", "io", "base"},
    "viz": {"viz", "io", "base", "core"},
    "vision": {"vision", "core", "estimators", "base", "io", "datasets", "viz"},
    "keypoints": {"keypoints", "vision", "core", "estimators", "base", "io", "datasets", "viz"},
    "motion": {"motion", "core", "estimators", "base", "io", "datasets", "viz"},
    "astro": {"astro", "core", "estimators", "base", "io", "datasets", "viz"},
}


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


def test_layers_import_only_what_they_may():
    bad = []
    for path in PKG.rglob("*.py"):
        layer = _layer(path)
        if layer not in ALLOWED:
            continue  # cli, demo, __init__, __main__: the top may import anything
        for target in _cvfs_imports(path):
            if target.startswith("_") or target == "__version__":
                continue
            if target not in ALLOWED[layer] and (target in ALLOWED or target in APPS):
                bad.append(f"{path.relative_to(PKG)} ({layer}) imports cvfs.{target}")
    assert not bad, "\n".join(bad)
