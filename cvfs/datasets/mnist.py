"""Loader of the MNIST handwritten digits (LeCun, Bottou, Bengio & Haffner 1998).

The data home holds ``mnist/mnist.npz`` with ``x_train`` (uint8, 60000 x 28 x 28), ``y_train``,
``x_test`` (uint8, 10000 x 28 x 28) and ``y_test``, in the original order.

References
----------
Y. LeCun, L. Bottou, Y. Bengio and P. Haffner, "Gradient-based learning applied to document
recognition", Proc. IEEE 86(11), 1998.
"""

import numpy as np

from cvfs.datasets.registry import require_path

__all__ = ["load_mnist"]


def load_mnist(subset="train", *, flatten=False):
    """MNIST images as float32 in [0, 1] and their digit labels.

    Parameters
    ----------
    subset : {"train", "test"}, default="train"
        The 60,000 training or the 10,000 test images.
    flatten : bool, default=False
        Return images as rows of 784 pixels instead of 28 x 28 arrays.

    Returns
    -------
    X : ndarray of shape (n_images, 28, 28) or (n_images, 784), float32
    y : ndarray of shape (n_images,), int64
        Digits 0-9.

    Raises
    ------
    ValueError
        If ``subset`` is not "train" or "test".
    FileNotFoundError
        If ``mnist/mnist.npz`` is not in the data home.
    """
    if subset not in ("train", "test"):
        raise ValueError(f"subset must be 'train' or 'test'; got {subset!r}")
    path = require_path("mnist", "mnist.npz")
    with np.load(path) as data:
        X = data[f"x_{subset}"]
        y = data[f"y_{subset}"].astype(np.int64)
    X = X.astype(np.float32) / np.float32(255.0)
    if flatten:
        X = X.reshape(X.shape[0], -1)
    return X, y
