"""The "how to add a loss" guide (docs/losses.md) runs as written: its user loss, defined in the
one code block, reaches FSAClassifier (binary fit, predict_proba, the registry name)."""

import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from cvfs.core.losses import LOSSES, get_loss

DOC = Path(__file__).resolve().parents[2] / "docs" / "losses.md"


def _blocks():
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_guide_has_one_example_and_it_runs(tmp_path, monkeypatch):
    blocks = _blocks()
    assert len(blocks) == 1
    # the block as the user's file, imported as a module
    path = tmp_path / "user_loss.py"
    path.write_text(blocks[0])
    saved = dict(LOSSES)
    try:
        spec = importlib.util.spec_from_file_location("user_loss", path)
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, "user_loss", module)
        spec.loader.exec_module(module)
        ns = vars(module)
        loss = ns["ModifiedHuber"]()
        assert get_loss("modified_huber", "classifier").name == "modified_huber"
        # the probabilities are the loss's own, and the capabilities decide the roles
        clf = ns["clf"]
        z = clf.decision_function(ns["X"])
        np.testing.assert_array_equal(clf.predict_proba(ns["X"])[:, 1], loss.proba(z))
        with pytest.raises(ValueError, match="a regressor needs"):
            get_loss(loss, "regressor")
    finally:
        LOSSES.clear()
        LOSSES.update(saved)
    with pytest.raises(ValueError, match="loss must be one of"):
        get_loss("modified_huber")
