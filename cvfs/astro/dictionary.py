"""Dictionaries of sampled PSF atoms (SBL paper Sec. 5-B), built on the fly.

A :class:`PSFDictionary` holds only the atom parameters (x0, y0, sigma) and their separable
factors (n_atoms x (height + width) numbers), never the dense (height * width) x n_atoms matrix:
products with it cost one (n_atoms x height) @ (height x width) matrix product. It implements the
operator protocol of :class:`cvfs.core.screening.DenseOperator`, so the SBL core uses it directly.
:class:`ProfileDictionary` does the same for the atoms of a mixture PSF
(:class:`cvfs.astro.psf.PSFProfile`): m separable terms per atom.
"""

import numbers

import numpy as np

from cvfs.astro.psf import psf_factors
from cvfs.base import check_random_state

__all__ = ["PSFDictionary", "ProfileDictionary", "make_dictionary", "sample_atoms"]


def sample_atoms(shape, n_atoms=10_000, psf_sigma=(1.0, 2.0), *, method="grid", margin=1.0,
                 random_state=None):
    """Sample n atom parameters (x0, y0, sigma) over an image patch.

    Parameters
    ----------
    shape : tuple of int
        (height, width) of the patch.
    n_atoms : int
        Number of atoms (approximately, for ``"grid"``: the product of the grid sizes).
    psf_sigma : float or (float, float)
        PSF width, or the range [sigma_min, sigma_max] to sample.
    method : {"grid", "uniform"} or callable
        ``"grid"``: a regular grid of positions and widths with uniform jitter of one cell;
        ``"uniform"``: independent uniform draws; a callable ``prior(n, rng)`` returning an
        (n, 3) array of (x0, y0, sigma) (a user prior).
    margin : float
        Positions extend ``margin`` pixels beyond the patch, so sources on its border are
        represented.
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    ndarray of shape (n, 3)
        Columns x0 (column), y0 (row), sigma.

    Raises
    ------
    ValueError
        On a bad ``n_atoms``, ``psf_sigma`` or ``method``.
    """
    if not isinstance(n_atoms, numbers.Integral) or n_atoms < 1:
        raise ValueError(f"n_atoms must be a positive int; got {n_atoms!r}")
    lo, hi = _sigma_range(psf_sigma)
    rng = check_random_state(random_state)
    h, w = shape
    xlo, xhi, ylo, yhi = -margin, w - 1 + margin, -margin, h - 1 + margin
    if callable(method):
        out = np.asarray(method(n_atoms, rng), dtype=np.float64)
        if out.ndim != 2 or out.shape[1] != 3:
            raise ValueError(f"a prior must return an (n, 3) array; got shape {out.shape}")
        return out
    if method == "uniform":
        return np.column_stack([rng.uniform(xlo, xhi, n_atoms), rng.uniform(ylo, yhi, n_atoms),
                                rng.uniform(lo, hi, n_atoms)])
    if method != "grid":
        raise ValueError(f"method must be 'grid', 'uniform' or a callable; got {method!r}")
    n_s = 1 if hi == lo else max(2, int(round((n_atoms / (w * h)) ** (1 / 3) * 1.5)))
    per = n_atoms / n_s
    ratio = (xhi - xlo) / (yhi - ylo)
    n_y = max(1, int(round(np.sqrt(per / ratio))))
    n_x = max(1, int(round(per / n_y)))
    dx, dy = (xhi - xlo) / n_x, (yhi - ylo) / n_y
    ds = (hi - lo) / n_s
    gx = xlo + dx * (np.arange(n_x) + 0.5)
    gy = ylo + dy * (np.arange(n_y) + 0.5)
    gs = lo + ds * (np.arange(n_s) + 0.5) if n_s > 1 else np.array([lo])
    X, Y, S = (a.ravel() for a in np.meshgrid(gx, gy, gs, indexing="ij"))
    X = X + rng.uniform(-dx / 2, dx / 2, X.size)
    Y = Y + rng.uniform(-dy / 2, dy / 2, Y.size)
    if n_s > 1:
        S = S + rng.uniform(-ds / 2, ds / 2, S.size)
    return np.column_stack([X, Y, S])


def _sigma_range(psf_sigma):
    s = np.atleast_1d(np.asarray(psf_sigma, dtype=np.float64))
    if s.size not in (1, 2) or not np.all(np.isfinite(s)) or np.any(s <= 0):
        raise ValueError(
            f"psf_sigma must be a positive float or a (min, max) pair; got {psf_sigma!r}"
        )
    lo, hi = float(s.min()), float(s.max())
    return lo, hi


