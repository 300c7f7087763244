"""Loaders of public dataset formats and the data home."""

from cvfs.datasets._home import data_home, models_dir, require_path
from cvfs.datasets.mnist import load_mnist

__all__ = ["data_home", "load_mnist", "models_dir", "require_path"]
