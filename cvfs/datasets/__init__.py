"""Loaders of public dataset formats and the data home."""

from cvfs.datasets._home import data_home, models_dir, require_path

__all__ = ["data_home", "models_dir", "require_path"]
