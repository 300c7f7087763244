"""Bottom-up face keypoint detectors trained with FSA (paper section 3.3).

Public API::

    from cvfs import keypoints
    det = keypoints.load_detector()          # shipped models in cvfs.datasets.models_dir()
    det.keypoints                            # ['left_eye_center', ...]
    det.detect(rgb)                          # {name: ndarray (n, 3) of x, y, score}
    det.detect_faces(rgb)                    # [Face(score, box, keypoints), ...]

Faces (a shape model fitted to the detections, calibrated scores): :mod:`cvfs.keypoints.faces`;
their keypoints refined by a dense rescan at the face's scale: :mod:`cvfs.keypoints.refine`;
tracking faces across video frames: :mod:`cvfs.keypoints.tracking`; a scan every few video frames
and the faces followed between: :mod:`cvfs.keypoints.video`.
Training: :func:`cvfs.keypoints.train.train_detector` with a :class:`TrainingRecipe` (training
faces degraded like small web faces: :mod:`cvfs.keypoints.degrade`); evaluation with the paper's
criteria:
:mod:`cvfs.keypoints.evaluate`; the LogitBoost baseline: :mod:`cvfs.keypoints.boosting`.
"""

from cvfs.keypoints.detector import KeypointDetector, load_detector
from cvfs.keypoints.faces import Face, FaceModel, load_face_model
from cvfs.keypoints.recipe import TrainingRecipe

__all__ = ["Face", "FaceModel", "KeypointDetector", "TrainingRecipe", "load_detector",
           "load_face_model"]
