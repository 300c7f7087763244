"""The work behind the ``cvfs`` subcommands that read images or video and write output sets.

:mod:`cvfs.cli` parses the arguments and calls these functions; the scripts in ``apps/`` call
:func:`cvfs.cli.main`, so a script and its subcommand are one implementation. Each function opens
its inputs (:func:`cvfs.io.video.open_source`, :func:`cvfs.astro.readers.read_image`), calls the
library, draws, and writes the output files of a run through :func:`cvfs.io.atomic_dir`: into
a temporary folder, then each renamed into ``out``, replacing only the files the previous run
wrote there (the folder's manifest); the user's own files in ``out`` are never touched, and a
folder holding the run's input is refused. ``out`` is checked before any computation. Results go
to stdout; progress, timing and the list of written files go to stderr.
"""

import contextlib
import functools
import json
import sys
import time
from pathlib import Path

import numpy as np

from cvfs.io import atomic_dir, atomic_write_text, check_output_dir, raise_pending

__all__ = ["VIDEO_MAX_SCALE", "astro_denoise", "astro_localise", "keypoints_detect",
           "motion_segment"]

#: Largest pyramid scale scanned on video frames (no upsampled levels: faces with an inter-eye
#: distance of at least ~20 px, about 4 times fewer windows than scale 2; measured by
#: ``benchmarks/keypoints/keypoints_speed.py``).
VIDEO_MAX_SCALE = 1.0


def _err(*parts):
    print(*parts, file=sys.stderr)


def _output_set(out, command, inputs=()):
    """``atomic_dir(out)`` when ``out`` is given, else a block yielding None (nothing written)."""
    if out is None:
        return contextlib.nullcontext(None)
    return atomic_dir(out, command=command, inputs=inputs)


def _report_written(out):
    from cvfs.io import output_files

    _err(f"written to {Path(out).resolve()}: {', '.join(output_files(out))}")


