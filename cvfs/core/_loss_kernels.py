"""The loss seam of the FSA kernels: a loss is an object that the numba kernels receive as it is.

A loss is a subclass of :class:`Loss` (the built-in ones are in :mod:`cvfs.core.losses`) with
numba-compiled static methods:

- ``value_grad(z, y, param) -> (value, d value / dz)`` at one score ``z`` and target ``y``;
- optionally ``rows(z, y, d, param) -> sum of the values`` over arrays of scores, filling the
  derivatives ``d`` (a vectorised version; by default a loop over ``value_grad``).

``param`` is the loss object's float attribute ``param`` (e.g. the Huber SVM's half-width).
A loss object passed to a numba kernel is typed by its class (:class:`LossType`), so every kernel
is compiled, and cached, once per loss class with that class's functions inlined: the seam costs
nothing per row. :func:`loss_rows` and :func:`loss_value_grad` are the two entry points the
kernels call. Also here: the float32 exp of the logistic rows and the pairwise ranking loss.

Sample weights: the kernels take the targets ``y`` either as an (N,) array or, for a weighted
fit, as an (N, 2) array of (target, weight) rows. The entry points are typed by ``y``'s
dimension, so the unweighted kernels are compiled as if weights did not exist: :func:`loss_rows`
and :func:`row_value_grad` return w_i loss_i and w_i d loss_i / dz, :func:`row_weight` w_i (1 for
(N,) targets), :func:`weight_rows` scales a per-row array by w_i in place (nothing for (N,)
targets) and :func:`total_weight` is sum_i w_i (N for (N,) targets), the denominator of the mean
loss.
"""

import hashlib
import math

import numpy as np
from numba.core import cgutils, types
from numba.core.imputils import lower_constant
from numba.extending import (
    NativeValue,
    make_attribute_wrapper,
    models,
    overload,
    overload_attribute,
    register_model,
    typeof_impl,
    unbox,
)

from cvfs._jit import njit

__all__ = ["NO_LOSS", "Loss", "LossType", "loss_rows", "loss_value_grad", "rank_pairs",
           "row_value_grad", "row_weight", "total_weight", "weight_rows"]


class Loss:
    """Base class of the losses on scores z with targets y.

    Subclasses set ``value_grad`` (and optionally ``rows``) to numba-compiled functions (see the
    module docstring) and the attributes below; :meth:`value` and :meth:`gradient` evaluate
    them on arrays.

    Attributes
    ----------
    name : str
    param : float
        Passed to ``value_grad`` and ``rows`` (0 unless the loss has a parameter).
    curvature : float
        Upper bound of d^2 loss / dz^2, from which the solver derives its step size.
    annealing_boost : float
        Step multiplier while features are being removed (:mod:`cvfs.core.fsa`).
    margin : bool
        True for losses of the margin y z with y in {-1, +1} (classification;
        :class:`cvfs.core.losses.MarginLoss`).
    probabilistic : bool
        True if the scores are log-odds: :meth:`proba` turns them into probabilities (the
        estimators' ``predict_proba``).
    pairwise : bool
        True for the pairwise ranking loss, whose kernels take pairs of rows instead of
        ``value_grad`` per row.

    The capabilities decide the estimator a loss serves (:func:`cvfs.core.losses.get_loss`):
    margin losses classify, pairwise losses rank, the others regress.
    """

    name = "loss"
    param = 0.0
    curvature = 1.0
    annealing_boost = 1.0
    margin = False
    probabilistic = False
    pairwise = False
    rows = None

    @property
    def role(self):
        """The estimator role the capabilities give: "classifier", "ranker" or "regressor"."""
        if self.pairwise:
            return "ranker"
        return "classifier" if self.margin else "regressor"

    def proba(self, z):
        """Probability of the positive class at scores ``z`` (probabilistic losses only)."""
        raise AttributeError(f"the {self.name!r} loss is not probabilistic: its scores are no "
                             f"log-odds")

    def multiclass(self):
        """The loss on a score matrix (N, C) that fits more than two classes
        (:mod:`cvfs.core.multiclass_losses`); margin losses only."""
        raise ValueError(f"the {self.name!r} loss has no multiclass form (a margin loss has)")

    def value(self, z, y):
        """Per-sample loss, ndarray of the broadcast shape of ``z`` and ``y``."""
        return self._evaluate(z, y)[0]

    def gradient(self, z, y):
        """d loss / dz per sample, ndarray of the broadcast shape of ``z`` and ``y``."""
        return self._evaluate(z, y)[1]

    def _evaluate(self, z, y):
        z, y = np.broadcast_arrays(np.asarray(z, dtype=np.float64),
                                   np.asarray(y, dtype=np.float64))
        val = np.empty(z.size)
        d = np.empty(z.size)
        loss_values(self, np.ascontiguousarray(z).ravel(), np.ascontiguousarray(y).ravel(), val,
                    d)
        return val.reshape(z.shape), d.reshape(z.shape)

    def init_intercept(self, y, sample_weight=None):
        """Starting intercept of a fit (0 unless a subclass knows better); ``sample_weight``
        (N,) or None weights the rows."""
        return 0.0

    def init_intercepts(self, Y, w):
        """Starting intercepts of the columns of targets ``Y`` (N, C) with row weights ``w``
        (N,), the one-vs-rest problems of a multiclass fit: :meth:`init_intercept` per column
        (unweighted, unless a subclass knows better)."""
        return np.array([self.init_intercept(Y[:, c]) for c in range(Y.shape[1])])

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # the numba type of the class's objects (:class:`LossType`), read by numba's dispatcher
        # from the object itself: a kernel call with a loss then costs no Python-level type
        # inference. Fixed here, from the functions set in the class body.
        key = _class_key(cls)
        _CLASSES[key] = cls
        cls._numba_type_ = LossType(key)


