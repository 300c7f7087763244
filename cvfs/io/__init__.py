"""Model files, atomic writes, images and video sources."""

from cvfs.io._atomic import atomic_path, atomic_write_bytes, atomic_write_text
from cvfs.io.estimators import load_estimator, save_estimator
from cvfs.io.models import SavedModel, file_sha256, load_model, save_model, upgrade_model

__all__ = [
    "SavedModel",
    "atomic_path",
    "atomic_write_bytes",
    "atomic_write_text",
    "file_sha256",
    "load_estimator",
    "load_model",
    "save_estimator",
    "save_model",
    "upgrade_model",
]