class PSFDictionary:
    """Unit-norm pixel-integrated Gaussian atoms at given (x0, y0, sigma), built on the fly.

    Parameters
    ----------
    shape : tuple of int
        (height, width) of the patch.
    params : ndarray of shape (n_atoms, 3)
        x0 (column), y0 (row), sigma of each atom.

    Attributes
    ----------
    shape : tuple
        (height * width, n_atoms), the shape of the matrix Phi it stands for.
    flux_per_unit : ndarray of shape (n_atoms,)
        1 / ||raw atom||: a coefficient c on the unit-norm atom is a source of flux
        c * flux_per_unit.
    """

    def __init__(self, shape, params):
        self.image_shape = tuple(int(v) for v in shape)
        self.params = np.asarray(params, dtype=np.float64)
        Ey, Ex = psf_factors(self.image_shape, *self.params.T)
        raw = np.sqrt((Ey**2).sum(1) * (Ex**2).sum(1))
        raw = np.where(raw > 0, raw, 1.0)
        self.flux_per_unit = 1.0 / raw
        s = np.sqrt(self.flux_per_unit)
        self.Ey = np.ascontiguousarray(Ey * s[:, None])
        self.Ex = np.ascontiguousarray(Ex * s[:, None])
        self.shape = (self.image_shape[0] * self.image_shape[1], self.params.shape[0])

    def rmatvec(self, R):
        """Phi^T R for R of shape (n_pixels,) or (n_pixels, m)."""
        h, w = self.image_shape
        R = np.asarray(R, dtype=np.float64)
        if R.ndim == 1:
            return np.einsum("nw,nw->n", self.Ey @ R.reshape(h, w), self.Ex)
        m = R.shape[1]
        T = (self.Ey @ R.reshape(h, w * m)).reshape(-1, w, m)
        return np.einsum("nwm,nw->nm", T, self.Ex)

    def columns(self, idx):
        """Phi[:, idx], shape (n_pixels, len(idx))."""
        idx = np.atleast_1d(idx)
        cols = self.Ey[idx][:, :, None] * self.Ex[idx][:, None, :]
        return cols.reshape(idx.size, -1).T

    def column_norms(self):
        return np.ones(self.shape[1])

    def gram_columns(self, idx):
        """Phi^T Phi[:, idx], shape (n_atoms, len(idx)); separable, so two small products."""
        idx = np.atleast_1d(idx)
        return (self.Ey @ self.Ey[idx].T) * (self.Ex @ self.Ex[idx].T)

    def subset(self, idx):
        """The dictionary restricted to atoms ``idx`` (no PSF re-evaluation)."""
        out = object.__new__(PSFDictionary)
        out.image_shape = self.image_shape
        out.params = self.params[idx]
        out.flux_per_unit = self.flux_per_unit[idx]
        out.Ey = np.ascontiguousarray(self.Ey[idx])
        out.Ex = np.ascontiguousarray(self.Ex[idx])
        out.shape = (self.shape[0], out.params.shape[0])
        return out

    def crop(self, shape, margin=1.0):
        """The atoms of a smaller patch at the top-left corner of this one: those centred within
        ``margin`` pixels of it, their factors cut to ``shape`` and renormalised (no PSF
        re-evaluation; a pixel's profile depends only on its offset from the centre).

        Parameters
        ----------
        shape : tuple of int
            (height, width), at most this dictionary's.
        margin : float

        Returns
        -------
        PSFDictionary
        """
        h, w = (int(v) for v in shape)
        if h > self.image_shape[0] or w > self.image_shape[1]:
            raise ValueError(f"crop shape {shape} exceeds the dictionary's {self.image_shape}")
        x, y = self.params[:, 0], self.params[:, 1]
        idx = np.flatnonzero((x <= w - 1 + margin) & (y <= h - 1 + margin))
        s = 1.0 / np.sqrt(self.flux_per_unit[idx])  # undo the unit-norm scaling
        Ey = self.Ey[idx, :h] * s[:, None]
        Ex = self.Ex[idx, :w] * s[:, None]
        raw = np.sqrt((Ey**2).sum(1) * (Ex**2).sum(1))
        raw = np.where(raw > 0, raw, 1.0)
        out = object.__new__(PSFDictionary)
        out.image_shape = (h, w)
        out.params = self.params[idx]
        out.flux_per_unit = 1.0 / raw
        scale = np.sqrt(out.flux_per_unit)
        out.Ey = np.ascontiguousarray(Ey * scale[:, None])
        out.Ex = np.ascontiguousarray(Ex * scale[:, None])
        out.shape = (h * w, idx.size)
        return out

    def matrix(self):
        """The dense matrix Phi of shape (n_pixels, n_atoms)."""
        return self.columns(np.arange(self.shape[1]))


def make_dictionary(shape, params, profile=None):
    """The dictionary of atoms ``params`` of a PSF profile: :class:`PSFDictionary` for the
    integrated Gaussian (``profile`` None or Gaussian), :class:`ProfileDictionary` otherwise."""
    if profile is None or profile.is_gaussian:
        return PSFDictionary(shape, params)
    return ProfileDictionary(shape, params, profile)