def keypoints_detect(sources, *, model=None, out=None, threshold=None, max_scale=None, top=1,
                     n_jobs=-1, max_frames=None, strict=False, what="auto", face_model=None,
                     fmt="json", top_down=None, rescan=15, command="cvfs keypoints detect"):
    """Detect faces (or keypoints) on every frame of the sources; print them; write them to ``out``.

    Parameters
    ----------
    sources : list of str
        Each an image, a folder of images, a video file, a camera index or a synthetic clip
        (:func:`cvfs.io.video.open_source`).
    model : str or Path, optional
        Detector file; None loads the shipped detectors.
    out : str or Path, optional
        Output folder. Faces: ``<name>_faces.png`` (one colour per face) and, with ``fmt="json"``,
        ``<name>_faces.json`` per image; ``<name>_faces.avi`` and ``<name>_faces.json`` (every
        frame's faces with their track ids) per video; with ``fmt="csv"`` one ``faces.csv``
        for the whole run instead of the JSON files. Keypoints: ``<name>_keypoints.png`` per
        image, ``<name>_keypoints.avi`` per video (the ``top`` detections of each keypoint).
        None writes nothing.
    threshold : float, optional
        Faces: minimum face probability (default: the face model's). Keypoints: score threshold
        (default: the detector's).
    max_scale : float, optional
        Largest pyramid scale; default the detector's for images and :data:`VIDEO_MAX_SCALE`
        for video frames.
    top : int, default 1
        Keypoints only: detections per keypoint printed and drawn (best first).
    n_jobs : int, default -1
        Threads scanning the pyramid levels of a frame (-1: every core; same detections).
    max_frames : int, optional
        At most this many frames per source.
    strict : bool, default False
        A truncated video file is an error instead of a warning.
    what : {"auto", "faces", "keypoints"}
        ``"faces"``: :meth:`KeypointDetector.detect_faces`; ``"keypoints"``:
        :meth:`KeypointDetector.detect`; ``"auto"``: faces when the detector finds every
        keypoint of the face model and the face model exists, else keypoints.
    face_model : str or Path, optional
        Face model file (default: the shipped ``faces.h5``).
    fmt : {"json", "csv"}
        Faces only: the table format written to ``out``.
    top_down : bool, optional
        Faces only: as :meth:`KeypointDetector.detect_faces`; default False for images (every
        keypoint everywhere) and True for video frames (about twice as fast).
    rescan : int, default 15
        Faces in video: every ``rescan``-th frame is scanned, the faces found are followed on
        the frames between (:class:`cvfs.keypoints.video.VideoFaceDetector`); 1 scans every
        frame.
    command : str
        Recorded in the output set's marker file.

    Returns
    -------
    n_frames : int
        Frames processed.
    skipped : list of (str, str)
        ``(file name, reason)`` of every image file passed over: unreadable (corrupt, empty,
        unknown format, over the pixel limit) or smaller than the detectors' window. The other
        files are processed and written.

    Raises
    ------
    ValueError
        If no image of the sources could be read (nothing is written), besides the errors of
        the sources, the model and ``out``.

    Notes
    -----
    stdout holds one tab-separated line per detection. Faces: frame, track id (video) or face
    number (image), face score, keypoint, x, y, keypoint probability (``nan`` where not found).
    Keypoints: frame, keypoint, x, y, score.
    """
    from cvfs.io.video import open_source
    from cvfs.keypoints import load_detector

    if what not in ("auto", "faces", "keypoints"):
        raise ValueError(f"what must be 'auto', 'faces' or 'keypoints'; got {what!r}")
    if fmt not in ("json", "csv"):
        raise ValueError(f"format must be 'json' or 'csv'; got {fmt!r}")
    det = load_detector(model)
    fm = None
    if what != "keypoints":
        fm = _face_model(det, face_model, required=what == "faces")
        if fm is None:
            _err("keypoints mode: the detector lacks keypoints of the face model, or there is "
                 "no face model")
    # fail before work; unreadable image files are skipped while iterating
    opened = [open_source(s, max_frames, strict=strict, on_error="skip") for s in sources]
    if out is not None:
        check_output_dir(out, sources)
    times, skipped = [], []
    with _output_set(out, command, sources) as tmp:
        rows = []
        for src in opened:
            video = src.kind == "video"  # video frames: a smaller pyramid, the top-down scan
            scale = VIDEO_MAX_SCALE if max_scale is None and video else max_scale
            run = _keypoints_run if fm is None else functools.partial(
                _faces_run, top_down=video if top_down is None else top_down, rescan=rescan)
            frames = _usable_frames(src, det.pool.window, skipped)
            run(det, fm, src, frames, tmp, times, rows, threshold=threshold, max_scale=scale,
                n_jobs=n_jobs, top=top, fmt=fmt)
            skipped.extend(src.skipped or ())
        if skipped and not times:
            raise ValueError("no image could be read: " + "; ".join(
                f"{name}: {why}" for name, why in skipped))
        if tmp is not None and fm is not None and fmt == "csv":
            _write_csv(tmp / "faces.csv", rows)
    if times:
        _err(f"{len(times)} frame(s), mean {np.mean(times) * 1e3:.0f} ms "
             f"({1 / max(np.mean(times), 1e-9):.2f} frames/s)")
    if skipped:
        _err(f"{len(skipped)} image file(s) skipped, the others processed: "
             + "; ".join(f"{name}: {why}" for name, why in skipped))
    if out is not None:
        _report_written(out)
    return len(times), skipped


def _face_model(det, path, required):
    """The face model for ``det`` (None when ``required`` is False and it cannot be used)."""
    from cvfs.keypoints.faces import load_face_model

    try:
        fm = load_face_model(path)
    except FileNotFoundError:
        if required or path is not None:
            raise
        return None
    missing = [k for k in fm.shape.names if k not in det.keypoints]
    if missing:
        if required:
            raise ValueError(f"faces need detectors of {missing}; the detector finds "
                             f"{det.keypoints} (use --what keypoints)")
        return None
    return fm


def _usable_frames(src, window, skipped):
    """The frames of ``src`` large enough for the detectors' window; smaller image files are
    listed in ``skipped`` (a video with such frames is an error, as every frame is). A signal
    whose exception was swallowed stops the run here (:func:`cvfs.io.raise_pending`)."""
    for name, rgb in src:
        raise_pending()
        if src.kind == "images" and min(rgb.shape[:2]) < window:
            skipped.append((name, f"{rgb.shape[1]}x{rgb.shape[0]} pixels, smaller than the "
                                  f"{window}x{window} detection window"))
            continue
        yield name, rgb