# ---- the numba type of a loss object: its class (by name), and its param as the only value

_CLASSES = {}  # loss classes by their key in the numba type


def _class_key(cls, attrs=("value_grad", "rows")):
    """The name of a loss class in numba's types (and cache index): module and qualified name,
    and for classes outside cvfs a digest of the bytecode of their compiled functions
    ``attrs``, so that an edited user loss is not served a cached kernel of its previous
    version."""
    key = f"{cls.__module__}.{cls.__qualname__}"
    if not cls.__module__.startswith("cvfs."):
        h = hashlib.sha256()
        for attr in attrs:
            f = getattr(cls, attr, None)
            f = getattr(f, "py_func", f)
            if f is not None:
                h.update(f.__code__.co_code)
                h.update(repr(f.__code__.co_consts).encode())
        key += ":" + h.hexdigest()[:16]
    return key


class LossType(types.Type):
    """numba type of a :class:`Loss` object: one type per loss class."""

    def __init__(self, key):
        self.loss_key = key
        super().__init__(name=f"Loss({key})")


@typeof_impl.register(Loss)
def _typeof_loss(val, c):
    return val._numba_type_


@register_model(LossType)
class _LossModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [("param", types.float64)])


make_attribute_wrapper(LossType, "param", "param")


@unbox(LossType)
def _unbox_loss(typ, obj, c):
    p = c.pyapi.object_getattr_string(obj, "param")
    f = c.pyapi.number_float(p)
    value = c.pyapi.float_as_double(f)
    c.pyapi.decref(f)
    c.pyapi.decref(p)
    s = cgutils.create_struct_proxy(typ)(c.context, c.builder)
    s.param = value
    return NativeValue(s._getvalue(), is_error=c.pyapi.c_api_error())


@lower_constant(LossType)
def _constant_loss(context, builder, typ, pyval):  # a loss object as a kernel's global
    s = cgutils.create_struct_proxy(typ)(context, builder)
    s.param = context.get_constant(types.float64, float(pyval.param))
    return s._getvalue()


@overload_attribute(LossType, "pairwise")
def _loss_pairwise(loss):
    flag = bool(_CLASSES[loss.loss_key].pairwise)
    return lambda loss: flag


