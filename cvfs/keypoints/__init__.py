"""Bottom-up face keypoint detectors trained with FSA (paper section 3.3).

Public API::

    from cvfs import keypoints
    det = keypoints.load_detector()          # shipped models in cvfs.datasets.models_dir()
    det.keypoints                            # ['left_eye_center', ...]
    det.detect(rgb)                          # {name: ndarray (n, 3) of x, y, score}

Training: :func:`cvfs.keypoints.train.train_detector`; evaluation with the paper's criteria:
:mod:`cvfs.keypoints.evaluate`; the LogitBoost baseline: :mod:`cvfs.keypoints.boosting`.
"""

from cvfs.keypoints.detector import KeypointDetector, load_detector

__all__ = ["KeypointDetector", "load_detector"]