def _grey_note(src, rgb):
    """`` (grey)`` after the status line of a photo without colour (scanned as three equal
    channels; the detectors were trained on colour photos)."""
    return " (grey)" if src.kind == "images" and _is_grey(rgb) else ""


def _keypoints_run(det, fm, src, frames, tmp, times, rows, *, threshold, max_scale, n_jobs,
                   top, fmt):
    """Per-keypoint detections of one source, drawn with :func:`draw_keypoints`."""
    from cvfs.io.images import write_image
    from cvfs.io.video import VideoWriter
    from cvfs.viz.keypoints import draw_keypoints

    writer = None
    if tmp is not None and src.kind == "video":
        writer = VideoWriter(tmp / f"{src.name}_keypoints.avi", fps=src.fps)
    with writer if writer is not None else contextlib.nullcontext():
        for name, rgb in frames:
            t0 = time.perf_counter()
            found = det.detect(rgb, threshold=threshold, max_scale=max_scale, n_jobs=n_jobs)
            times.append(time.perf_counter() - t0)
            kept = {k: v[:top] for k, v in found.items()}
            for k, v in kept.items():
                for x, y, s in v:
                    print(f"{name}\t{k}\t{x:.1f}\t{y:.1f}\t{s:.3f}")
            best = ", ".join(f"{k} ({v[0, 0]:.0f}, {v[0, 1]:.0f})"
                             for k, v in found.items() if len(v))
            _err(f"{name}{_grey_note(src, rgb)}: {times[-1] * 1e3:.0f} ms  "
                 f"{best or 'no detections'}")
            if tmp is None:
                continue
            drawn = draw_keypoints(rgb, kept)
            if writer is not None:
                writer.write(drawn)
            else:
                write_image(tmp / f"{name}_keypoints.png", drawn)


def _faces_run(det, fm, src, frames, tmp, times, rows, *, threshold, max_scale, n_jobs, top,
               fmt, top_down, rescan=1):
    """Faces of one source: per image a drawing and a JSON; per video a drawn video, faces
    scanned every ``rescan`` frames and followed between, tracked across frames, and one JSON
    of every frame."""
    from cvfs.io.images import write_image
    from cvfs.io.video import VideoWriter
    from cvfs.keypoints.tracking import FaceTracker
    from cvfs.keypoints.video import VideoFaceDetector
    from cvfs.viz.keypoints import draw_faces

    video = src.kind == "video"
    tracker = FaceTracker() if video else None
    scan_options = dict(threshold=threshold, max_scale=max_scale, n_jobs=n_jobs, top_down=top_down)
    if video:
        find = VideoFaceDetector(det, face_model=fm, rescan=rescan, **scan_options)
    else:
        def find(rgb):
            return det.detect_faces(rgb, face_model=fm, **scan_options)
    writer = None
    if tmp is not None and video:
        writer = VideoWriter(tmp / f"{src.name}_faces.avi", fps=src.fps)
    records = []  # every frame's faces of a video
    with writer if writer is not None else contextlib.nullcontext():
        for fi, (name, rgb) in enumerate(frames):
            t0 = time.perf_counter()
            faces = find(rgb)
            times.append(time.perf_counter() - t0)
            if video:
                tracked = tracker.update(faces)
                faces = [t.face for t in tracked]
                ids = [t.track_id for t in tracked]
            else:
                ids = list(range(1, len(faces) + 1))
            for i, f in zip(ids, faces, strict=True):
                for k, (x, y, s) in f.keypoints.items():
                    print(f"{name}\t{i}\t{f.score:.3f}\t{k}\t{x:.1f}\t{y:.1f}\t{s:.3f}")
            _err(f"{name}{_grey_note(src, rgb)}: {times[-1] * 1e3:.0f} ms  "
                 f"{len(faces)} face(s)"
                 + "".join(f", #{i} {f.score:.2f}" for i, f in zip(ids, faces, strict=True)))
            record = {"frame": name, "index": fi, "height": int(rgb.shape[0]),
                      "width": int(rgb.shape[1]),
                      "faces": [dict(f.as_dict(), id=i) for i, f in zip(ids, faces,
                                                                         strict=True)]}
            rows.extend(_csv_rows(src.name, record))
            if tmp is None:
                continue
            drawn = draw_faces(rgb, faces, ids=ids)
            if writer is not None:
                writer.write(drawn)
                records.append(record)
            else:
                write_image(tmp / f"{name}_faces.png", drawn)
                if fmt == "json":
                    atomic_write_text(tmp / f"{name}_faces.json",
                                      json.dumps(dict(record, source=src.name), indent=1))
    if writer is not None and fmt == "json":
        atomic_write_text(tmp / f"{src.name}_faces.json", json.dumps(
            {"source": src.name, "kind": src.kind, "frames": records}, indent=1))


