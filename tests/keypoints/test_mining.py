"""Mining bookkeeping: hardest selection, checkpoints, interrupt and resume."""

import json

import numpy as np
import pytest

from cvfs.keypoints import mining
from cvfs.keypoints._additive import AdditiveModel
from cvfs.keypoints.boosting import LogitBoostClassifier
from cvfs.keypoints.examples import EXAMPLE_DTYPE
from cvfs.keypoints.mining import (
    MiningState,
    config_diff,
    load_checkpoint,
    merge_hardest,
    run_mining,
    save_checkpoint,
)


def _rec(rows):
    return np.array(rows, dtype=EXAMPLE_DTYPE)


def test_merge_hardest():
    c = _rec([(0, 0, 1, 1), (0, 0, 2, 2), (1, -1, 3, 3), (0, 0, 1, 1), (2, 0, 5, 5)])
    s = np.array([0.5, 2.0, 1.0, 0.5, 3.0])
    got, gs = merge_hardest(c, s, 3, exclude=_rec([(2, 0, 5, 5)]), return_scores=True)
    np.testing.assert_array_equal(got, c[[1, 2, 0]])
    np.testing.assert_array_equal(gs, [2.0, 1.0, 0.5])
    assert merge_hardest(c, s, 10).size == 4  # the repeat is dropped
    assert merge_hardest(c[:0], s[:0], 3).size == 0


# A toy "image world": image i has 400 positions (level 0, x in 0..19, y in 0..19); a position's
# feature vector is a fixed random function of it; positives are 3 special positions per image.
def _feat(examples):
    rng = np.random.default_rng(0)
    W = rng.standard_normal((4, 6))
    base = np.column_stack([examples["image"], examples["x"], examples["y"],
                            (examples["x"] - 10.0) ** 2 + (examples["y"] - 10.0) ** 2])
    return np.tanh(base / 10.0 @ W)


def _positives(n_images):
    return _rec([(i, 0, 10 + d, 10) for i in range(n_images) for d in (-1, 0, 1)])


def _scan(model, i):
    yy, xx = np.mgrid[0:20, 0:20]
    far = np.hypot(xx - 10, yy - 10) >= 5
    c = np.zeros(int(far.sum()), dtype=EXAMPLE_DTYPE)
    c["image"], c["x"], c["y"] = i, xx[far], yy[far]
    return c, model.decision_function(_feat(c)[:, model.features])


def _fit(X, y):
    return LogitBoostClassifier(n_estimators=10, bins=8, sample_fraction=0.5,
                                random_state=0).fit(X, y).model_


class _Interrupt(Exception):
    pass


def test_run_mining_grows_and_resumes(tmp_path):
    n_images = 4
    pos = _positives(n_images)
    neg = _rec([(i, 0, 0, 0) for i in range(n_images)])
    kw = dict(features=_feat, fit=_fit, scan=_scan, n_images=n_images, n_hard=15,
              config={"keypoint": "toy"})
    full = run_mining(pos, neg, n_rounds=3, **kw)
    assert full.round == 3 and len(full.history) == 3
    assert full.negatives.size == neg.size + 2 * 15
    assert [h["n_added"] for h in full.history] == [15, 15, 0]
    assert np.unique(full.negatives).size == full.negatives.size
    # interrupted during round 3 (its fit raises): rounds 1-2 are in the checkpoint
    ckpt = tmp_path / "mine.h5"
    calls = {"n": 0}

    def fit_then_fail(X, y):
        calls["n"] += 1
        if calls["n"] == 3:
            raise _Interrupt
        return _fit(X, y)

    with pytest.raises(_Interrupt):
        run_mining(pos, neg, n_rounds=3, checkpoint=ckpt, **{**kw, "fit": fit_then_fail})
    st = load_checkpoint(ckpt)
    assert st.round == 2 and st.negatives.size == neg.size + 30
    resumed = run_mining(pos, neg, n_rounds=3, checkpoint=ckpt, **kw)
    assert resumed.round == 3
    np.testing.assert_array_equal(resumed.negatives, full.negatives)
    X = np.random.default_rng(1).standard_normal((20, 6))
    np.testing.assert_array_equal(resumed.model.decision_function(X[:, resumed.model.features]),
                                  full.model.decision_function(X[:, full.model.features]))
    # features are computed once per example: all of them in round 1, then the mined rows only
    sizes = []

    def counting(examples):
        sizes.append(examples.size)
        return _feat(examples)

    run_mining(pos, neg, n_rounds=3, **{**kw, "features": counting})
    assert sizes == [pos.size + neg.size, 15, 15]
    # in chunks (here of 4 examples) into one buffer: same examples, same model, and every
    # round's fit sees the rows of all examples so far
    sizes.clear()
    seen = []

    def fit_seen(X, y):
        seen.append((X.copy(), y.copy()))
        return _fit(X, y)

    orig, mining._CHUNK = mining._CHUNK, 4
    try:
        small = run_mining(pos, neg, n_rounds=3, **{**kw, "features": counting, "fit": fit_seen})
    finally:
        mining._CHUNK = orig
    assert max(sizes) == 4 and sum(sizes) == pos.size + neg.size + 30
    np.testing.assert_array_equal(small.negatives, full.negatives)
    for X_r, y_r in seen:
        ex = np.concatenate([small.positives, small.negatives])[:y_r.size]
        np.testing.assert_array_equal(X_r, _feat(ex))
    assert [len(y_r) for _, y_r in seen] == [pos.size + neg.size + 15 * r for r in range(3)]
    # running again with a finished checkpoint does nothing more
    again = run_mining(pos, neg, n_rounds=3, checkpoint=ckpt, **kw)
    assert again.round == 3 and len(again.history) == 3
    # a resume with other settings is refused, naming each differing or missing key
    with pytest.raises(ValueError, match=r"was made with other settings: k = missing in the "
                       r"checkpoint, 1 now; keypoint = 'toy' in the checkpoint, missing now"):
        run_mining(pos, neg, n_rounds=3, checkpoint=ckpt, **{**kw, "config": {"k": 1}})
    with pytest.raises(ValueError, match=r"keypoint = 'toy' in the checkpoint, 'eye' now; "
                       r"delete it"):
        run_mining(pos, neg, n_rounds=3, checkpoint=ckpt,
                   **{**kw, "config": {"keypoint": "eye"}})


