"""The face keypoint vocabulary: AFLW's 21 points, their mirror images, the inter-eye distance.

Every face dataset loader (:mod:`cvfs.datasets.faces`, :mod:`cvfs.datasets.aflw`) maps its
annotation onto :data:`KEYPOINTS`, and the keypoint detectors (:mod:`cvfs.keypoints`) name what
they find with the same words. "Left" is image left, as in AFLW, MTFL and Caltech.

References
----------
Koestinger, Wohlhart, Roth, Bischof, "Annotated Facial Landmarks in the Wild", ICCV-W 2011.
"""

import numpy as np

__all__ = ["KEYPOINTS", "MIRROR_INDEX", "inter_eye_distance", "keypoint_index"]

#: AFLW's 21 points in AFLW's order (``FeatureCoordTypes.feature_id`` 1..21), snake_case.
KEYPOINTS = (
    "left_brow_left_corner",
    "left_brow_center",
    "left_brow_right_corner",
    "right_brow_left_corner",
    "right_brow_center",
    "right_brow_right_corner",
    "left_eye_left_corner",
    "left_eye_center",
    "left_eye_right_corner",
    "right_eye_left_corner",
    "right_eye_center",
    "right_eye_right_corner",
    "left_ear",
    "nose_left",
    "nose_center",
    "nose_right",
    "right_ear",
    "mouth_left_corner",
    "mouth_center",
    "mouth_right_corner",
    "chin_center",
)

def _mirror_name(name):
    """The vocabulary point a horizontal flip turns ``name`` into (left <-> right, and a
    left/right corner of a left/right feature swaps both words)."""
    swap = {"left": "right", "right": "left"}
    return "_".join(swap.get(w, w) for w in name.split("_"))


#: ``KEYPOINTS[MIRROR_INDEX[i]]`` is what point i becomes in the horizontally flipped image
#: (e.g. ``left_eye_center`` <-> ``right_eye_center``, ``left_brow_left_corner`` <->
#: ``right_brow_right_corner``, ``nose_center`` unchanged).
MIRROR_INDEX = np.array([KEYPOINTS.index(_mirror_name(n)) for n in KEYPOINTS])


def keypoint_index(name):
    """Index of a keypoint name in :data:`KEYPOINTS`.

    Raises
    ------
    ValueError
        If ``name`` is not in the vocabulary.
    """
    try:
        return KEYPOINTS.index(name)
    except ValueError:
        raise ValueError(
            f"keypoint must be one of the 21 AFLW names {list(KEYPOINTS)}; got {name!r}"
        ) from None


def inter_eye_distance(points):
    """Distance between the left and right eye centres.

    Parameters
    ----------
    points : ndarray of shape (..., 21, 2)

    Returns
    -------
    ied : ndarray of shape (...)
    """
    points = np.asarray(points, dtype=np.float64)
    d = points[..., KEYPOINTS.index("left_eye_center"), :] - points[
        ..., KEYPOINTS.index("right_eye_center"), :]
    return np.hypot(d[..., 0], d[..., 1])