_CSV_COLUMNS = ("source", "frame", "face", "face_score", "x0", "y0", "x1", "y1", "keypoint", "x",
                "y", "score")


def _csv_rows(source, record):
    """One row per face keypoint of a frame record (``_CSV_COLUMNS``)."""
    out = []
    for f in record["faces"]:
        for k, p in f["keypoints"].items():
            out.append((source, record["frame"], f["id"], f["score"], *f["box"], k, p["x"],
                        p["y"], p["score"]))
    return out


def _write_csv(path, rows):
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(_CSV_COLUMNS)
    for r in rows:
        w.writerow(["" if v is None else v for v in r])
    atomic_write_text(path, buf.getvalue())


def motion_segment(source, *, n_motions=None, out=None, max_frames=None, tracker=None,
                   model=None, strict=False, tol=1.0, camera="affine",
                   command="cvfs motion segment"):
    """Track points through a video, segment the trajectories by motion, draw and summarise.

    Parameters
    ----------
    source : str
        Video file, folder of frames, camera index or synthetic clip
        (:func:`cvfs.io.video.open_source`).
    n_motions : int or None
        K; None chooses K in 2..8 as :func:`cvfs.motion.segment` does for ``camera``.
    out : str or Path, optional
        Output folder: ``<name>_motion.avi`` (tracks coloured by motion), ``<name>_motion.png``
        (all trajectories on the first frame), ``<name>_motion.json`` (the summary) and
        ``<name>_motion_labels.csv`` (track, label, frame, x, y, visible per track and frame;
        x and y empty where the track is not visible).
    max_frames : int, optional
    tracker : TrackerSettings, optional
        Corner detection and tracking settings (:class:`cvfs.motion.tracking.TrackerSettings`;
        ``partial=True`` keeps lost tracks and re-detects new ones).
    model : str or Path, optional
        Ranker file; None loads the shipped ranker.
    strict : bool, default False
        A truncated video file is an error instead of a warning.
    tol : float, default 1.0
        When one image motion explains every trajectory within ``tol`` pixels
        (:func:`cvfs.motion.explained_by_one_motion`: a frozen video, or a camera moving over a
        static scene) the result is "no independent motion": K = 1, every label 0.
    camera : {"affine", "perspective", "auto"}, default "affine"
        As :func:`cvfs.motion.segment`: "perspective" (driving footage) segments by two-view
        geometry (K given, or chosen by the cuts of each K's best labelling); "auto" ranks the
        affine and the two-view candidates together (either kind of footage).
    command : str
        Recorded in the output set's marker file.

    Returns
    -------
    summary : dict
        source, frames, tracks, visible_fraction, n_motions, independent_motion (bool),
        k_chosen (bool), k_residuals (best subspace residual r_K per K tried, K chosen),
        k_ratio (r_(K+1) / r_K at the chosen K, or None), points_per_motion, tracker (the
        settings), track_seconds, segment_seconds; video, figure, json, labels (paths) when
        ``out`` is given.

    Raises
    ------
    FileNotFoundError
        If the source does not exist.
    ValueError
        If the source cannot be read as video (no decodable frame), has fewer than 2 frames,
        or too few tracks for K.
    """
    from cvfs.io.video import VideoWriter, open_source
    from cvfs.motion.video import _check_camera, segment_video
    from cvfs.viz import save_figure
    from cvfs.viz.motion import draw_tracks, plot_trajectories

    _check_camera(camera, n_motions)
    src = open_source(source, max_frames, strict=strict)
    if out is not None:
        check_output_dir(out, [source])
    # frames stream through the tracker; the drawing pass reads the source again, or (a camera)
    # the JPEG-compressed copies kept for it here
    kept = {"first": None, "n": 0, "jpeg": []}
    keep_jpeg = out is not None and not src.replayable

    def _frames():
        for _, frame in src:
            if kept["first"] is None:
                kept["first"] = frame
            if keep_jpeg:
                kept["jpeg"].append(_jpeg(frame))
            kept["n"] += 1
            yield frame

    res = segment_video(_frames(), n_motions, tracker=tracker, model=model, tol=tol,
                        camera=camera)
    points, labels, k, moving = res.points, res.labels, res.n_motions, res.independent_motion
    k_scores, chosen = res.k_residuals, res.k_chosen
    nxt = k_scores.get(k + 1) if chosen else None
    ratio = nxt / max(k_scores[k], 1e-300) if nxt is not None else None
    summary = {"source": str(source), "frames": kept["n"], "tracks": int(points.shape[0]),
               "visible_fraction": float(res.visible.mean()),
               "n_motions": int(k), "independent_motion": bool(moving),
               "k_chosen": chosen,
               "k_residuals": {str(kk): v for kk, v in k_scores.items()},
               "k_ratio": ratio,
               "points_per_motion": np.bincount(labels, minlength=k).tolist(),
               "tracker": res.tracker.as_dict(),
               "track_seconds": res.track_seconds, "segment_seconds": res.segment_seconds}
    if out is not None:
        stem = f"{src.name}_motion"
        final = Path(out)
        summary.update(video=str(final / f"{stem}.avi"), figure=str(final / f"{stem}.png"),
                       json=str(final / f"{stem}.json"),
                       labels=str(final / f"{stem}_labels.csv"))
        with atomic_dir(out, command=command, inputs=[source]) as tmp:
            atomic_write_text(tmp / f"{stem}_labels.csv",
                              _labels_csv(points, labels, res.visible))
            replay = ((f for _, f in src) if src.replayable
                      else (_unjpeg(b) for b in kept["jpeg"]))
            with VideoWriter(tmp / f"{stem}.avi", fps=src.fps) as writer:
                for i, frame in zip(range(points.shape[1]), replay):
                    writer.write(draw_tracks(frame, points, labels, i))
            what = (f"K={k}" if moving else "no independent motion")
            ax = plot_trajectories(points, labels, image=kept["first"],
                                   title=f"{src.name}: {points.shape[0]} tracks, {what}")
            save_figure(ax.figure, tmp / f"{stem}.png")
            atomic_write_text(tmp / f"{stem}.json", json.dumps(summary, indent=1))
    if moving:
        note = (f" (chosen; residual ratio r_(K+1)/r_K {ratio:.3g})" if ratio is not None
                else " (chosen)" if chosen else "")
        print(f"{summary['source']}: {summary['frames']} frames, {summary['tracks']} tracks, "
              f"K={k}{note}, points per motion {summary['points_per_motion']}")
    else:
        print(f"{summary['source']}: {summary['frames']} frames, {summary['tracks']} tracks: "
              f"no independent motion (one image motion explains every track within {tol:g} px)"
              "; K=1")
    _err(f"track {summary['track_seconds']:.2f} s, segment {summary['segment_seconds']:.2f} s")
    if out is not None:
        _report_written(out)
    return summary