def test_config_diff():
    saved = {"a": 1, "b": {"x": [1, 2], "y": "s"}, "c": None}
    assert config_diff(saved, json.loads(json.dumps(saved))) == []
    diff = config_diff(saved, {"a": 1.0, "b": {"x": [1, 3]}, "c": None, "d": 2})
    assert [(k, a, b) for k, a, b in diff if k != "b.y"] == [("b.x", [1, 2], [1, 3]),
                                                             ("d", mining._MISSING, 2)]
    assert [k for k, *_ in diff] == ["b.x", "b.y", "d"]
    assert config_diff({"a": {"x": 1}}, {"a": 5}) == [("a", {"x": 1}, 5)]


def test_checkpoint_round_trip_and_errors(tmp_path):
    st = MiningState(_positives(1), _rec([(0, -2, 3, 4)]), round=1,
                     model=AdditiveModel([2], [0.0], [1.0], [[0.0, 1.0]], 0.5),
                     history=[{"round": 1}], config={"a": 1})
    p = save_checkpoint(tmp_path / "c.h5", st)
    back = load_checkpoint(p)
    np.testing.assert_array_equal(back.negatives, st.negatives)
    assert back.round == 1 and back.history == [{"round": 1}] and back.config == {"a": 1}
    assert back.model.intercept == 0.5
    with pytest.raises(FileNotFoundError, match="mining checkpoint not found"):
        load_checkpoint(tmp_path / "none.h5")
    (tmp_path / "bad.h5").write_bytes(b"garbage")
    with pytest.raises(ValueError, match="not a valid mining checkpoint: delete it"):
        load_checkpoint(tmp_path / "bad.h5")
    import h5py

    with h5py.File(tmp_path / "other.h5", "w") as f:  # an unsealed HDF5 file (version 1)
        f.attrs["x"] = 1
    with pytest.raises(ValueError, match="not a valid mining checkpoint"):
        load_checkpoint(tmp_path / "other.h5")


def _tampered(tmp_path, edit):
    """A checkpoint whose content was changed by ``edit(state)`` and re-sealed (so the
    checksums pass and the content checks are exercised)."""
    st = MiningState(_positives(2), _rec([(0, -2, 3, 4), (1, 0, 1, 1)]), round=1,
                     model=AdditiveModel([2], [0.0], [1.0], [[0.0, 1.0]], 0.5),
                     history=[{"round": 1}], config={"a": 1})
    edit(st)
    return save_checkpoint(tmp_path / "t.h5", st)


def test_tampered_checkpoints_are_refused(tmp_path):
    p = _tampered(tmp_path, lambda st: None)
    data = bytearray(p.read_bytes())
    data[-100] ^= 0x01  # one flipped bit: the file checksum fails
    p.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="not a valid mining checkpoint"):
        load_checkpoint(p)
    p.write_bytes(bytes(data[: len(data) // 2]))  # truncated
    with pytest.raises(ValueError, match="not a valid mining checkpoint"):
        load_checkpoint(p)
    cases = [
        (lambda st: setattr(st, "round", 3), "history must list one entry per completed round"),
        (lambda st: setattr(st, "model", None), "1 completed round.s. but no classifier"),
        (lambda st: setattr(st, "model", AdditiveModel([10**9], [0.0], [1.0], [[0.0, 1.0]],
                                                       0.5)),
         "model/features holds indices outside the feature pool"),
        (lambda st: setattr(st, "model", AdditiveModel([2], [np.nan], [1.0], [[0.0, 1.0]],
                                                       0.5)), "NaN|finite"),
    ]
    for edit, match in cases:
        p = _tampered(tmp_path, edit)
        with pytest.raises(ValueError, match=match):
            load_checkpoint(p)


def test_checkpoint_with_a_bad_image_index_is_refused(tmp_path):
    p = _tampered(tmp_path, lambda st: st.negatives.__setitem__("image", [0, 7]))
    kw = dict(features=_feat, fit=_fit, scan=_scan, n_images=2, n_rounds=2, checkpoint=p,
              config={"a": 1})
    with pytest.raises(ValueError, match=r"negatives refer to image 7; the run has 2 images"):
        run_mining(_positives(2), _rec([(0, 0, 0, 0)]), **kw)


def test_run_mining_errors():
    kw = dict(features=_feat, fit=_fit, scan=_scan, n_images=1)
    pos, neg = _positives(1), _rec([(0, 0, 0, 0)])
    with pytest.raises(ValueError, match="n_rounds must be a positive int"):
        run_mining(pos, neg, n_rounds=0, **kw)
    with pytest.raises(ValueError, match="n_hard must be a positive int"):
        run_mining(pos, neg, n_hard=0, **kw)
    with pytest.raises(ValueError, match="need positives and negatives"):
        run_mining(pos, neg[:0], **kw)