def _rows(loss, z, y, d):
    raise NotImplementedError  # numba only


def _value_grad(loss, z, y):
    raise NotImplementedError  # numba only


@overload(_rows)
def _rows_impl(loss, z, y, d):
    if not isinstance(loss, LossType):
        return None
    cls = _CLASSES[loss.loss_key]
    rows = cls.rows
    vg = cls.value_grad
    if y.ndim == 2:  # weighted rows (target, weight): w_i loss_i and w_i d loss_i / dz
        if rows is not None:  # the derivatives as the unweighted rows compute them
            def weighted_rows(loss, z, y, d):
                y0 = np.ascontiguousarray(y[:, 0])
                rows(z, y0, d, loss.param)
                total = 0.0
                for i in range(z.size):
                    w = y[i, 1]
                    total += w * vg(z[i], y0[i], loss.param)[0]
                    d[i] *= w
                return total

            return weighted_rows

        def weighted(loss, z, y, d):
            total = 0.0
            for i in range(z.size):
                val, di = vg(z[i], y[i, 0], loss.param)
                w = y[i, 1]
                total += w * val
                d[i] = w * di
            return total

        return weighted
    if rows is not None:
        return lambda loss, z, y, d: rows(z, y, d, loss.param)

    def impl(loss, z, y, d):
        total = 0.0
        for i in range(z.size):
            val, di = vg(z[i], y[i], loss.param)
            total += val
            d[i] = di
        return total

    return impl


@overload(_value_grad)
def _value_grad_impl(loss, z, y):
    if not isinstance(loss, LossType):
        return None
    vg = _CLASSES[loss.loss_key].value_grad
    return lambda loss, z, y: vg(z, y, loss.param)


def row_weight(y, i):
    raise NotImplementedError  # numba only


def weight_rows(y, t):
    raise NotImplementedError  # numba only


def total_weight(y):
    raise NotImplementedError  # numba only


def row_value_grad(loss, z, y, i):
    raise NotImplementedError  # numba only


@overload(row_weight)
def _row_weight_impl(y, i):
    if y.ndim == 2:
        return lambda y, i: y[i, 1]
    return lambda y, i: 1.0


@overload(weight_rows)
def _weight_rows_impl(y, t):
    if y.ndim == 2:
        def impl(y, t):
            for i in range(t.size):
                t[i] *= y[i, 1]
        return impl
    return lambda y, t: None


@overload(total_weight)
def _total_weight_impl(y):
    if y.ndim == 2:
        return lambda y: y[:, 1].sum()
    return lambda y: float(y.shape[0])


@overload(row_value_grad)
def _row_value_grad_impl(loss, z, y, i):
    if not isinstance(loss, LossType):
        return None
    vg = _CLASSES[loss.loss_key].value_grad
    if y.ndim == 2:
        def impl(loss, z, y, i):
            w = y[i, 1]
            val, d = vg(z, y[i, 0], loss.param)
            return w * val, w * d, w
        return impl

    def plain(loss, z, y, i):
        val, d = vg(z, y[i], loss.param)
        return val, d, 1.0
    return plain


@njit(cache=True)
def loss_value_grad(loss, z, y):
    """Loss value and d loss / dz at score ``z`` and target ``y``."""
    return _value_grad(loss, z, y)


@njit(cache=True)
def loss_rows(loss, z, y, d):
    """Sum of the loss over the rows and its derivative per row (into ``d``)."""
    return _rows(loss, z, y, d)


@njit(cache=True)
def loss_values(loss, z, y, val, d):
    """The loss (into ``val``) and its derivative (into ``d``) per element."""
    for i in range(z.size):
        val[i], d[i] = _value_grad(loss, z[i], y[i])


@njit(cache=True)
def _no_loss(z, y, param):
    return 0.0, 0.0


class _NoLoss(Loss):
    """The zero loss: the kernels' passes then compute only the curvature products (the power
    iteration of :func:`cvfs.core._kernels.power_estimate`)."""

    name = "none"
    value_grad = staticmethod(_no_loss)