def _is_grey(rgb):
    """Whether an RGB image carries no colour (a grey file read as RGB: equal channels)."""
    return bool(np.array_equal(rgb[..., 0], rgb[..., 1])
                and np.array_equal(rgb[..., 1], rgb[..., 2]))


def _jpeg(rgb):
    """An RGB frame as JPEG bytes (quality 90): about 20x smaller than the raw frame."""
    import cv2

    ok, buf = cv2.imencode(".jpg", np.ascontiguousarray(rgb[..., ::-1]),
                           [cv2.IMWRITE_JPEG_QUALITY, 90])
    return buf.tobytes()


def _unjpeg(data):
    import cv2

    return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)[..., ::-1]


def _labels_csv(points, labels, visible):
    """Long table of the tracks: one row per track and frame (track, label, frame, x, y,
    visible; x and y empty where not visible), a header line first."""
    p, f = points.shape[:2]
    track, frame = np.repeat(np.arange(p), f), np.tile(np.arange(f), p)
    xy = points.reshape(-1, 2)
    lines = ["track,label,frame,x,y,visible"]
    lines += [f"{t},{labels[t]},{fr},{x:.3f},{y:.3f},1" if v else f"{t},{labels[t]},{fr},,,0"
              for t, fr, (x, y), v in zip(track, frame, xy, visible.ravel(), strict=True)]
    return "\n".join(lines) + "\n"


