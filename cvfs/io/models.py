"""Model files: HDF5 with metadata, written atomically, never pickled, verified when read.

Layout of a model file::

    bytes 0-511            user block (ignored by HDF5): ``CVFS-MODEL`` header with the
                           SHA-256 of every byte after it (the file checksum)
    /                      attrs: format_version, cvfs_version, kind, params (JSON),
                                  training (JSON), git_commit, random_state (JSON), created,
                                  checksum (the content checksum)
    /arrays/<name>         named datasets (a name may contain '/' to nest)
    /settings              attrs: JSON-serialisable application settings (window size,
                                  feature spec, keypoint names, ...)

Only :func:`save_model` writes these files. :func:`load_model` reads a file only after its
file checksum matches (so a flipped bit or a truncated file is refused before the HDF5 library
parses it), then accepts only the layout above: hard-linked groups and contiguous or chunked
numeric datasets inside the file (no external storage, virtual datasets, soft or external
links), finite float arrays, JSON attributes, and the content checksum: the SHA-256 of every
array's name, dtype, shape and bytes in name order and of every attribute and setting. Each
loader of a model (:func:`cvfs.io.load_estimator`, :func:`cvfs.keypoints.load_detector`,
:func:`cvfs.motion.ranking.load_ranker`) then checks the array names, index ranges and
settings against what it will compute with.

Files of format version 1 (no checksums) are refused; :func:`upgrade_model` re-saves one
that you trust in the current format.
"""

import datetime
import hashlib
import io
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np

from cvfs.io._atomic import atomic_path, check_output_file

__all__ = ["FORMAT_VERSION", "SavedModel", "file_sha256", "is_model_file", "load_model",
           "save_model", "upgrade_model"]

FORMAT_VERSION = 2

_USERBLOCK = 512
_MAGIC = b"CVFS-MODEL\nsha256:"
_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
#: largest model file read (bytes); the shipped files are below 1 MB
MAX_FILE_BYTES = 1 << 30
_ROOT_ATTRS = ("format_version", "cvfs_version", "kind", "params", "training", "git_commit",
               "random_state", "created")
_JSON_ATTRS = ("params", "training", "random_state")
_ARRAY_KINDS = "biuf"


@dataclass
class SavedModel:
    """The content of a model file.

    Attributes
    ----------
    kind : str
        What the file holds, e.g. ``"FSAClassifier"`` or ``"keypoint-detector"``.
    arrays : dict of str -> ndarray
        Named arrays.
    params : dict
        Parameters of the estimator or pipeline (JSON).
    settings : dict
        Application settings (JSON).
    training : dict
        Description of the training data (name, size, hash, command).
    meta : dict
        format_version, cvfs_version, git_commit, random_state, created, checksum.
    path : str
        The file it was read from ("" for a model built in memory); loaders name it in errors.
    """

    kind: str
    arrays: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    training: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    path: str = ""


def _git_commit():
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def _json_default(obj):
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON-serialisable")


def _dumps(obj):
    return json.dumps(obj, default=_json_default, sort_keys=True)



def _loads(text, what, path):
    try:
        return json.loads(text)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: {what} is not valid JSON ({exc})") from exc


def _canonical_array(name, value):
    """``value`` as the C-contiguous, native-byte-order numeric array a model file stores."""
    arr = np.asarray(value)
    if arr.dtype == object:
        raise TypeError(f"array {name!r} has dtype object; model files hold numeric arrays")
    if arr.dtype.kind not in _ARRAY_KINDS or arr.dtype.fields is not None:
        raise TypeError(f"array {name!r} has dtype {arr.dtype}; model files hold bool, integer "
                        "or float arrays")
    return np.array(arr, dtype=arr.dtype.newbyteorder("="), order="C")


