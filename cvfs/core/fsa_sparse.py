"""FSA on scipy.sparse input: the names of the sparse layout, kept at this path.

The sparse layout lives in :mod:`cvfs.core.layouts.sparse`; :func:`cvfs.core.fsa.fsa_fit`
chooses it for a scipy.sparse X, and :func:`fsa_fit_sparse` runs it whatever the registry holds.
"""

from cvfs.core.fsa import fsa_fit_sparse
from cvfs.core.layouts.sparse import check_sparse, sparse_decision_function

__all__ = ["check_sparse", "fsa_fit_sparse", "sparse_decision_function"]
