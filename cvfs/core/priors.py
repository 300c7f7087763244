"""Priors on one feature's group of coefficients beta_j (shape (G,)), added to the mean loss.

- :class:`Shrinkage`: rho(beta_j) = s ||beta_j||^2
- :class:`SecondOrder`: rho(beta_j) = s ||beta_j||^2 + c sum_k (beta_{j,k+1} + beta_{j,k-1}
  - 2 beta_{j,k})^2, the smoothness prior of the FSA paper, eq. (13), which favours smooth
  piecewise-linear response functions.

A prior is a :class:`Prior` subclass with two numba-compiled static methods of its constants
(``shrinkage`` = s, ``smoothness`` = c): ``value_grad(beta, grad, s, c)`` returns the prior's
value on the (m, G) coefficients and adds its gradient to ``grad``, and ``lipschitz_bound(G, s,
c)`` bounds the Lipschitz constant of that gradient. The FSA kernels receive the prior object
itself, typed by its class like a loss (:mod:`cvfs.core._loss_kernels`): every kernel is compiled
once per prior class with its functions inlined, and reads the two constants from the object.
:func:`prior_value_grad` and :func:`prior_lipschitz` are the kernels' entry points; ``value``,
``gradient`` and ``lipschitz`` are the NumPy reference of each class.
"""

import numpy as np
from numba.core import cgutils, types
from numba.core.imputils import lower_constant
from numba.extending import (
    NativeValue,
    make_attribute_wrapper,
    models,
    overload,
    register_model,
    typeof_impl,
    unbox,
)

from cvfs._jit import njit
from cvfs.core._loss_kernels import _class_key

__all__ = ["PRIORS", "Prior", "SecondOrder", "Shrinkage", "get_prior", "prior_lipschitz",
           "prior_value_grad"]


class Prior:
    """Base class of the priors: subclasses set ``value_grad`` and ``lipschitz_bound`` to
    numba-compiled functions (module docstring) and the attributes ``shrinkage`` and
    ``smoothness`` (floats, 0 when unused)."""

    name = "prior"
    shrinkage = 0.0
    smoothness = 0.0

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # numba reads the type from the object (no Python-level type inference per call); a
        # class outside cvfs is named with a digest of its functions, as a loss is
        key = _class_key(cls, ("value_grad", "lipschitz_bound"))
        _PRIOR_CLASSES[key] = cls
        cls._numba_type_ = PriorType(key)

    def lipschitz(self, G):
        """Lipschitz constant of the gradient for groups of G coefficients."""
        return float(self.lipschitz_bound(G, self.shrinkage, self.smoothness))


_PRIOR_CLASSES = {}


class PriorType(types.Type):
    """numba type of a :class:`Prior` object: one type per prior class."""

    def __init__(self, key):
        self.prior_key = key
        super().__init__(name=f"Prior({key})")


@typeof_impl.register(Prior)
def _typeof_prior(val, c):
    return val._numba_type_


@register_model(PriorType)
class _PriorModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [("shrinkage", types.float64),
                                        ("smoothness", types.float64)])


make_attribute_wrapper(PriorType, "shrinkage", "shrinkage")
make_attribute_wrapper(PriorType, "smoothness", "smoothness")


@unbox(PriorType)
def _unbox_prior(typ, obj, c):
    s = cgutils.create_struct_proxy(typ)(c.context, c.builder)
    for name in ("shrinkage", "smoothness"):
        p = c.pyapi.object_getattr_string(obj, name)
        f = c.pyapi.number_float(p)
        setattr(s, name, c.pyapi.float_as_double(f))
        c.pyapi.decref(f)
        c.pyapi.decref(p)
    return NativeValue(s._getvalue(), is_error=c.pyapi.c_api_error())


@lower_constant(PriorType)
def _constant_prior(context, builder, typ, pyval):
    s = cgutils.create_struct_proxy(typ)(context, builder)
    s.shrinkage = context.get_constant(types.float64, float(pyval.shrinkage))
    s.smoothness = context.get_constant(types.float64, float(pyval.smoothness))
    return s._getvalue()


def prior_value_grad(prior, beta, grad):
    """The prior's value on ``beta`` (m, G); adds its gradient to ``grad`` (numba only)."""
    raise NotImplementedError


def prior_lipschitz(prior, G):
    """Lipschitz bound of the prior's gradient for groups of G coefficients (numba only)."""
    raise NotImplementedError


@overload(prior_value_grad)
def _prior_value_grad_impl(prior, beta, grad):
    if not isinstance(prior, PriorType):
        return None
    vg = _PRIOR_CLASSES[prior.prior_key].value_grad
    return lambda prior, beta, grad: vg(beta, grad, prior.shrinkage, prior.smoothness)


@overload(prior_lipschitz)
def _prior_lipschitz_impl(prior, G):
    if not isinstance(prior, PriorType):
        return None
    lb = _PRIOR_CLASSES[prior.prior_key].lipschitz_bound
    return lambda prior, G: lb(G, prior.shrinkage, prior.smoothness)


def _second_difference(G):
    """D2 of shape (G - 2, G): rows (1, -2, 1)."""
    D = np.zeros((max(G - 2, 0), G))
    for r in range(G - 2):
        D[r, r:r + 3] = (1.0, -2.0, 1.0)
    return D