def _content_checksum(attrs, settings, arrays):
    """SHA-256 (hex) of the root attributes (str or int), the settings (JSON text) and every
    array's name, dtype, shape and bytes, in name order; each item is length-prefixed."""
    h = hashlib.sha256(b"cvfs-model-content\0")

    def put(data):
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)

    for key in sorted(attrs):
        put(json.dumps(["attr", key, attrs[key]]).encode())
    for key in sorted(settings):
        put(json.dumps(["setting", key, settings[key]]).encode())
    for name in sorted(arrays):
        a = np.asarray(arrays[name])
        put(json.dumps(["array", name, a.dtype.str, list(a.shape)]).encode())
        put(a.tobytes(order="C"))
    return h.hexdigest()


def _header(digest):
    """The user block: magic, the file checksum (hex) and zero padding."""
    head = _MAGIC + digest.encode() + b"\n"
    return head + b"\0" * (_USERBLOCK - len(head))


def file_sha256(path, *, start=0):
    """SHA-256 (hex) of the bytes of ``path`` from offset ``start``.

    ``file_sha256(path)`` is the checksum listed for a shipped model; ``start=512`` is the file
    checksum stored in the model's own header.
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        f.seek(start)
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def is_model_file(path):
    """True if ``path`` starts like a model file (the ``CVFS-MODEL`` header, or an HDF5 file
    with a ``format_version`` attribute: format 1). Only such a file is ever replaced by
    :func:`save_model`; the content is not verified (:func:`load_model` does that)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(_MAGIC))
        if head == _MAGIC:
            return True
        if head[:len(_HDF5_SIGNATURE)] != _HDF5_SIGNATURE:
            return False
        with h5py.File(path, "r") as f:
            return "format_version" in f.attrs
    except (OSError, ValueError):
        return False


def _write(path, attrs, settings, arrays):
    """Write a model file: root ``attrs`` (str or int), ``settings`` (name -> JSON text) and
    canonical ``arrays``; the content checksum is added, then the file checksum sealed into
    the user block."""
    attrs = dict(attrs, format_version=FORMAT_VERSION)
    checksum = _content_checksum(attrs, settings, arrays)
    check_output_file(path, replace=is_model_file, what="model file")
    with atomic_path(path, suffix=".h5") as tmp:
        with h5py.File(tmp, "w", userblock_size=_USERBLOCK) as f:
            for key, value in attrs.items():
                f.attrs[key] = value
            f.attrs["checksum"] = checksum
            grp = f.create_group("arrays")
            for name, value in arrays.items():
                grp.create_dataset(name, data=value)
            sgrp = f.create_group("settings")
            for key, value in settings.items():
                sgrp.attrs[key] = value
        digest = file_sha256(tmp, start=_USERBLOCK)
        with open(tmp, "r+b") as f:
            f.write(_header(digest))
    return Path(path)


def save_model(path, kind, arrays, *, params=None, settings=None, training=None,
               random_state=None):
    """Write a model file atomically, with its file and content checksums.

    Parameters
    ----------
    path : str or Path
        Destination (``.h5``). An existing file is replaced only when the new one is complete.
    kind : str
        What the file holds; :func:`load_model` can require it.
    arrays : dict of str -> array_like
        Named bool, integer or float arrays; names may contain ``'/'`` to nest groups.
    params, settings, training : dict, optional
        JSON-serialisable dictionaries (see :class:`SavedModel`).
    random_state : int or None, optional
        The seed the model was trained with, for the record.

    Returns
    -------
    path : Path

    Raises
    ------
    ValueError
        If an array name is empty or absolute.
    TypeError
        If an array is not numeric (object, string or structured dtype), or a dictionary is not
        JSON-serialisable.
    FileExistsError
        If ``path`` exists and is not a model file (:func:`is_model_file`; a file cvfs did not
        write is never overwritten), or its folder cannot be written.
    """
    from cvfs import __version__

    path = Path(path)
    canon = {}
    for name, value in arrays.items():
        if not isinstance(name, str) or not name or name.startswith("/"):
            raise ValueError(f"array names must be non-empty relative strings; got {name!r}")
        canon[name] = _canonical_array(name, value)
    attrs = {
        "cvfs_version": str(__version__),
        "kind": str(kind),
        "params": _dumps(params or {}),
        "training": _dumps(training or {}),
        "git_commit": _git_commit(),
        "random_state": _dumps(random_state),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(),
    }
    settings = {str(key): _dumps(value) for key, value in (settings or {}).items()}
    return _write(path, attrs, settings, canon)


