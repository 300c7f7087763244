"""OpenCV 4 Haar face and eye cascades timed on a list of photos: the child process of
``keypoints_faces_speed.py``.

Runs in an interpreter that has OpenCV 4 (``opencv-python-headless<5``; OpenCV 5 has no
CascadeClassifier) and imports nothing from cvfs. Reads a JSON list of image paths from stdin
and writes to stdout, as JSON, per photo the CPU seconds (``time.process_time``, one OpenCV
thread, the photo decoded beforehand) of

- ``whole``: ``haarcascade_frontalface_default.xml`` and ``haarcascade_eye.xml`` each over the
  whole photo (grey conversion included);
- ``face_then_eyes``: the face cascade over the photo, then the eye cascade inside the upper
  half of each face box (OpenCV's face-detection tutorial);

with ``detectMultiScale``'s default parameters, and the number of faces and eyes found.
"""

import json
import sys
import time

import cv2


def main():
    cv2.setNumThreads(1)
    paths = json.loads(sys.stdin.read())
    face = cv2.CascadeClassifier(cv2.data.haarcascades + "haarcascade_frontalface_default.xml")
    eye = cv2.CascadeClassifier(cv2.data.haarcascades + "haarcascade_eye.xml")
    clock = time.process_time
    rows = []
    for p in paths:
        bgr = cv2.imread(p, cv2.IMREAD_COLOR)
        if bgr is None:
            raise SystemExit(f"_opencv_cascades.py: cannot read image {p}")
        t0 = clock()
        grey = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)
        faces = face.detectMultiScale(grey)
        eyes = eye.detectMultiScale(grey)
        t1 = clock()
        grey = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)
        faces2 = face.detectMultiScale(grey)
        n_eyes2 = 0
        for x, y, w, h in faces2:
            n_eyes2 += len(eye.detectMultiScale(grey[y:y + h // 2, x:x + w]))
        t2 = clock()
        rows.append({"path": p, "whole": t1 - t0, "face_then_eyes": t2 - t1,
                     "faces": len(faces), "eyes_whole": len(eyes), "eyes_in_faces": n_eyes2})
    json.dump({"opencv": cv2.__version__, "threads": cv2.getNumThreads(), "photos": rows},
              sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
