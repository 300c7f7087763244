"""Frame sources, video files, the Lucas-Kanade tracker, the drawing helpers and
``cvfs motion segment`` (= ``apps/motion_video.py``)."""

import json
import warnings

import numpy as np
import pytest

from cvfs.cli import main
from cvfs.io.video import SyntheticRigidVideo, VideoWriter, open_source, read_frames, write_video
from cvfs.motion.candidates import generate_candidates
from cvfs.motion.evaluate import misclassification
from cvfs.motion.tracking import track_points
from cvfs.viz.motion import draw_tracks
from tests.scripts import load_script


def test_synthetic_source_streams_named_rgb_frames():
    src = open_source("synth:motions=2,frames=4,seed=1,width=160,height=120")
    assert src.kind == "video" and src.name == "synth"
    items = list(src)
    assert [n for n, _ in items] == [f"synth_{i:04d}" for i in range(4)]
    frames = [f for _, f in items]
    assert frames[0].shape == (120, 160, 3) and frames[0].dtype == np.uint8
    assert not np.array_equal(frames[0], frames[3])
    video = SyntheticRigidVideo(2, 4, size=(160, 120), seed=1)
    np.testing.assert_array_equal(frames[2], video.render(2))  # deterministic rendering
    assert len(list(open_source("synthetic", max_frames=3))) == 3
    face = list(open_source("synthetic:scene=face,frames=20"))
    assert len(face) == 20 and all(f.shape == (320, 320, 3) for _, f in face)
    from skimage import data

    np.testing.assert_array_equal(face[0][1], data.astronaut()[40:360, 60:380])  # RGB order


def test_open_source_rgb_order_of_a_video_file(tmp_path):
    """A red-left/blue-right RGB clip written by write_video is read back in RGB order (and a
    raw OpenCV writer's BGR frame becomes RGB)."""
    frame = np.zeros((48, 64, 3), np.uint8)
    frame[:, :32, 0] = 255  # red (RGB)
    frame[:, 32:, 2] = 255  # blue
    write_video(tmp_path / "rb.avi", [frame] * 3)
    src = open_source(tmp_path / "rb.avi")
    assert src.kind == "video" and src.name == "rb"
    for name, got in src:
        assert got[24, 10, 0] > 200 and got[24, 10, 2] < 60, name
        assert got[24, 50, 2] > 200 and got[24, 50, 0] < 60, name
    # the synthetic clip through a file keeps its colours
    video = SyntheticRigidVideo(2, 3, size=(64, 48), seed=0)
    write_video(tmp_path / "s.avi", [video.render(f) for f in range(3)])
    back = read_frames(tmp_path / "s.avi")
    diff = np.abs(back[1].astype(float) - video.render(1)).mean(axis=(0, 1))
    swapped = np.abs(back[1][..., ::-1].astype(float) - video.render(1)).mean(axis=(0, 1))
    assert diff.max() < 12 and swapped[[0, 2]].max() > diff.max()


def test_open_source_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="source not found"):
        open_source(tmp_path / "missing.avi")
    junk = tmp_path / "junk.avi"
    junk.write_bytes(b"this is not a video")
    with pytest.raises(ValueError, match="cannot open|no frame"):
        read_frames(junk)
    with pytest.raises(ValueError, match="unknown synthetic parameter 'colour'"):
        open_source("synth:colour=3")
    with pytest.raises(ValueError, match="scene must be one of"):
        open_source("synth:scene=street")
    with pytest.raises(ValueError, match="max_frames must be a positive int"):
        open_source("synth", max_frames=0)
    with pytest.raises(ValueError, match="n_motions and n_frames must be >= 1"):
        SyntheticRigidVideo(n_motions=0)


def _truncated_video(tmp_path):
    """An MJPG .avi whose last frames are cut off (the container still declares 10)."""
    path = tmp_path / "cut.avi"
    write_video(path, [SyntheticRigidVideo(2, 10, size=(64, 48)).render(f) for f in range(10)])
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * 0.5)])
    return path


