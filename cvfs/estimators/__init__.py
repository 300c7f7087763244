"""scikit-learn estimators on the shared core.

- :mod:`cvfs.estimators.fsa`: :class:`FSAClassifier`, :class:`FSARegressor`, :class:`FSARanker`;
- :mod:`cvfs.estimators.sbl`: :class:`SBLRegressor`, :class:`SBLClassifier`;
- :mod:`cvfs.estimators.fgm`: :class:`FGMClassifier`;
- :mod:`cvfs.estimators.infinite_push`: :class:`InfinitePushRanker`.

Every selector sets ``support_`` (a boolean mask over the columns of X, as scikit-learn's) and
gives ``get_support`` / ``transform``.
"""

from cvfs.estimators.fgm import FGMClassifier
from cvfs.estimators.fsa import FSAClassifier, FSARanker, FSARegressor, ranking_pairs
from cvfs.estimators.infinite_push import InfinitePushRanker
from cvfs.estimators.sbl import SBLClassifier, SBLRegressor

__all__ = ["FGMClassifier", "FSAClassifier", "FSARanker", "FSARegressor", "InfinitePushRanker",
           "SBLClassifier", "SBLRegressor", "ranking_pairs"]