def _astro_input(path, hdu=None, channel=None):
    """Path, image, colour-bar unit, FITS header (None for other formats) and celestial WCS (or
    None) of an input image."""
    from cvfs.astro.readers import _is_fits, read_fits_header, read_image

    path = Path(path)
    image = read_image(path, hdu=hdu, channel=channel)
    if not _is_fits(path):
        return path, image, "intensity (0-1)", None, None
    header = read_fits_header(path, hdu)
    unit = str(header.get("BUNIT", "")).strip() or "data value (FITS)"
    wcs = None
    try:
        import warnings

        from astropy.wcs import WCS

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # non-standard keywords of old headers
            w = WCS(header, naxis=2)
        if w.has_celestial:
            wcs = w.celestial
    except Exception:  # noqa: BLE001 - a header without a usable WCS gives pixel coordinates
        wcs = None
    return path, image, unit, header, wcs


def _saturation(saturation, header):
    """The saturation level: ``saturation``, else the FITS header's SATURATE (None if absent)."""
    if saturation is not None or header is None or "SATURATE" not in header:
        return saturation
    try:
        level = float(header["SATURATE"])
    except (TypeError, ValueError):
        return None  # a header value that is not a number: no level
    return level if np.isfinite(level) else None


def _astro_mask(mask_path, shape):
    """Boolean mask (True = ignore) from a FITS or image file: nonzero pixels are masked."""
    if mask_path is None:
        return None
    from cvfs.astro.readers import read_image

    m = read_image(Path(mask_path))
    if m.shape != shape:
        raise ValueError(f"mask {mask_path} has shape {m.shape}; the image has shape {shape}")
    return m != 0  # NaN != 0: NaN pixels of the mask are masked too


def astro_localise(image_path, out, *, settings=None, noise_sigma=None, hdu=None, channel=None,
                   mask=None, saturation=None, verbose=True, command="cvfs astro localise",
                   **options):
    """Catalogue, denoised image and figure of one image, written as one set into ``out``.

    Writes ``catalogue.ecsv`` and ``catalogue.fits`` (every catalogue field with its unit, the
    pixel convention in the metadata; when astropy is installed), ``catalogue.csv`` (the same
    columns, plain CSV: one header line),
    ``denoised.npy``, ``denoised.fits`` (FITS input: the input header, WCS included) and
    ``figure.png`` (pixel axes, colour bars; point sources and extended objects marked apart).
    ``settings`` (:class:`cvfs.astro.LocalisationSettings`, its defaults when None), ``options``
    (fields of the settings overriding them) and ``noise_sigma`` as in
    :func:`cvfs.astro.localise_and_denoise`; ``hdu`` picks the FITS extension, ``channel`` the
    plane of a colour picture (:func:`cvfs.astro.readers.read_image`), ``mask`` is a FITS or
    image file whose nonzero pixels are ignored, ``saturation`` the level at and above which
    pixels are masked (default: the FITS header's ``SATURATE``). The catalogue has ``ra`` and
    ``dec`` when the FITS header holds a celestial WCS. Returns the
    :class:`cvfs.astro.Localisation`.
    """
    from cvfs.astro.readers import header_warnings_once

    with header_warnings_once():
        return _astro_localise(image_path, out, settings, noise_sigma, hdu, channel, mask,
                               saturation, verbose, command, options)