def test_truncated_video_warns_or_fails(tmp_path):
    path = _truncated_video(tmp_path)
    with pytest.warns(UserWarning, match=r"cut.avi: \d frames could be decoded of the 10"):
        frames = read_frames(path)
    assert 0 < len(frames) < 10
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(read_frames(path, max_frames=2)) == 2  # asked for fewer: nothing missing
    with pytest.raises(ValueError, match="frames could be decoded of the 10"):
        read_frames(path, strict=True)


def test_video_writer_is_atomic(tmp_path):
    frame = np.zeros((16, 16, 3), np.uint8)
    with pytest.raises(KeyboardInterrupt):
        with VideoWriter(tmp_path / "v.avi") as w:
            w.write(frame)
            raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="must all be 16x16"):
        with VideoWriter(tmp_path / "v.avi") as w:
            w.write(frame)
            w.write(np.zeros((8, 8, 3), np.uint8))
    assert list(tmp_path.iterdir()) == []


def test_write_video_roundtrip(tmp_path):
    frames = [SyntheticRigidVideo(2, 3, size=(64, 48)).render(f) for f in range(3)]
    path = write_video(tmp_path / "a.avi", frames)
    back = read_frames(path)
    assert len(back) == 3 and back[0].shape == (48, 64, 3)
    with pytest.raises(ValueError, match="at least one frame"):
        write_video(tmp_path / "b.avi", [])


def test_tracker_follows_synthetic_rigid_motions():
    src = SyntheticRigidVideo(n_motions=3, n_frames=20, seed=0)
    frames = [src.render(f) for f in range(20)]
    pts = track_points(frames)
    assert pts.ndim == 3 and pts.shape[1:] == (20, 2) and pts.shape[0] > 150
    assert np.all(np.isfinite(pts))
    truth = src.track_labels(pts)
    assert np.mean(truth >= 0) > 0.9 and set(truth[truth >= 0]) == {0, 1, 2}
    # the candidate pool contains a near-perfect segmentation of the tracks
    ok = truth >= 0
    cand = generate_candidates(pts / 160.0 - 1.0, 3)
    assert misclassification(cand.labels[:, ok], truth[ok]).min() < 0.03


def test_tracker_errors():
    frame = np.zeros((40, 40, 3), np.uint8)
    with pytest.raises(ValueError, match="at least 2 images"):
        track_points([frame])
    with pytest.raises(ValueError, match="same size"):
        track_points([frame, np.zeros((30, 40, 3), np.uint8)])
    with pytest.raises(ValueError, match="no trackable corner"):
        track_points([frame, frame])
    with pytest.raises(ValueError, match="cell must be an int >= 0"):
        track_points([frame, frame], cell=-1)


def test_tracker_on_a_real_video(real_data):
    frames = read_frames(real_data / "hopkins155_videos" / "three-cars.avi")
    pts = track_points(frames)
    assert len(frames) == 15 and pts.shape[1] == 15 and pts.shape[0] > 100


def test_video_truth_lines_up_with_the_videos(real_data):
    """The truth tracks, converted to each video's pixel grid and frames, sit on its corners."""
    import cv2

    from cvfs.datasets.hopkins155_videos import VIDEO_TRUTH, load_video_truth

    for name in VIDEO_TRUTH:
        truth = load_video_truth(name, real_data / "hopkins155")
        frame = read_frames(real_data / "hopkins155_videos" / f"{name}.avi",
                            max_frames=truth.first_frame + 1)[-1]
        corners = cv2.goodFeaturesToTrack(cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY), 20000,
                                          0.0005, 1).reshape(-1, 2)
        d = np.linalg.norm(truth.pixels[:, None, 0] - corners[None], axis=2).min(axis=1)
        if name == "three-cars":  # a coarser clip of the same scene: close, not exact
            assert np.median(d) <= 2.5
        else:
            assert np.mean(d <= 1.5) > 0.9, name
    with pytest.raises(ValueError, match="name must be one of"):
        load_video_truth("cars2", real_data / "hopkins155")


