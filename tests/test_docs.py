"""The docs and help texts stand on their own: every repository path they name exists, no machine
paths, and no option help shows a default that means nothing ("default: None")."""

import argparse
import ast
import re
from pathlib import Path

import pytest

from cvfs.cli.parser import build_parser

ROOT = Path(__file__).resolve().parents[1]
MARKDOWN = [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "cvfs" / "models" / "README.md",
            *sorted((ROOT / "docs").glob("*.md"))]
SCRIPTS = [p for d, g in (("benchmarks", "**/*.py"), ("data_prep", "*.py"), ("apps", "*.py"))
           for p in sorted((ROOT / d).glob(g))]

LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
# a path inside the repository: starts with one of its top-level folders
PATH = re.compile(r"(?<![\w./$-])((?:benchmarks|docs|cvfs|tests|data_prep|apps|\.ci)/[\w./<>*-]*)")
# a benchmark named to the runner: benchmarks/run.py <area>/<script> (or a top-level script)
RUNNER = re.compile(r"benchmarks/run\.py ([\w]+(?:/[\w]+)?)")
MACHINE = re.compile(r"(?<![\w.])(/tmp/|/work/|/home/|/root/|/Users/|\.\./shared)")
# written when the code runs, not part of the repository
OUTPUTS = ("benchmarks/results/", "cvfs/__pycache__")


def _texts():
    for path in MARKDOWN:
        yield path, path.read_text()
    for path in SCRIPTS:
        yield path, ast.get_docstring(ast.parse(path.read_text())) or ""


def _exists(base, ref):
    ref = ref.rstrip(".,;:")
    if any(ref.startswith(o) for o in OUTPUTS):
        return True
    pattern = re.sub(r"<[^>]*>", "*", ref)
    if "*" in pattern:
        return any(ROOT.glob(pattern))
    return (base / pattern).exists()


@pytest.mark.parametrize("path, text", list(_texts()), ids=lambda v: getattr(v, "name", ""))
def test_every_repository_path_exists(path, text):
    base = path.parent if path.suffix == ".md" else ROOT
    links = [m.group(1) for m in LINK.finditer(text) if "://" not in m.group(1)]
    named = [m.group(1) for m in PATH.finditer(text)]
    scripts = [m.group(1) for m in RUNNER.finditer(text)]
    missing = [r for r in links if not _exists(base, r)] + \
        [r for r in named if not _exists(ROOT, r)] + \
        [f"run.py {s}" for s in scripts if not (ROOT / "benchmarks" / f"{s}.py").is_file()]
    assert not missing, f"{path.relative_to(ROOT)} names paths not in the repository: {missing}"


@pytest.mark.parametrize("path, text", list(_texts()), ids=lambda v: getattr(v, "name", ""))
def test_no_machine_paths(path, text):
    found = [line.strip() for line in text.splitlines() if MACHINE.search(line)]
    assert not found, f"{path.relative_to(ROOT)} names machine paths: {found}"


def _parsers(parser, name="cvfs"):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, p in action.choices.items():
                yield from _parsers(p, f"{name} {sub}")


def test_help_shows_only_meaningful_defaults():
    bad = []
    for name, parser in _parsers(build_parser()):
        text = " ".join(parser.format_help().split())  # undo the line wrapping
        bad += [f"{name}: {m}" for m in re.findall(r"default: (?:None|False|\[\]|\))", text)]
        bad += [f"{name}: {m}" for m in MACHINE.findall(text)]
    assert not bad, bad


def test_tracker_help_shows_the_tracker_settings_defaults():
    from dataclasses import fields

    from cvfs.motion.tracking import TrackerSettings

    parser = dict(_parsers(build_parser()))["cvfs motion segment"]
    text = " ".join(parser.format_help().split())
    defaults = {f.name: f.default for f in fields(TrackerSettings)}
    for option, field in (("--cell", "cell"), ("--min-quality", "quality"),
                          ("--min-ncc", "min_ncc"), ("--moving-density", "moving_density")):
        section = text.split(option, 2)[2]  # past the usage line
        assert f"(default: {defaults[field]})" in section.split(" --")[0], option