def _astro_localise(image_path, out, settings, noise_sigma, hdu, channel, mask, saturation,
                    verbose, command, options):
    """:func:`astro_localise` inside :func:`cvfs.astro.readers.header_warnings_once`."""
    from cvfs import astro
    from cvfs.astro.readers import write_catalogue, write_fits
    from cvfs.viz import save_figure
    from cvfs.viz.astro import source_figure

    path, image, unit, header, wcs = _astro_input(image_path, hdu, channel)
    bad = _astro_mask(mask, image.shape)
    inputs = [image_path] + ([mask] if mask is not None else [])
    check_output_dir(out, inputs)
    res = astro.localise_and_denoise(image, settings, noise_sigma=noise_sigma, mask=bad, wcs=wcs,
                                     saturation=_saturation(saturation, header),
                                     verbose=verbose, **options)
    flux_unit = str(header.get("BUNIT", "")).strip() if header is not None else ""
    flux_unit = flux_unit or ("data value" if header is not None else "intensity (0-1)")
    try:
        import astropy  # noqa: F401
        has_astropy = True
    except ImportError:  # pragma: no cover - depends on the environment
        has_astropy = False
    # counts are of sources (rows without children) unless the catalogue holds objects only
    cat = res.catalogue
    leaf = cat["n_children"] == 0
    n_ext, n_par = int(np.sum(cat["extended"][leaf])), int(np.sum(~leaf))
    if n_par and not np.any(cat["parent"] > 0):  # levels="objects"
        found = f"{len(cat)} objects ({n_par} blends of point sources)"
    else:
        found = f"{int(leaf.sum())} sources" + (f" ({n_par} parent rows of blends)" if n_par
                                               else "")
    with atomic_dir(out, command=command, inputs=inputs) as tmp:
        write_catalogue(tmp / "catalogue.csv", res.catalogue)
        if has_astropy:
            write_catalogue(tmp / "catalogue.ecsv", res.catalogue, flux_unit=flux_unit)
            write_catalogue(tmp / "catalogue.fits", res.catalogue, flux_unit=flux_unit)
        np.save(tmp / "denoised.npy", res.model)
        if header is not None:
            write_fits(tmp / "denoised.fits", res.model, header=header)
        n_pts = int(leaf.sum()) - n_ext + (n_par if "objects" in found else 0)
        fig = source_figure(image, res.catalogue, res.model, unit=unit,
                            title=f"{path.name}: {n_pts} point sources, "
                            f"{n_ext} extended objects (screened SBL)")
        save_figure(fig, tmp / "figure.png", dpi=110)
    print(f"{found} in {path.name} ({image.shape[0]}x{image.shape[1]}; {n_ext} extended); "
          f"noise sigma {res.noise_sigma:.4g}, lambda {res.lam:.4g}")
    _report_written(out)
    return res


def astro_denoise(image_path, out, *, settings=None, noise_sigma=None, hdu=None, channel=None,
                  saturation=None, verbose=True, command="cvfs astro denoise", **options):
    """Denoised image and figure of one image (:func:`cvfs.astro.denoise`) into ``out``.

    Writes ``denoised.npy``, ``denoised.fits`` (FITS input) and ``figure.png`` (image,
    denoised image, residual). Parameters as :func:`astro_localise`. Returns the denoised image.
    """
    from cvfs.astro.readers import header_warnings_once

    with header_warnings_once():
        return _astro_denoise(image_path, out, settings, noise_sigma, hdu, channel, saturation,
                              verbose, command, options)


def _astro_denoise(image_path, out, settings, noise_sigma, hdu, channel, saturation, verbose,
                   command, options):
    """:func:`astro_denoise` inside :func:`cvfs.astro.readers.header_warnings_once`."""
    from cvfs import astro
    from cvfs.astro.readers import write_fits
    from cvfs.viz import save_figure
    from cvfs.viz.astro import denoise_figure

    path, image, unit, header, _ = _astro_input(image_path, hdu, channel)
    check_output_dir(out, [image_path])
    clean = astro.denoise(image, settings, noise_sigma=noise_sigma, verbose=verbose,
                          saturation=_saturation(saturation, header), **options)
    with atomic_dir(out, command=command, inputs=[image_path]) as tmp:
        np.save(tmp / "denoised.npy", clean)
        if header is not None:
            write_fits(tmp / "denoised.fits", clean, header=header)
        fig = denoise_figure(image, clean, unit=unit,
                             title=f"{path.name}: screened SBL denoising")
        save_figure(fig, tmp / "figure.png", dpi=110)
    print(f"denoised {path.name} ({image.shape[0]}x{image.shape[1]}); residual std "
          f"{float(np.std(image - clean)):.4g}")
    _report_written(out)
    return clean