# ---- reading ----

def _read_bytes(path):
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"model file not found: {path}")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise ValueError(f"{path} has {size} bytes; model files are at most {MAX_FILE_BYTES}")
    return path.read_bytes()


def _check_header(path, data):
    """Verify the user block and the file checksum of ``data`` (the whole file)."""
    if not data.startswith(_MAGIC):
        if data.startswith(_HDF5_SIGNATURE):
            raise ValueError(
                f"{path} has no cvfs checksum header: it is not a cvfs model file, or one of "
                f"format version 1 written by an older cvfs. Re-save a version-1 file that you "
                f"trust with `python -c \"from cvfs.io import upgrade_model; "
                f"upgrade_model('{path}')\"`"
            )
        raise ValueError(f"{path} is not a readable HDF5 model file (no cvfs model header)")
    if len(data) < _USERBLOCK + len(_HDF5_SIGNATURE):
        raise ValueError(f"{path} is truncated ({len(data)} bytes): file checksum check failed")
    digest = hashlib.sha256(memoryview(data)[_USERBLOCK:]).hexdigest()
    if data[:_USERBLOCK] != _header(digest):
        raise ValueError(f"{path}: file checksum check failed (the SHA-256 of its content does "
                         "not match its header): the file is corrupted, truncated or was "
                         "modified after it was written")


def _walk(path, group, prefix, arrays, budget):
    """Collect the datasets below ``group`` into ``arrays`` (name -> h5py.Dataset), refusing
    anything but hard-linked groups and plain numeric datasets stored in the file."""
    for name in group:
        full = f"{prefix}{name}"
        link = group.get(name, getlink=True)
        if not isinstance(link, h5py.HardLink):
            raise ValueError(f"{path}: {group.name}/{name} is a {type(link).__name__}; model "
                             "files hold no links to other objects or files")
        obj = group[name]
        if isinstance(obj, h5py.Group):
            if obj.attrs.keys():
                raise ValueError(f"{path}: group {obj.name} has attributes; only the root and "
                                 "/settings have attributes")
            _walk(path, obj, full + "/", arrays, budget)
            continue
        if not isinstance(obj, h5py.Dataset):
            raise ValueError(f"{path}: {obj.name} is not a dataset or group")
        if obj.external is not None or obj.is_virtual:
            raise ValueError(f"{path}: dataset {obj.name} keeps its data outside the file "
                             "(external or virtual storage); model files hold their data")
        dt = obj.dtype
        if dt.kind not in _ARRAY_KINDS or dt.fields is not None or dt.subdtype is not None:
            raise ValueError(f"{path}: dataset {obj.name} has dtype {dt}; expected bool, "
                             "integer or float")
        if obj.attrs.keys():
            raise ValueError(f"{path}: dataset {obj.name} has attributes; model arrays have none")
        budget[0] -= int(np.prod(obj.shape, dtype=np.float64)) * dt.itemsize
        if budget[0] < 0:
            raise ValueError(f"{path}: the arrays hold more than {MAX_FILE_BYTES} bytes")
        arrays[full] = obj


def _root_attrs(path, f, version):
    """The root attributes as str (int for format_version), every one required present."""
    want = _ROOT_ATTRS + (("checksum",) if version >= 2 else ())
    missing = [k for k in want if k not in f.attrs]
    if missing:
        raise ValueError(f"{path}: the model file lacks the root attribute(s) {missing}")
    extra = sorted(set(f.attrs) - set(want))
    if extra:
        raise ValueError(f"{path}: unexpected root attribute(s) {extra}")
    out = {}
    for key in want:
        value = f.attrs[key]
        if key == "format_version":
            if not isinstance(value, (int, np.integer)):
                raise ValueError(f"{path}: format_version is not an integer ({value!r})")
            out[key] = int(value)
        elif isinstance(value, str):
            out[key] = value
        else:
            raise ValueError(f"{path}: root attribute {key!r} is not a string "
                             f"({type(value).__name__})")
    return out


