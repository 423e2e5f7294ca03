"""Spectral decompositions with their rules: eigh, eig, svd, and the value-only eigvalsh,
eigvals, svdvals (``nestad.numpy.linalg`` exports them under numpy's names).

Several outputs, one primitive: a primitive returns one array, so each decomposition is
one primitive whose output packs its factors along the second-to-last axis (eigh and eig:
the eigenvalues as row 0 above the eigenvectors, ``(..., n + 1, n)``; svd: ``U``, the
singular values and ``V = Vh^T``, ``(..., m + 1 + n, k)``), and the public function slices
them apart.  The decomposition is computed once per call, and its rules find every factor
in ``out`` (perturbed by the enclosing runs when nested, so higher orders follow).  The
value-only functions are primitives of their own, computed by numpy's own function (whose
values can differ in the last bits from the full decomposition's); their rules take the
vectors from the full primitive applied to the same argument.

Rules (real case; e.g. Giles 2008, Townsend 2016), with ``X = V^T dA V`` (eigh),
``X = V^-1 dA V`` (eig), ``X = U^T dA V`` (svd) and the inverse gaps ``F_ij = 1/(d_j - d_i)``
(eigenvalues; squared singular values for svd) off the diagonal:

* eigh: ``dw = diag(X)``, ``dV = V (F o X)``.  numpy reads one triangle of ``a`` (UPLO),
  so the tangent is the symmetric matrix made of that triangle and the cotangent goes back
  to it: the derivative is the one of the function numpy computes.
* eig: ``dw = diag(X)``, ``dV = V (F o X)`` then projected so each column keeps unit norm.
  A real matrix whose eigenvalues are complex is refused (nestad's values are real).
* svd (reduced): ``ds = diag(X)``, ``dU = U (F o (X S + S X^T)) + (I - U U^T) dA V S^-1``,
  ``dV = V (F o (S X + X^T S)) + (I - V V^T) dA^T U S^-1``.

Repeated eigenvalues (singular values), equal to rounding: one by one they have no
derivative, their mean has; each gets the derivative of its group's mean (both modes, adjoint
to each other), as max splits ties, so symmetric functions of them are exact.  Zero singular
values get 0, as abs at 0.  The vectors of a repeated value have none (numpy's basis of the
subspace is arbitrary; for svd also the columns of zero singular values past the square
part): forward mode gives nan in the tangents of exactly the vectors the direction mixes;
reverse mode raises ``InvalidInputError`` if their cotangent is not zero and is exact
otherwise.  A basis-invariant function of them (``V f(w) V^T``) has a derivative there that
these formulas cannot see: it is refused, not returned wrong.  eig refuses repeated
eigenvalues outright (the matrix may be defective).
"""
import numpy as _np

from . import _indexing, _joining, _kernel, _plumbing, _products, _reductions, _selection, _solve
from ._kernel import _define
from ..errors import InvalidInputError
from ..tracer import is_tracer
from ..values import Perturbed, primal_value

_TIE = 64 * _np.finfo(float).eps     # eigenvalues this close (relative, times n) are repeated


def _carries(x):
    """True if x needs the primitive (a derivative or a trace); plain arrays go to numpy."""
    return isinstance(x, Perturbed) or is_tracer(x)


def _plain(a, name):
    """a for numpy's own function (ndarray subclasses refused, as the primitives do)."""
    return _kernel._plain_operand(a, 'linalg.' + name)


def _result(cls, *parts):
    """numpy's namedtuple result (a plain tuple before numpy 2)."""
    return parts if cls is tuple else cls(*parts)


_EIGH_RESULT = type(_np.linalg.eigh(_np.eye(1)))
_EIG_RESULT = type(_np.linalg.eig(_np.eye(1)))
_SVD_RESULT = type(_np.linalg.svd(_np.eye(1)))


def _mT(a):
    return _plumbing.swapaxes(a, -1, -2)


def _diag(x):
    """The diagonals of a stack of matrices, (..., n)."""
    return _reductions.diagonal(x, 0, -2, -1)


def _rows(x, start, stop=None):
    return _indexing.getitem(x, (Ellipsis, slice(start, stop), slice(None)))


def _row(x, i):
    return _indexing.getitem(x, (Ellipsis, i, slice(None)))


def _pack(*parts):
    """Stack factors along the second-to-last axis (a vector becomes one row)."""
    return _joining.concatenate([_plumbing.expand_dims(p, -2) if _kernel._ndim(p) == _kernel._ndim(parts[-1]) - 1
                            else p for p in parts], axis=-2)