NO_LOSS = _NoLoss()

_LOG2E = np.float32(1.4426950408889634)
_ROUND = np.float32(12582912.0)  # 1.5 * 2**23: x + _ROUND rounds x to an integer in its low bits
_ROUND_BITS = np.int32(0x4B400000)  # the bits of _ROUND
_LN2_HI = np.float32(0.693145751953125)  # ln 2 = _LN2_HI + _LN2_LO, _LN2_HI exact in 12 bits
_LN2_LO = np.float32(1.428606765330187e-06)


@njit(cache=True, fastmath={"contract"})
def _exp_neg_abs(u, out):
    """out_i = exp(-|u_i|) to a relative error < 2e-7 (exp(-40) for |u_i| > 40, which changes
    no sum or derivative by more than 5e-18).

    Single precision where it is cheap and double where it matters: a = min(|u|, 40) is split
    into its float32 rounding a32 and the rest (|a - a32| <= 1.2e-6, applied in float64 as the
    factor 1 - (a - a32)); exp(-a32) = 2^-n exp(r) with n = round(a32 / ln 2), r = n ln 2 - a32
    (|r| <= ln 2 / 2, exact in float32 with the two-part ln 2) and a degree-7 Taylor polynomial
    (error 5e-9), evaluated in float32; 2^-n is applied by subtracting n from the exponent
    bits. No library call and no branch, so the loops vectorise with eight float32 lanes per
    AVX2 register: 2-2.5x faster than an all-float64 version (exp(-a/64)^64, degree 14); the
    exp is a large part of a logistic FSA fit at N = M = 1000 (benchmarks/fsa/synthetic_tables.py
    times that fit). The derivatives and the loss of the logistic rows inherit the 2e-7
    (their sums are float64). Only "contract" fastmath: reassociation could fold the rounding
    (x + _ROUND) - _ROUND away.
    """
    n = u.size
    p32 = np.empty(n, dtype=np.float32)
    k32 = np.empty(n, dtype=np.float32)
    for i in range(n):
        a = min(abs(u[i]), 40.0)
        a32 = np.float32(a)
        out[i] = 1.0 - (a - np.float64(a32))
        kf = a32 * _LOG2E + _ROUND
        nf = kf - _ROUND
        r = nf * _LN2_HI - a32 + nf * _LN2_LO
        p = np.float32(1.0 / 5040.0)
        p = p * r + np.float32(1.0 / 720.0)
        p = p * r + np.float32(1.0 / 120.0)
        p = p * r + np.float32(1.0 / 24.0)
        p = p * r + np.float32(1.0 / 6.0)
        p = p * r + np.float32(0.5)
        p = p * r + np.float32(1.0)
        p = p * r + np.float32(1.0)
        p32[i] = p
        k32[i] = kf
    pb = p32.view(np.int32)
    kb = k32.view(np.int32)
    for i in range(n):
        pb[i] -= (kb[i] - _ROUND_BITS) << 23
    for i in range(n):
        out[i] *= p32[i]


@njit(cache=True)
def rank_pairs(z, t, pi, pj, pr, pw, r, w, track):
    """Pairwise ranking loss, weighted mean over pairs (weights ``pw`` sum to 1): fills
    r = d loss / dz and w = D^T W D t (the curvature operator applied to t). Returns the loss."""
    r[:] = 0.0
    w[:] = 0.0
    lsum = 0.0
    for p in range(pi.size):
        i = pi[p]
        j = pj[p]
        d = z[i] - z[j]
        if d > 0:
            e = math.exp(-d)
            sp = d + math.log1p(e)
            sig = 1.0 / (1.0 + e)
        else:
            e = math.exp(d)
            sp = math.log1p(e)
            sig = e / (1.0 + e)
        lsum += (sp - pr[p] * d) * pw[p]
        s = (sig - pr[p]) * pw[p]
        r[i] += s
        r[j] -= s
        if track:
            dt = (t[i] - t[j]) * pw[p]
            w[i] += dt
            w[j] -= dt
    return lsum