def _read_file(path, data, *, legacy=False):
    """Parse a model file (bytes whose header was checked, or a version-1 file with
    ``legacy``) into (root attrs, settings JSON texts, arrays)."""
    try:
        f = h5py.File(io.BytesIO(data), "r")
    except (OSError, ValueError, RuntimeError) as exc:
        raise ValueError(f"{path} is not a readable HDF5 model file ({exc})") from exc
    with f:
        if "format_version" not in f.attrs or "arrays" not in f:
            raise ValueError(f"{path} is not a cvfs model file (no format_version / arrays)")
        version = f.attrs["format_version"]
        if not isinstance(version, (int, np.integer)):
            raise ValueError(f"{path}: format_version is not an integer ({version!r})")
        want = 1 if legacy else FORMAT_VERSION
        if int(version) != want:
            hint = ("re-save a version-1 file that you trust with "
                    "cvfs.io.upgrade_model(path)" if int(version) == 1 else
                    "use the cvfs that wrote it, or retrain the model")
            raise ValueError(f"{path} has model format version {int(version)}; expected "
                             f"{want}: {hint}")
        attrs = _root_attrs(path, f, int(version))
        members = sorted(f)
        for name in ("arrays", "settings"):
            if name not in f:
                raise ValueError(f"{path}: the model file lacks the group /{name}")
        if members != ["arrays", "settings"]:
            extra = sorted(set(members) - {"arrays", "settings"})
            raise ValueError(f"{path}: unexpected members {extra} at the root; model files "
                             "hold /arrays and /settings")
        for name in ("arrays", "settings"):
            link = f.get(name, getlink=True)
            if not isinstance(link, h5py.HardLink) or not isinstance(f[name], h5py.Group):
                raise ValueError(f"{path}: /{name} is not a group stored in the file")
        if len(f["settings"]):
            raise ValueError(f"{path}: /settings holds members; settings are attributes")
        settings = {}
        for key, value in f["settings"].attrs.items():
            if not isinstance(value, str):
                raise ValueError(f"{path}: setting {key!r} is not JSON text")
            settings[key] = value
        if f["arrays"].attrs.keys():
            raise ValueError(f"{path}: /arrays has attributes; model arrays have none")
        dsets = {}
        _walk(path, f["arrays"], "", dsets, [MAX_FILE_BYTES])
        arrays = {}
        for name, dset in dsets.items():
            a = np.asarray(dset[()])
            arrays[name] = np.array(a, dtype=a.dtype.newbyteorder("="), order="C")
    return attrs, settings, arrays


def _wrap(path, func, *args, **kwargs):
    """Run a reader, turning the errors of a malformed file into ValueError naming it."""
    try:
        return func(path, *args, **kwargs)
    except (ValueError, FileNotFoundError):
        raise
    except (OSError, KeyError, RuntimeError, TypeError, AttributeError, IndexError,
            UnicodeError, OverflowError, MemoryError) as exc:
        raise ValueError(f"{path}: malformed model file ({type(exc).__name__}: {exc})") from exc


def _check_arrays(path, arrays, names, allow_nonfinite):
    for name, a in arrays.items():
        if names is not None and not (names(name) if callable(names) else name in names):
            raise ValueError(f"{path}: unexpected array {name!r}; this kind of model holds no "
                             "array of that name")
        if a.dtype.kind == "f" and not (allow_nonfinite and allow_nonfinite(name)) \
                and not np.isfinite(a).all():
            raise ValueError(f"{path}: array {name!r} holds NaN or infinite values")


