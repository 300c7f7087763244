"""Shared pieces of the estimators: warnings and random-state normalisation."""

import numbers

import numpy as np
from sklearn.exceptions import ConvergenceWarning

__all__ = ["ConvergenceWarning", "check_random_state", "seed_from"]


def check_random_state(random_state):
    """Normalise ``random_state`` (None, int or Generator) to a :class:`numpy.random.Generator`.

    Parameters
    ----------
    random_state : None, int or numpy.random.Generator
        None gives a fresh, OS-seeded generator; an int seeds a new generator; a Generator is
        returned as it is (shared, not copied).

    Raises
    ------
    TypeError
        If ``random_state`` is none of these.
    """
    if random_state is None or isinstance(random_state, numbers.Integral):
        return np.random.default_rng(random_state)
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**31 - 1))
    raise TypeError(
        f"random_state must be None, an int or a numpy Generator; got {type(random_state).__name__}"
    )


def seed_from(random_state):
    """An int seed drawn from ``random_state`` (for numba kernels, which take plain ints)."""
    return int(check_random_state(random_state).integers(0, 2**31 - 1))
