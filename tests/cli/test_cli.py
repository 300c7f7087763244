"""The ``cvfs`` command line: help text, version, errors, the demo."""

import argparse

import pytest

import cvfs
from cvfs.cli import main
from cvfs.cli.parser import build_parser


def _parsers(parser, path=("cvfs",)):
    """Every (command path, parser) pair, subcommands included."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


def test_every_option_has_help_with_its_default():
    """Every option has help; it shows the default where there is one (not for plain flags,
    nor for options whose default None means "not given")."""
    missing = []
    n = 0
    for path, parser in _parsers(build_parser()):
        assert "``" not in (parser.description or ""), path  # plain text, no rst markup
        assert issubclass(parser.formatter_class, argparse.ArgumentDefaultsHelpFormatter), path
        formatter = parser._get_formatter()
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._VersionAction,
                                   argparse._SubParsersAction)):
                continue
            n += 1
            if not action.help:
                missing.append(f"{' '.join(path)} {action.dest}: no help")
            elif action.option_strings and not action.required and \
                    "default" not in formatter._get_help_string(action) and \
                    formatter._default(action) is not None and not (
                        action.nargs == 0
                        and not isinstance(action, argparse.BooleanOptionalAction)):
                missing.append(f"{' '.join(path)} {action.option_strings[0]}: no default shown")
    assert not missing, "\n".join(missing)
    assert n > 80


def test_help_shows_train_recipe_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["keypoints", "train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--k K selected features (paper: 1500) (default: 1500)" in text
    assert "(default: 20.0 40.0)" in text  # --ied-range, from train_detector's signature


def test_top_level_help_and_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"cvfs {cvfs.__version__}"
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert "``" not in text and "cvfs demo" in text and "astro" in text


def test_app_options_exist_in_the_cli(capsys):
    """Every option of the former apps is a CLI option (the apps are the CLI now)."""
    for argv, options in ((["keypoints", "detect", "--help"],
                           ["--jobs", "--max-frames", "--top", "--out", "--max-scale",
                            "--threshold", "--model", "--strict"]),
                          (["motion", "segment", "--help"],
                           ["--motions K|auto", "--out", "--max-frames", "--max-points",
                            "--model", "--strict"]),
                          (["astro", "denoise", "--help"], ["--out", "--psf-sigma", "--tile"])):
        with pytest.raises(SystemExit):
            main(argv)
        text = capsys.readouterr().out
        for option in options:
            assert option in text, (argv, option)


def test_errors_name_the_command_and_exit_2(tmp_path, capsys):
    assert main(["motion", "segment", str(tmp_path / "none.avi")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cvfs motion segment: error: source not found") and "none.avi" in err
    (tmp_path / "bad.png").write_bytes(b"not a png")
    assert main(["astro", "denoise", str(tmp_path / "bad.png"), "--out",
                 str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cvfs astro denoise: error: could not decode image file")
    assert not (tmp_path / "o").exists()


def test_demo_fsa_part_writes_figures_and_summary(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path), "--parts", "fsa", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "true features found: 10/10" in out and str(tmp_path.resolve()) in out
    assert (tmp_path / "fsa_coefficient_paths.png").stat().st_size > 1000
    assert "FSA" in (tmp_path / "summary.txt").read_text()
    assert (tmp_path / ".cvfs-output").is_file()