@pytest.mark.slow
def test_walking_person_is_tracked_and_segmented(real_data):
    """people2 (Hopkins155): the cell detector and the extra density on independent motion put
    tracks on the walking woman before textured trees (matched to her truth tracks within 3 px),
    and the two-motion segmentation separates her from the background."""
    from cvfs.datasets.hopkins155_videos import load_video_truth, match_truth
    from cvfs.motion.video import segment_video

    truth = load_video_truth("people2", real_data / "hopkins155")
    res = segment_video(read_frames(real_data / "hopkins155_videos" / "people2.avi"), 2)
    j = match_truth(res.points, truth, visible=res.visible)
    ok = j >= 0
    on = truth.labels[j[ok]] == 0  # the woman is motion 0 of the truth file
    assert ok.sum() > 150 and on.sum() >= 15
    assert misclassification(res.labels[ok], truth.labels[j[ok]]) <= 0.02


@pytest.mark.slow
def test_walking_person_k_is_chosen(real_data):
    """people2: background points that the woman carries off as she passes fail the tracker's
    appearance check, so they form no third motion and K = 2 is chosen."""
    from cvfs.datasets.hopkins155_videos import load_video_truth, match_truth
    from cvfs.motion.video import segment_video

    truth = load_video_truth("people2", real_data / "hopkins155")
    res = segment_video(read_frames(real_data / "hopkins155_videos" / "people2.avi"))
    assert res.k_chosen and res.n_motions == 2
    j = match_truth(res.points, truth, visible=res.visible)
    ok = j >= 0
    assert misclassification(res.labels[ok], truth.labels[j[ok]]) <= 0.05


def _occluded_clip(n_frames=12):
    """Two rigid motions; a flat grey bar hides the middle rows in frames 4..7."""
    video = SyntheticRigidVideo(n_motions=2, n_frames=n_frames, seed=0)
    frames = []
    for f in range(n_frames):
        frame = video.render(f)
        if 4 <= f <= 7:
            frame[100:150] = 128
        frames.append(frame)
    return video, frames


def test_partial_tracks_through_an_occlusion_reach_the_segmentation(monkeypatch):
    from cvfs import motion
    from cvfs.motion.tracking import TrackerSettings
    from cvfs.motion.video import segment_video

    video, frames = _occluded_clip()
    seen = []
    real = motion._segment_tracks

    def spy(points, n_motions=None, **kw):
        seen.append(np.shape(points)[0])
        return real(points, n_motions, **kw)

    monkeypatch.setattr(motion, "_segment_tracks", spy)
    res = segment_video(frames, 2, tracker=TrackerSettings(partial=True))  # tracks >= 6 frames
    assert not res.visible.all() and res.visible.sum(axis=1).min() >= 2
    # every track, complete or not, reaches the segmentation
    assert seen == [res.points.shape[0]] and res.points.shape[0] > res.visible.all(axis=1).sum()
    assert np.array_equal(np.isnan(res.points[..., 0]), ~res.visible)
    # tracks seen on both sides of the occlusion: lost under the bar, new ones after it
    assert np.any(~res.visible[:, 6] & res.visible[:, 0])
    assert np.any(~res.visible[:, 0] & res.visible[:, -1])
    # truth per track: its motion in every visible frame (-1 if it changes)
    per = np.stack([np.where(res.visible[:, f],
                             video.labels_at(np.nan_to_num(res.points[:, f]), f), -2)
                    for f in range(len(frames))], axis=1)
    first = per[np.arange(len(per)), res.visible.argmax(axis=1)]
    consistent = np.all((per == first[:, None]) | (per == -2), axis=1)
    # tracks on the bar's edges (still while it shows) follow neither motion
    y = res.points[:, 4:8, 1]
    on_bar = np.any(res.visible[:, 4:8] & (y > 95) & (y < 155), axis=1)
    truth = np.where(consistent & ~on_bar, first, -1)
    ok = truth >= 0
    assert ok.mean() > 0.7
    assert misclassification(res.labels[ok], truth[ok]) < 0.05


