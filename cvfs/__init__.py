"""cvfs: computer vision on one shared sparse-learning core (FSA and screened SBL).

The estimators are imported lazily so that ``import cvfs`` stays cheap (numba kernels compile on
first use, not on import).
"""

__version__ = "0.1.0"

__all__ = ["FGMClassifier", "FSAClassifier", "FSAClassifierCV", "FSARegressor", "FSARegressorCV",
           "FSARanker", "InfinitePushRanker", "SBLClassifier", "SBLRegressor", "__version__"]

_CV_ESTIMATORS = {"FSAClassifierCV", "FSARegressorCV"}

_ESTIMATORS = {"FGMClassifier", "FSAClassifier", "FSARegressor", "FSARanker", "InfinitePushRanker",
               "SBLClassifier", "SBLRegressor"}


def __getattr__(name):
    if name in _ESTIMATORS:
        from cvfs import estimators

        return getattr(estimators, name)
    if name in _CV_ESTIMATORS:
        from cvfs import model_selection

        return getattr(model_selection, name)
    raise AttributeError(f"module 'cvfs' has no attribute {name!r}")