def _triangle_masks(n, lower):
    keep = _np.tril(_np.ones((n, n))) if lower else _np.triu(_np.ones((n, n)))
    return keep, keep - _np.eye(n)


def _from_triangle(t, lower):
    """The symmetric matrix numpy's eigh reads from the lower (upper) triangle of t."""
    keep, strict = _triangle_masks(_kernel._shape(t)[-1], lower)
    return t * keep + _mT(t * strict)


def _to_triangle(g, lower):
    """The adjoint of _from_triangle: a cotangent of the symmetric matrix, on the triangle."""
    keep, strict = _triangle_masks(_kernel._shape(g)[-1], lower)
    return g * keep + _mT(g) * strict


def _ties(d):
    """The pairs (i, j), i != j, of values d_i, d_j equal to rounding (a plain mask)."""
    dv = primal_value(d)
    n = _kernel._shape(d)[-1]
    scale = _np.max(_np.abs(dv), axis=-1, keepdims=True)[..., None]
    gaps = _np.abs(dv[..., None, :] - dv[..., :, None])
    return _np.logical_and(gaps <= _TIE * n * scale, ~_np.eye(n, dtype=bool))


def _inverse_gaps(d):
    """(F, tied): F_ij = 1/(d_j - d_i) off the diagonal, 0 on it and on tied pairs."""
    tied = _ties(d)
    gaps = _plumbing.expand_dims(d, -2) - _plumbing.expand_dims(d, -1)
    zero = _np.logical_or(tied, _np.eye(_kernel._shape(d)[-1], dtype=bool))
    return _selection.where(zero, 0.0, 1.0 / _selection.where(zero, 1.0, gaps)), tied


def _mean_over_ties(x, tied):
    """x (..., n) with each group of tied values replaced by the group's mean.  Repeated
    eigenvalues (singular values) have no derivative one by one, but their mean has: the
    derivative of each is that of the mean, as max's is split equally between ties."""
    if not _np.any(tied):
        return x
    n = _kernel._shape(x)[-1]
    groups = _np.logical_or(tied, _np.eye(n, dtype=bool)).astype(float)
    for _ in range(max(1, (n - 1).bit_length())):        # the groups: ties linked in chains
        groups = (_np.matmul(groups, groups) > 0).astype(float)
    average = groups / _np.sum(groups, axis=-1, keepdims=True)
    return _plumbing.squeeze(_products.matmul(average, _plumbing.expand_dims(x, -1)), -1)


def _nan_where(bad, x):
    """x with nan where ``bad`` (a derivative that does not exist there)."""
    return _selection.where(bad, _np.nan, x)


def _mixes(tied, x):
    """Where a direction x (with any batch axes) mixes vectors of a repeated value."""
    return _np.logical_and(tied, primal_value(x) != 0)


def _refuse_mixing(tied, k, what):
    """Reverse mode: the cotangent k = V^T gV must not touch pairs of repeated values."""
    if _np.any(_np.logical_and(tied, primal_value(k) != 0)):
        raise InvalidInputError(
            f"nestad.numpy.linalg.{what}: the result depends on eigenvectors (singular vectors) "
            "of a repeated eigenvalue (singular value), whose derivative does not exist: numpy's "
            "choice of basis for them is arbitrary. Differentiate a function of the values "
            "alone (eigvalsh, svd(compute_uv=False)), or move off the repeated value.")


# ---------------------------------------------------------------- eigh, eigvalsh

def _eigh_plain(a, UPLO):
    w, v = _np.linalg.eigh(a, UPLO)
    return _np.concatenate([w[..., None, :], v], axis=-2)


def _eigh_parts(out):
    return _row(out, 0), _rows(out, 1)


def _eigh_jvp(t, a, out, UPLO):
    w, v = _eigh_parts(out)
    x = _products.matmul(_mT(v), _products.matmul(_from_triangle(t, UPLO == 'L'), v))
    f, tied = _inverse_gaps(w)
    dv = _products.matmul(v, _nan_where(_mixes(tied, x), f * x))
    return _pack(_mean_over_ties(_diag(x), tied), dv)


def _eigh_vjp(g, a, out, UPLO):
    w, v = _eigh_parts(out)
    gw, gv = _eigh_parts(g)
    k = _products.matmul(_mT(v), gv)
    f, tied = _inverse_gaps(w)
    _refuse_mixing(tied, k, 'eigh')
    m = f * k + _plumbing.expand_dims(_mean_over_ties(gw, tied), -1) * _np.eye(_kernel._shape(w)[-1])
    return _to_triangle(_products.matmul(v, _products.matmul(m, _mT(v))), UPLO == 'L')


