"""Loaders of public dataset formats, the registry of datasets and the data home."""

from cvfs.datasets._home import data_home, models_dir
from cvfs.datasets.mnist import load_mnist
from cvfs.datasets.registry import DATASETS, require_path

__all__ = ["DATASETS", "data_home", "load_mnist", "models_dir", "require_path"]
