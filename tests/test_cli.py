from cvfs.cli import main


def test_demo_fsa_part_writes_figures_and_summary(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path), "--parts", "fsa", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "true features found: 10/10" in out and str(tmp_path.resolve()) in out
    assert (tmp_path / "fsa_coefficient_paths.png").stat().st_size > 1000
    assert "FSA" in (tmp_path / "summary.txt").read_text()