_eigh = _define('linalg.eigh', _eigh_plain, (_eigh_jvp,), (_eigh_vjp,))


def _check_uplo(UPLO):
    if UPLO not in ('L', 'U'):
        raise ValueError("UPLO argument must be 'L' or 'U'")


def eigh(a, UPLO='L'):
    """numpy.linalg.eigh of real symmetric matrices (stacks too): (eigenvalues ascending,
    eigenvectors as columns), numpy's values and signs; differentiable as the function of
    the triangle numpy reads."""
    a = _kernel._as_operand(a)
    _check_uplo(UPLO)
    if not _carries(a):
        return _np.linalg.eigh(_plain(a, 'eigh'), UPLO)
    return _result(_EIGH_RESULT, *_eigh_parts(_eigh(a, UPLO=UPLO)))


def _eigvalsh_jvp(t, a, out, UPLO):
    v = _eigh_parts(_eigh(a, UPLO=UPLO))[1]
    x = _products.matmul(_mT(v), _products.matmul(_from_triangle(t, UPLO == 'L'), v))
    return _mean_over_ties(_diag(x), _ties(out))


def _eigvalsh_vjp(g, a, out, UPLO):
    v = _eigh_parts(_eigh(a, UPLO=UPLO))[1]
    g = _mean_over_ties(g, _ties(out))
    return _to_triangle(_products.matmul(v * _plumbing.expand_dims(g, -2), _mT(v)), UPLO == 'L')


_eigvalsh = _define('linalg.eigvalsh', lambda a, UPLO: _np.linalg.eigvalsh(a, UPLO),
                    (_eigvalsh_jvp,), (_eigvalsh_vjp,))


def eigvalsh(a, UPLO='L'):
    """numpy.linalg.eigvalsh: the eigenvalues (ascending), numpy's own values."""
    a = _kernel._as_operand(a)
    _check_uplo(UPLO)
    if not _carries(a):
        return _np.linalg.eigvalsh(_plain(a, 'eigvalsh'), UPLO)
    return _eigvalsh(a, UPLO=UPLO)


# ---------------------------------------------------------------- eig, eigvals

def _real_only(values, name):
    if _np.iscomplexobj(values):
        raise InvalidInputError(
            f"nestad.numpy.linalg.{name}: the matrix has complex eigenvalues; nestad "
            "differentiates real values only. For a symmetric matrix use eigh (real "
            "eigenvalues always); otherwise nestad.primal_value(a) gives numpy's complex "
            "result without derivatives.")
    return values


def _eig_plain(a):
    w, v = _np.linalg.eig(a)
    _real_only(w, 'eig')
    return _np.concatenate([w[..., None, :], v], axis=-2)


def _refuse_ties(w, what):
    if _np.any(_ties(w)):
        raise InvalidInputError(
            f"nestad.numpy.linalg.{what}: the matrix has a repeated eigenvalue; eig's derivative "
            "is defined for distinct eigenvalues only (a non-symmetric matrix with a repeated "
            "eigenvalue may lack a full set of eigenvectors). For a symmetric matrix use eigh "
            "or eigvalsh, which handle repeated eigenvalues.")


def _eig_jvp(t, a, out):
    w, v = _eigh_parts(out)
    _refuse_ties(w, 'eig')
    x = _solve.solve(v, _products.matmul(t, v))          # V^-1 dA V
    f, tied = _inverse_gaps(w)
    dv = _products.matmul(v, _nan_where(_mixes(tied, x), f * x))
    dv = dv - v * _plumbing.sum(v * dv, axis=-2, keepdims=True)     # columns keep unit norm
    return _pack(_diag(x), dv)


def _eig_vjp(g, a, out):
    w, v = _eigh_parts(out)
    gw, gv = _eigh_parts(g)
    _refuse_ties(w, 'eig')
    gv = gv - v * _plumbing.sum(v * gv, axis=-2, keepdims=True)     # the norm's projection
    k = _products.matmul(_mT(v), gv)
    f, tied = _inverse_gaps(w)
    m = f * k + _plumbing.expand_dims(gw, -1) * _np.eye(_kernel._shape(w)[-1])
    return _solve.solve(_mT(v), _products.matmul(m, _mT(v)))    # V^-T M V^T


_eig = _define('linalg.eig', _eig_plain, (_eig_jvp,), (_eig_vjp,))


