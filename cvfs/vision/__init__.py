"""Generic image features for window classifiers: pyramid, dense HOG, Haar, feature pool.

Public API (shapes in the docstrings of each function):

- :func:`gaussian_pyramid` / :func:`iter_pyramid` (one level at a time) / :func:`pyramid_level` /
  :func:`pyramid_scales` and :class:`PyramidLevel` (``.image``, ``.scale``, ``.to_original(xy)``,
  ``.from_original(xy)``);
- :func:`hog_level` (per-level cell maps) and :func:`hog_windows` (24x24 windows, 864 features,
  equal to ``skimage.feature.hog`` per RGB channel); :func:`hog_direct` (the same features from
  the pixels of only the blocks a window needs, for the few windows a soft cascade keeps);
- :func:`haar_features`, :func:`select_haar`, :func:`integral_image`, :func:`haar_windows`;
- :class:`FeaturePool` (one column space ``[HOG 864 | Haar 3 x n]``; :meth:`FeaturePool.column_plan`
  gives a :class:`ColumnPlan` of fixed columns for many levels) with :class:`LevelCache`,
  :func:`window_centres`, :func:`valid_centres`; :func:`level_bands` (:class:`LevelBand`: rows of
  a level with maps equal to the whole level's, to scan large levels in pieces);
- :func:`as_float_rgb`: the image check every public function applies; :func:`to_rgb`: grey,
  alpha and Pillow images (palette, 16-bit, CMYK) as three channels.

Conventions: images are RGB ``(H, W, 3)`` converted to float32 in ``[0, 1]``; inside arrays use
``(row, col)``; public point coordinates ``(x, y)`` are ``x`` = column, ``y`` = row.

References
----------
Barbu et al., "Feature Selection with Annealing for Computer Vision and Big Data Learning",
IEEE TPAMI 2017, section 3.3.
"""

from cvfs.vision._checks import as_float_rgb, to_rgb
from cvfs.vision.haar import (
    HAAR_DTYPE,
    HAAR_TYPES,
    haar_features,
    haar_names,
    haar_windows,
    integral_image,
    select_haar,
)
from cvfs.vision.hog import (
    N_HOG,
    WINDOW,
    HogLevel,
    hog_level,
    hog_names,
)
from cvfs.vision.hog_assembly import HogColumns, hog_windows
from cvfs.vision.hog_direct import hog_direct
from cvfs.vision.pyramid import (
    PyramidLevel,
    gaussian_pyramid,
    iter_pyramid,
    pyramid_level,
    pyramid_scales,
)
from cvfs.vision.windows import (
    HALF,
    ColumnPlan,
    FeaturePool,
    LevelBand,
    LevelCache,
    level_bands,
    valid_centres,
    window_centres,
)

__all__ = [
    "HAAR_DTYPE",
    "HAAR_TYPES",
    "HALF",
    "N_HOG",
    "WINDOW",
    "ColumnPlan",
    "FeaturePool",
    "HogColumns",
    "HogLevel",
    "LevelBand",
    "LevelCache",
    "PyramidLevel",
    "as_float_rgb",
    "gaussian_pyramid",
    "haar_features",
    "haar_names",
    "haar_windows",
    "hog_direct",
    "hog_level",
    "hog_names",
    "hog_windows",
    "integral_image",
    "iter_pyramid",
    "level_bands",
    "pyramid_level",
    "pyramid_scales",
    "to_rgb",
    "select_haar",
    "valid_centres",
    "window_centres",
]