@njit(cache=True, inline="always")
def _add_shrinkage(beta, grad, shrink, j, val):
    """Group j's s ||beta_j||^2 added to ``val`` (returned) and its gradient to ``grad``
    (inlined: a call per group would cost more than its arithmetic)."""
    for b in range(beta.shape[1]):
        val += shrink * beta[j, b] * beta[j, b]
        grad[j, b] += 2.0 * shrink * beta[j, b]
    return val


@njit(cache=True)
def _shrinkage_value_grad(beta, grad, shrink, smooth):
    val = 0.0
    for j in range(beta.shape[0]):
        val = _add_shrinkage(beta, grad, shrink, j, val)
    return val


@njit(cache=True)
def _shrinkage_lipschitz(G, shrink, smooth):
    return 2.0 * shrink


@njit(cache=True)
def _second_order_value_grad(beta, grad, shrink, smooth):
    """Paper eq. 13: shrinkage plus the squared second differences within each group."""
    m, G = beta.shape
    val = 0.0
    for j in range(m):
        val = _add_shrinkage(beta, grad, shrink, j, val)
        if smooth > 0.0 and G >= 3:
            for b in range(1, G - 1):
                d2 = beta[j, b + 1] + beta[j, b - 1] - 2.0 * beta[j, b]
                val += smooth * d2 * d2
                c = 2.0 * smooth * d2
                grad[j, b + 1] += c
                grad[j, b - 1] += c
                grad[j, b] -= 2.0 * c
    return val


@njit(cache=True)
def _second_order_lipschitz(G, shrink, smooth):
    # ||D2^T D2|| <= 16 (each row of D2 has squared norm 6; Gershgorin gives 16)
    return 2.0 * shrink + (32.0 * smooth if G >= 3 else 0.0)


class Shrinkage(Prior):
    """rho(beta_j) = s ||beta_j||^2.

    Parameters
    ----------
    shrinkage : float, default=1e-3
        s >= 0.
    """

    name = "shrinkage"
    value_grad = staticmethod(_shrinkage_value_grad)
    lipschitz_bound = staticmethod(_shrinkage_lipschitz)

    def __init__(self, shrinkage=1e-3):
        if not shrinkage >= 0:
            raise ValueError(f"shrinkage must be >= 0, got {shrinkage!r}")
        self.shrinkage = float(shrinkage)
        self.smoothness = 0.0

    def value(self, beta):
        """Sum over groups; ``beta`` of shape (m, G)."""
        return self.shrinkage * float(np.sum(np.square(beta)))

    def gradient(self, beta):
        return 2.0 * self.shrinkage * np.asarray(beta, dtype=float)


class SecondOrder(Shrinkage):
    """rho(beta_j) = s ||beta_j||^2 + c ||D2 beta_j||^2 (paper eq. 13).

    Parameters
    ----------
    shrinkage : float, default=1e-3
        s >= 0 (the paper's lambda).
    smoothness : float, default=0.0
        c >= 0.

    References
    ----------
    Barbu et al., TPAMI 2017, eq. (13).
    """

    name = "second_order"
    value_grad = staticmethod(_second_order_value_grad)
    lipschitz_bound = staticmethod(_second_order_lipschitz)

    def __init__(self, shrinkage=1e-3, smoothness=0.0):
        super().__init__(shrinkage)
        if not smoothness >= 0:
            raise ValueError(f"smoothness must be >= 0, got {smoothness!r}")
        self.smoothness = float(smoothness)

    def value(self, beta):
        beta = np.atleast_2d(beta)
        d2 = beta @ _second_difference(beta.shape[1]).T
        return super().value(beta) + self.smoothness * float(np.sum(d2 * d2))

    def gradient(self, beta):
        beta = np.atleast_2d(np.asarray(beta, dtype=float))
        D = _second_difference(beta.shape[1])
        return super().gradient(beta) + 2.0 * self.smoothness * (beta @ D.T @ D)


PRIORS = {"shrinkage": Shrinkage, "second_order": SecondOrder}


def get_prior(prior, shrinkage=1e-3, smoothness=0.0):
    """A prior object from a name in :data:`PRIORS`, a :class:`Prior`, or an object with
    ``shrinkage`` and ``smoothness`` attributes (the :class:`SecondOrder` prior of those).

    Raises
    ------
    ValueError
        If the name is unknown, or ``smoothness`` > 0 with the shrinkage prior.
    """
    if isinstance(prior, str):
        if prior not in PRIORS:
            raise ValueError(f"prior must be one of {sorted(PRIORS)}, got {prior!r}")
        if prior == "shrinkage":
            if smoothness:
                raise ValueError(
                    "smoothness > 0 needs prior='second_order' (the shrinkage prior has no "
                    f"smoothness term), got smoothness={smoothness!r}"
                )
            return Shrinkage(shrinkage)
        return SecondOrder(shrinkage, smoothness)
    if isinstance(prior, Prior):
        return prior
    if not hasattr(prior, "shrinkage") or not hasattr(prior, "smoothness"):
        raise TypeError(f"prior must be a name or a cvfs.core.priors object, got {prior!r}")
    # another object with the two constants: the second-order prior of those constants
    return SecondOrder(prior.shrinkage, prior.smoothness)