def eig(a):
    """numpy.linalg.eig of real matrices whose eigenvalues are real (stacks too): numpy's
    values, eigenvectors of unit norm; complex eigenvalues raise InvalidInputError when
    differentiating (a plain array gets numpy's complex result)."""
    a = _kernel._as_operand(a)
    if not _carries(a):
        return _np.linalg.eig(_plain(a, 'eig'))
    return _result(_EIG_RESULT, *_eigh_parts(_eig(a)))


def _eigvals_jvp(t, a, out):
    _refuse_ties(out, 'eigvals')
    v = _eigh_parts(_eig(a))[1]
    return _diag(_solve.solve(v, _products.matmul(t, v)))


def _eigvals_vjp(g, a, out):
    _refuse_ties(out, 'eigvals')
    v = _eigh_parts(_eig(a))[1]
    return _solve.solve(_mT(v), _plumbing.expand_dims(g, -1) * _mT(v))


_eigvals = _define('linalg.eigvals', lambda a: _real_only(_np.linalg.eigvals(a), 'eigvals'),
                   (_eigvals_jvp,), (_eigvals_vjp,))


def eigvals(a):
    """numpy.linalg.eigvals (real eigenvalues), numpy's own values."""
    a = _kernel._as_operand(a)
    if not _carries(a):
        return _np.linalg.eigvals(_plain(a, 'eigvals'))
    return _eigvals(a)


# ---------------------------------------------------------------- svd, svdvals

def _svd_plain(a, full_matrices, hermitian):
    u, s, vh = _np.linalg.svd(a, full_matrices=full_matrices, hermitian=hermitian)
    return _np.concatenate([u, s[..., None, :], _np.swapaxes(vh, -1, -2)], axis=-2)


def _svd_parts(out, m):
    return _rows(out, 0, m), _row(out, m), _rows(out, m + 1)


def _svd_tangent(t, hermitian):
    return _from_triangle(t, True) if hermitian else t     # numpy's hermitian svd reads 'L'


def _inverse_s(s):
    """(1/s, zero): 1/s with 0 where s is zero to rounding, and that mask."""
    sv = primal_value(s)
    zero = _np.abs(sv) <= _TIE * _kernel._shape(s)[-1] * _np.max(_np.abs(sv), axis=-1, keepdims=True)
    return _selection.where(zero, 0.0, 1.0 / _selection.where(zero, 1.0, s)), zero


def _svd_jvp(t, a, out, full_matrices, hermitian):
    m, n = _kernel._shape(a)[-2:]
    u, s, v = _svd_parts(out, m)
    k = _kernel._shape(s)[-1]
    t = _svd_tangent(t, hermitian)
    x = _products.matmul(_mT(u), _products.matmul(t, v))
    f, tied = _inverse_gaps(s * s)
    xs = x * _plumbing.expand_dims(s, -2)                        # X S
    sx = _plumbing.expand_dims(s, -1) * x                        # S X
    cu, cv = xs + _mT(xs), sx + _mT(sx)
    du = _products.matmul(u, _nan_where(_mixes(tied, cu), f * cu))
    dv = _products.matmul(v, _nan_where(_mixes(tied, cv), f * cv))
    s_inv, zero = _inverse_s(s)
    if m > k:
        p = _products.matmul(t, v) - _products.matmul(u, x)            # (I - U U^T) dA V
        du = du + _nan_where(_np.logical_and(zero[..., None, :], primal_value(p) != 0),
                             p * _plumbing.expand_dims(s_inv, -2))
    if n > k:
        q = _products.matmul(_mT(t), u) - _products.matmul(v, _mT(x))  # (I - V V^T) dA^T U
        dv = dv + _nan_where(_np.logical_and(zero[..., None, :], primal_value(q) != 0),
                             q * _plumbing.expand_dims(s_inv, -2))
    return _pack(du, _singular_tangent(_diag(x), s, tied, zero), dv)