class ProfileDictionary(PSFDictionary):
    """Unit-norm atoms of a mixture PSF (:class:`cvfs.astro.psf.PSFProfile`) at (x0, y0, sigma).

    Each atom is a sum of m separable terms; the factors are stored atom-major, ``Ey`` of shape
    (n_atoms * m, height) and ``Ex`` of shape (n_atoms * m, width), the amplitudes and the
    unit-norm scaling folded in, so products cost m times those of :class:`PSFDictionary` and
    the Gram columns m^2 times.

    Parameters
    ----------
    shape : tuple of int
        (height, width) of the patch.
    params : ndarray of shape (n_atoms, 3)
    profile : PSFProfile
    """

    def __init__(self, shape, params, profile):
        self.image_shape = tuple(int(v) for v in shape)
        self.params = np.asarray(params, dtype=np.float64)
        self.profile = profile
        self.m = len(profile.amp)
        Ey, Ex = profile.factors(self.image_shape, *self.params.T)
        self._set(Ey, Ex)

    def _set(self, Ey, Ex):
        """Store raw factors (n, m, h), (n, m, w) scaled to unit-norm atoms."""
        gy = np.einsum("nah,nbh->nab", Ey, Ey)
        gx = np.einsum("naw,nbw->nab", Ex, Ex)
        raw = np.sqrt(np.maximum(np.einsum("nab,nab->n", gy, gx), 0.0))
        raw = np.where(raw > 0, raw, 1.0)
        self.flux_per_unit = 1.0 / raw
        s = np.sqrt(self.flux_per_unit)[:, None, None]
        n = Ey.shape[0]
        self.Ey = np.ascontiguousarray((Ey * s).reshape(n * self.m, -1))
        self.Ex = np.ascontiguousarray((Ex * s).reshape(n * self.m, -1))
        self.shape = (self.image_shape[0] * self.image_shape[1], n)

    def _new(self):
        out = object.__new__(ProfileDictionary)
        out.profile, out.m = self.profile, self.m
        return out

    def rmatvec(self, R):
        """Phi^T R for R of shape (n_pixels,) or (n_pixels, m)."""
        h, w = self.image_shape
        n = self.shape[1]
        R = np.asarray(R, dtype=np.float64)
        if R.ndim == 1:
            v = np.einsum("nw,nw->n", self.Ey @ R.reshape(h, w), self.Ex)
            return v.reshape(n, self.m).sum(1)
        k = R.shape[1]
        T = (self.Ey @ R.reshape(h, w * k)).reshape(-1, w, k)
        return np.einsum("nwk,nw->nk", T, self.Ex).reshape(n, self.m, k).sum(1)

    def _rows(self, idx):
        return (np.atleast_1d(idx)[:, None] * self.m + np.arange(self.m)).ravel()

    def columns(self, idx):
        """Phi[:, idx], shape (n_pixels, len(idx))."""
        idx = np.atleast_1d(idx)
        r = self._rows(idx)
        cols = (self.Ey[r][:, :, None] * self.Ex[r][:, None, :]).reshape(idx.size, self.m, -1)
        return cols.sum(1).T

    def gram_columns(self, idx):
        """Phi^T Phi[:, idx], shape (n_atoms, len(idx))."""
        idx = np.atleast_1d(idx)
        r = self._rows(idx)
        G = (self.Ey @ self.Ey[r].T) * (self.Ex @ self.Ex[r].T)
        # the sum over the m x m component pairs: a matrix-vector product over the inner one
        G = G.reshape(-1, self.m) @ np.ones(self.m)
        return G.reshape(self.shape[1], self.m, idx.size).sum(1)

    def subset(self, idx):
        """The dictionary restricted to atoms ``idx`` (no PSF re-evaluation)."""
        idx = np.atleast_1d(idx)
        out = self._new()
        out.image_shape = self.image_shape
        out.params = self.params[idx]
        out.flux_per_unit = self.flux_per_unit[idx]
        r = self._rows(idx)
        out.Ey = np.ascontiguousarray(self.Ey[r])
        out.Ex = np.ascontiguousarray(self.Ex[r])
        out.shape = (self.shape[0], out.params.shape[0])
        return out

    def crop(self, shape, margin=1.0):
        """As :meth:`PSFDictionary.crop`."""
        h, w = (int(v) for v in shape)
        if h > self.image_shape[0] or w > self.image_shape[1]:
            raise ValueError(f"crop shape {shape} exceeds the dictionary's {self.image_shape}")
        x, y = self.params[:, 0], self.params[:, 1]
        idx = np.flatnonzero((x <= w - 1 + margin) & (y <= h - 1 + margin))
        r = self._rows(idx)
        s = np.repeat(1.0 / np.sqrt(self.flux_per_unit[idx]), self.m)[:, None]
        Ey = (self.Ey[r, :h] * s).reshape(idx.size, self.m, h)
        Ex = (self.Ex[r, :w] * s).reshape(idx.size, self.m, w)
        out = self._new()
        out.image_shape = (h, w)
        out.params = self.params[idx]
        out._set(Ey, Ex)
        return out