def load_model(path, *, kind=None, shapes=None, names=None, allow_nonfinite=None):
    """Read and verify a model file written by :func:`save_model`.

    Parameters
    ----------
    path : str or Path
    kind : str, optional
        If given, the file's kind must equal it.
    shapes : dict of str -> tuple, optional
        Expected array shapes; ``None`` in a tuple matches any length.
    names : container of str or callable, optional
        The array names the model may hold (a callable returns True for an allowed name);
        any other name is refused.
    allow_nonfinite : callable, optional
        Returns True for the names of float arrays that may hold NaN or inf (default: none).

    Returns
    -------
    model : SavedModel

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If the file is not a cvfs model file, fails its file or content checksum, has another
        format version (version 1: re-save it with :func:`upgrade_model`) or kind, holds links,
        external or virtual datasets or non-numeric arrays, an array has the wrong shape, an
        unexpected name or non-finite values, or an attribute is not valid JSON. The message
        names the file and the failed check.
    """
    data = _read_bytes(path)
    _check_header(path, data)
    attrs, settings, arrays = _wrap(path, _read_file, data)
    stored = attrs.pop("checksum")
    if _content_checksum(attrs, settings, arrays) != stored:
        raise ValueError(f"{path}: content checksum check failed (arrays, attributes or "
                         "settings differ from what was written)")
    file_kind = attrs["kind"]
    if kind is not None and file_kind != kind:
        raise ValueError(f"{path} holds a {file_kind!r} model, expected {kind!r}")
    _check_arrays(path, arrays, names, allow_nonfinite)
    meta = {
        "format_version": attrs["format_version"],
        "cvfs_version": attrs["cvfs_version"],
        "git_commit": attrs["git_commit"],
        "random_state": _loads(attrs["random_state"], "random_state", path),
        "created": attrs["created"],
        "checksum": stored,
    }
    params = _loads(attrs["params"], "params", path)
    training = _loads(attrs["training"], "training", path)
    for what, value in (("params", params), ("training", training)):
        if not isinstance(value, dict):
            raise ValueError(f"{path}: {what} is not a JSON object")
    model = SavedModel(
        kind=file_kind,
        arrays=arrays,
        params=params,
        settings={k: _loads(v, f"setting {k!r}", path) for k, v in settings.items()},
        training=training,
        meta=meta,
        path=str(path),
    )
    for name, shape in (shapes or {}).items():
        if name not in model.arrays:
            raise ValueError(f"{path}: array {name!r} is missing")
        got = model.arrays[name].shape
        if len(got) != len(shape) or any(s is not None and s != g for s, g in zip(shape, got)):
            raise ValueError(f"{path}: array {name!r} has shape {got}, expected {shape}")
    return model


def upgrade_model(path, out=None, *, sha256=None):
    """Re-save a model file of format version 1 (no checksums) in the current format.

    The arrays, attributes and settings are copied unchanged (the record of the cvfs version,
    git commit and creation time included); only the format version and the checksums are new.
    The checksums certify the file from then on, not its past: upgrade only files you trust,
    e.g. whose SHA-256 matches a published one (pass it as ``sha256``).

    Parameters
    ----------
    path : str or Path
        A version-1 model file.
    out : str or Path, optional
        Destination (default: ``path``, replaced atomically).
    sha256 : str, optional
        Expected SHA-256 (hex) of the whole version-1 file; checked before anything is read.

    Returns
    -------
    out : Path

    Raises
    ------
    ValueError
        If ``sha256`` does not match, the file is not a version-1 cvfs model file, or it holds
        links, external or virtual datasets or non-numeric arrays.
    """
    data = _read_bytes(path)
    if sha256 is not None:
        got = hashlib.sha256(data).hexdigest()
        if got != str(sha256).lower():
            raise ValueError(f"{path}: SHA-256 {got} does not match sha256={sha256!r}")
    if data.startswith(_MAGIC):
        raise ValueError(f"{path} already has format version {FORMAT_VERSION} (checksummed)")
    attrs, settings, arrays = _wrap(path, _read_file, data, legacy=True)
    for key in _JSON_ATTRS:
        _loads(attrs[key], key, path)
    for key, value in settings.items():
        _loads(value, f"setting {key!r}", path)
    attrs.pop("format_version")
    out = Path(path if out is None else out)
    _write(out, attrs, settings, arrays)
    load_model(out)
    return out