def _svd_vjp(g, a, out, full_matrices, hermitian):
    m, n = _kernel._shape(a)[-2:]
    u, s, v = _svd_parts(out, m)
    gu, gs, gv = _svd_parts(g, m)
    k = _kernel._shape(s)[-1]
    ju, jv = _products.matmul(_mT(u), gu), _products.matmul(_mT(v), gv)
    f, tied = _inverse_gaps(s * s)
    _refuse_mixing(tied, ju, 'svd')
    _refuse_mixing(tied, jv, 'svd')
    ju, jv = f * ju, f * jv
    s_inv, zero = _inverse_s(s)
    gs = _singular_tangent(gs, s, tied, zero)
    core = ((ju + _mT(ju)) * _plumbing.expand_dims(s, -2) + _plumbing.expand_dims(s, -1) * (jv + _mT(jv))
            + _plumbing.expand_dims(gs, -1) * _np.eye(k))
    ga = _products.matmul(u, _products.matmul(core, _mT(v)))
    if m > k:
        pu = gu - _products.matmul(u, _products.matmul(_mT(u), gu))    # (I - U U^T) gU
        _refuse_zero_s(zero, pu, gu)
        ga = ga + _products.matmul(pu * _plumbing.expand_dims(s_inv, -2), _mT(v))
    if n > k:
        pv = gv - _products.matmul(v, _products.matmul(_mT(v), gv))    # (I - V V^T) gV
        _refuse_zero_s(zero, pv, gv)
        ga = ga + _products.matmul(u * _plumbing.expand_dims(s_inv, -2), _mT(pv))
    return _to_triangle(ga, True) if hermitian else ga


def _refuse_zero_s(zero, p, g):
    pv, gv = primal_value(p), primal_value(g)
    big = _np.abs(pv) > 1e-8 * _np.max(_np.abs(gv), axis=(-2, -1), keepdims=True)  # not rounding
    if _np.any(_np.logical_and(zero[..., None, :], big)):
        raise InvalidInputError(
            "nestad.numpy.linalg.svd: the result depends on singular vectors of a zero singular "
            "value of a non-square matrix, whose derivative does not exist (any unit vector of "
            "the complement would do). Differentiate the singular values alone "
            "(svd(compute_uv=False)), or move off the rank-deficient matrix.")


_svd = _define('linalg.svd', _svd_plain, (_svd_jvp,), (_svd_vjp,))


def _singular_tangent(ds, s, tied, zero):
    """A (co)tangent of the singular values: the mean over tied ones, and 0 for zero ones
    (|x| at 0: numpy's signs of their vectors are arbitrary; 0 as nestad's abs has)."""
    ds = _mean_over_ties(ds, tied)
    return _selection.where(zero, 0.0, ds) if _np.any(zero) else ds


def _svdvals_jvp(t, a, out, hermitian):
    u, _, v = _svd_parts(_svd(a, full_matrices=False, hermitian=hermitian), _kernel._shape(a)[-2])
    ds = _diag(_products.matmul(_mT(u), _products.matmul(_svd_tangent(t, hermitian), v)))
    return _singular_tangent(ds, out, _ties(out * out), _inverse_s(out)[1])


def _svdvals_vjp(g, a, out, hermitian):
    u, _, v = _svd_parts(_svd(a, full_matrices=False, hermitian=hermitian), _kernel._shape(a)[-2])
    g = _singular_tangent(g, out, _ties(out * out), _inverse_s(out)[1])
    ga = _products.matmul(u * _plumbing.expand_dims(g, -2), _mT(v))
    return _to_triangle(ga, True) if hermitian else ga


_svdvals = _define('linalg.svdvals',
                   lambda a, hermitian: _np.linalg.svd(a, compute_uv=False, hermitian=hermitian),
                   (_svdvals_jvp,), (_svdvals_vjp,))


def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """numpy.linalg.svd of real matrices (stacks too), numpy's values.  Differentiable with
    ``full_matrices=False`` (or square matrices) and with ``compute_uv=False``; the extra
    columns of ``full_matrices=True`` are not functions of the matrix and are refused."""
    a = _kernel._as_operand(a)
    if not _carries(a):
        return _np.linalg.svd(_plain(a, 'svd'), full_matrices=full_matrices, compute_uv=compute_uv,
                              hermitian=hermitian)
    if not compute_uv:
        return _svdvals(a, hermitian=hermitian)
    m, n = _kernel._shape(a)[-2:]
    if full_matrices and m != n and isinstance(a, Perturbed):
        raise InvalidInputError(
            "nestad.numpy.linalg.svd(a, full_matrices=True) of a non-square matrix: the extra "
            "columns of U or Vh are an arbitrary basis of the complement, not functions of a, "
            "so they have no derivative. Pass full_matrices=False.")
    if full_matrices and m != n:          # traced, not differentiated: numpy's own call
        return _np.linalg.svd(a, full_matrices=True, hermitian=hermitian)
    u, s, v = _svd_parts(_svd(a, full_matrices=full_matrices, hermitian=hermitian), m)
    return _result(_SVD_RESULT, u, s, _mT(v))


def svdvals(x):
    """numpy.linalg.svdvals: the singular values (descending)."""
    return svd(x, compute_uv=False)
