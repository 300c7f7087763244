"""Model files, atomic writes (files and output folders), images (:mod:`cvfs.io.images`) and
video sources (:mod:`cvfs.io.video`)."""

from cvfs.io._atomic import (
    OUTPUT_MARKER,
    Interrupted,
    atomic_dir,
    atomic_path,
    atomic_write_bytes,
    atomic_write_text,
    check_output_dir,
    check_output_file,
    output_files,
    raise_pending,
    signals_raise,
)
from cvfs.io.estimators import load_estimator, save_estimator
from cvfs.io.models import SavedModel, file_sha256, load_model, save_model, upgrade_model

__all__ = [
    "OUTPUT_MARKER",
    "Interrupted",
    "SavedModel",
    "atomic_dir",
    "atomic_path",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_output_dir",
    "check_output_file",
    "output_files",
    "file_sha256",
    "load_estimator",
    "load_model",
    "save_estimator",
    "raise_pending",
    "save_model",
    "signals_raise",
    "upgrade_model",
]