def test_segment_command_writes_partial_tracks_with_visibility(tmp_path, capsys):
    _, frames = _occluded_clip(8)
    video = tmp_path / "occluded.avi"
    write_video(video, frames)
    out = tmp_path / "seg"
    assert main(["motion", "segment", str(video), "--motions", "2", "--partial",
                 "--min-frames", "3", "--cell", "30", "--per-cell", "6", "--fb-threshold",
                 "1.5", "--min-ncc", "0.4", "--out", str(out)]) == 0
    summary = json.loads((out / "occluded_motion.json").read_text())
    assert summary["tracker"]["partial"] and summary["tracker"]["cell"] == 30
    assert summary["tracker"]["fb_threshold"] == 1.5 and 0 < summary["visible_fraction"] < 1
    assert summary["tracker"]["min_ncc"] == 0.4
    import csv

    with open(out / "occluded_motion_labels.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == summary["tracks"] * 8
    hidden = [r for r in rows if r["visible"] == "0"]
    shown = [r for r in rows if r["visible"] == "1"]
    assert hidden and shown and all(r["x"] == "" and r["y"] == "" for r in hidden)
    assert all(np.isfinite(float(r["x"])) for r in shown[:50])
    per_track = {}
    for r in shown:
        per_track.setdefault(r["track"], 0)
        per_track[r["track"]] += 1
    assert min(per_track.values()) >= 3 and len(per_track) == summary["tracks"]


def test_segment_command_bad_input(tmp_path, capsys):
    junk = tmp_path / "junk.avi"
    junk.write_bytes(b"this is not a video")
    assert main(["motion", "segment", str(junk), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "cvfs motion segment: error:" in err and "junk.avi" in err
    assert not (tmp_path / "o").exists()
    assert main(["motion", "segment", str(tmp_path / "missing.avi")]) == 2
    assert "not found" in capsys.readouterr().err
    assert main(["motion", "segment", "synth:frames=4", "--fb-threshold", "0"]) == 2
    assert "fb_threshold must be a positive number; got 0.0" in capsys.readouterr().err
    assert main(["motion", "segment", "synth:frames=4", "--min-ncc", "1"]) == 2
    assert "min_ncc must be a number in [-1, 1)" in capsys.readouterr().err
    assert main(["motion", "segment", "synth:frames=4", "--cell", "-5"]) == 2
    assert "cell must be an int >= 0; got -5" in capsys.readouterr().err


def test_tracker_settings_errors():
    from cvfs.motion.tracking import TrackerSettings

    with pytest.raises(ValueError, match="quality must be in"):
        TrackerSettings(quality=1.5)
    with pytest.raises(ValueError, match="per_cell must be an int >= 1"):
        TrackerSettings(per_cell=0)
    frame = np.zeros((40, 40, 3), np.uint8)
    with pytest.raises(TypeError, match="unknown tracker setting"):
        track_points([frame, frame], grid=4)
    with pytest.raises(TypeError, match="settings must be a TrackerSettings"):
        track_points([frame, frame], {"cell": 4})


def test_draw_tracks_draws_on_a_copy():
    frame = np.zeros((50, 50, 3), np.uint8)
    pts = np.array([[[10, 10], [12, 12], [14, 14]], [[30, 30], [30, 32], [30, 34]]], float)
    out = draw_tracks(frame, pts, np.array([0, 1]), 2)
    assert frame.sum() == 0 and out.sum() > 0
    assert tuple(out[14, 14]) != (0, 0, 0)


def _motion_app():
    return load_script("apps/motion_video.py")


def test_segment_command_and_app(tmp_path, capsys):
    """``cvfs motion segment --motions auto --out`` and the app write the same set."""
    out = tmp_path / "seg"
    assert main(["motion", "segment", "synth:motions=2,frames=12,seed=0", "--motions", "auto",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "12 frames, " in text and "K=2 (chosen; residual ratio" in text
    assert sorted(p.name for p in out.iterdir()) == [
        ".cvfs-output", "synth_motion.avi", "synth_motion.json", "synth_motion.png",
        "synth_motion_labels.csv"]
    summary = json.loads((out / "synth_motion.json").read_text())
    assert summary["independent_motion"] and summary["n_motions"] >= 2 and summary["k_chosen"]
    assert set(summary["k_residuals"]) >= {"2", "3"} and summary["k_ratio"] > 0
    assert summary["video"] == str(out / "synth_motion.avi")
    assert len(read_frames(out / "synth_motion.avi")) == 12
    # labels: one row per track and frame, each track with one label, as in the summary
    table = np.genfromtxt(out / "synth_motion_labels.csv", delimiter=",", names=True)
    assert table.dtype.names == ("track", "label", "frame", "x", "y", "visible")
    assert len(table) == summary["tracks"] * 12 and np.all(table["visible"] == 1)
    per_track = {int(t): set(table["label"][table["track"] == t]) for t in set(table["track"])}
    assert all(len(v) == 1 for v in per_track.values())
    counts = np.bincount([int(next(iter(v))) for v in per_track.values()])
    assert counts.tolist() == summary["points_per_motion"]
    out2 = tmp_path / "app"
    assert _motion_app().main(["synth:motions=2,frames=12,seed=0", "--motions", "2",
                               "--out", str(out2)]) == 0
    assert json.loads((out2 / "synth_motion.json").read_text())["n_motions"] == 2


def test_segment_motions_option_errors(capsys):
    with pytest.raises(SystemExit):
        main(["motion", "segment", "synth", "--motions", "one"])
    assert "must be 'auto' or an int >= 2; got 'one'" in capsys.readouterr().err


def test_frozen_video_has_no_independent_motion(tmp_path, capsys):
    frame = SyntheticRigidVideo(3, 1, seed=0).render(0)
    video = tmp_path / "frozen.avi"
    write_video(video, [frame] * 8)
    out = tmp_path / "out"
    assert main(["motion", "segment", str(video), "--motions", "3", "--out", str(out)]) == 0
    assert "no independent motion" in capsys.readouterr().out
    summary = json.loads((out / "frozen_motion.json").read_text())
    assert summary["n_motions"] == 1 and not summary["independent_motion"]
    assert summary["points_per_motion"] == [summary["tracks"]] and summary["tracks"] > 50


def test_plot_trajectories_legend_per_motion():
    from cvfs.viz.motion import plot_trajectories

    pts = np.random.default_rng(0).uniform(0, 60, size=(10, 4, 2))
    labels = np.repeat([0, 1], 5)
    ax = plot_trajectories(pts, labels, image=np.zeros((60, 80, 3), np.uint8))
    legend = ax.get_legend()
    assert legend is not None and [t.get_text() for t in legend.get_texts()] == [
        "motion 0: 5 tracks", "motion 1: 5 tracks"]
    assert ax.figure.get_size_inches()[0] >= 10
    assert all(c.get_alpha() < 1 and max(c.get_linewidths()) < 1 for c in ax.collections)


def test_track_points_streams_frames():
    """The tracker holds the previous frame only: a frame two steps back is freed."""
    import gc
    import weakref

    from cvfs.io.video import SyntheticRigidVideo
    from cvfs.motion.tracking import track_points

    video = SyntheticRigidVideo(n_motions=2, n_frames=12, seed=1)
    refs = []

    def frames():
        for f in range(video.n_frames):
            frame = video.render(f)
            refs.append(weakref.ref(frame))
            if len(refs) >= 3:
                gc.collect()
                assert refs[-3]() is None, f"frame {len(refs) - 3} is still held"
            yield frame
            del frame

    streamed = track_points(frames())
    listed = track_points([video.render(f) for f in range(video.n_frames)])
    np.testing.assert_array_equal(streamed, listed)
    assert streamed.shape[1] == video.n_frames


def test_motion_segment_camera_like_source_draws_from_kept_frames(tmp_path, monkeypatch):
    """A source that cannot be read twice (a camera) is drawn from copies kept while tracking."""
    from cvfs.cli import commands
    from cvfs.io import video

    real = video.open_source

    def once(source, max_frames=None, *, strict=False):
        src = real(source, max_frames, strict=strict)
        src.replayable = False
        return src

    monkeypatch.setattr(video, "open_source", once)
    out = tmp_path / "seg"
    s = commands.motion_segment("synth:motions=2,frames=8,seed=3", n_motions=2, out=out)
    assert s["frames"] == 8 and (out / "synth_motion.avi").stat().st_size > 1000

