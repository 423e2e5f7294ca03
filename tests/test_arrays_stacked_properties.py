"""Property test: every array primitive on stacks of k matrices (or vectors) of size n,
with the stack size equal to the matrix size (k == n, where a cotangent sent to the wrong
axis still has the right shape and gives a silently wrong number) and different from it
(k != n, where it raises).  Hypothesis draws k, n, axes, keepdims and the values; each
case is a function of one or two arrays, made scalar as F = sum(w * f) + sum(u * f**2) / 2
with random weights w, u of the output's shape (a uniform cotangent would hide an entry
sent to the wrong place).

Checked for every example:
* gradient_r == gradient_f (relative 1e-9 of the gradient's largest entry),
* both == central finite differences (step 1e-6; |error| <= 1e-5 * (1 + |g|_max)),
* a Hessian-vector product H v by forward-over-reverse (jvp of gradient_r), forward over
  forward (jvp of gradient_f), reverse over reverse and reverse over forward (vjp of the
  gradients) and the batched Hessian (jacobian_f of gradient_r) agree (relative 1e-8) and
  match central differences of gradient_r (|error| <= 1e-4 * (1 + |Hv|_max)).
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nestad as nd
import nestad.numpy as anp
from nestad.numpy._kernel import _is_basic

H = 1e-6
FD_TOL = 1e-5           # gradients vs FD, relative to 1 + max |g|
FD2_TOL = 1e-4          # Hessian-vector products vs FD of gradient_r, relative to 1 + max |Hv|
AD_TOL = 1e-9           # one mode against another, relative to max |g|
AD2_TOL = 1e-8

SETTINGS = settings(max_examples=10, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ---------------------------------------------------------------- inputs

def vals(r, shape, lo=-1.0, hi=1.0):
    return r.uniform(lo, hi, size=shape)


def away_from_zero(r, shape, lo=0.3, hi=1.5):
    """Entries with |x| in [lo, hi] and random signs (no kink of abs, no pole of 1/x)."""
    return vals(r, shape, lo, hi) * r.choice([-1.0, 1.0], size=shape)


def matrices(r, k, n):
    """A stack of k well-conditioned n x n matrices."""
    return vals(r, (k, n, n), -0.5, 0.5) + 2.0 * np.eye(n)


def axis_choice(draw, ndim):
    """None, an int axis (negative or not), or a tuple of distinct axes."""
    kind = draw(st.sampled_from(['none', 'int', 'tuple']))
    if kind == 'none':
        return None
    if kind == 'int':
        return draw(st.integers(-ndim, ndim - 1))
    axes = draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True))
    return tuple(a - ndim if draw(st.booleans()) else a for a in axes)


def other_operand_shape(draw, k, n):
    """A shape that broadcasts against (k, n, n) in some way."""
    return draw(st.sampled_from([(k, n, n), (n, n), (n,), (k, 1, 1), (k, n, 1), (1, n, n), (1,),
                                 ()]))


# ---------------------------------------------------------------- cases
# Each case(draw, r, k, n) returns (f, args, argnums): f(*args) is an array, and the
# arguments listed in argnums are differentiated.

UNARY = {       # name: value generator for the argument, given r and shape
    'sin': vals, 'cos': vals, 'tan': vals, 'arcsin': lambda r, s: vals(r, s, -0.9, 0.9),
    'arccos': lambda r, s: vals(r, s, -0.9, 0.9), 'arctan': vals, 'sinh': vals, 'cosh': vals,
    'tanh': vals, 'arcsinh': vals, 'arccosh': lambda r, s: vals(r, s, 1.2, 3.0), 'exp2': vals,
    'arctanh': lambda r, s: vals(r, s, -0.9, 0.9), 'exp': vals, 'expm1': vals,
    'log': lambda r, s: vals(r, s, 0.2, 3.0), 'log1p': lambda r, s: vals(r, s, -0.8, 2.0),
    'log2': lambda r, s: vals(r, s, 0.2, 3.0), 'log10': lambda r, s: vals(r, s, 0.2, 3.0),
    'sqrt': lambda r, s: vals(r, s, 0.2, 3.0), 'cbrt': away_from_zero,
    'reciprocal': away_from_zero, 'absolute': away_from_zero, 'square': vals, 'negative': vals,
    '_sech2': vals,         # (tanh's derivative, a primitive of its own; not exported)
}

BINARY = {      # name: (x generator, y generator)
    'add': (vals, vals), 'subtract': (vals, vals), 'multiply': (vals, vals),
    'divide': (vals, away_from_zero), 'power': (lambda r, s: vals(r, s, 0.5, 2.0), vals),
    'arctan2': (vals, lambda r, s: vals(r, s, 0.3, 2.0)),
    'hypot': (away_from_zero, away_from_zero), 'logaddexp': (vals, vals), 'logaddexp2': (vals, vals),
    'maximum': (vals, lambda r, s: vals(r, s, 2.0, 3.0) * r.choice([-1.0, 1.0], size=s)),
    'minimum': (vals, lambda r, s: vals(r, s, 2.0, 3.0) * r.choice([-1.0, 1.0], size=s)),
    'mod': (lambda r, s: vals(r, s, 2.2, 2.8), lambda r, s: vals(r, s, 1.0, 1.05)),
    'fmod': (lambda r, s: vals(r, s, 2.2, 2.8) * r.choice([-1.0, 1.0], size=s),
             lambda r, s: vals(r, s, 1.0, 1.05)),
    'float_power': (lambda r, s: vals(r, s, 0.5, 2.0), vals),
}


def unary_case(name):
    def case(draw, r, k, n):
        x = UNARY[name](r, (k, n, n))
        return getattr(anp, name), (x,), (0,)
    return case


def binary_case(name):
    def case(draw, r, k, n):
        sy = other_operand_shape(draw, k, n)
        gx, gy = BINARY[name]
        x, y = gx(r, (k, n, n)), gy(r, sy)
        if draw(st.booleans()):         # the stacked operand on either side
            x, y = gx(r, sy), gy(r, (k, n, n))
        return getattr(anp, name), (x, y), (0, 1)
    return case


def reduction_case(name):
    def case(draw, r, k, n):
        x = vals(r, (k, n, n), 0.5, 1.5)        # distinct positive entries: no ties for max/min
        axis = axis_choice(draw, 3)
        keepdims = draw(st.booleans())
        fn = getattr(anp, name)
        return (lambda x: fn(x, axis=axis, keepdims=keepdims)), (x,), (0,)
    return case


def cumsum_case(draw, r, k, n):
    axis = draw(st.sampled_from([None, 0, 1, 2, -1]))
    return (lambda x: anp.cumsum(x, axis=axis)), (vals(r, (k, n, n)),), (0,)


def cumprod_case(draw, r, k, n):
    axis = draw(st.sampled_from([None, 0, 1, 2, -1]))
    x = vals(r, (k, n, n))
    if draw(st.booleans()):
        x[..., 0] = 0.0                 # zeros: the rule multiplies the other entries
    return (lambda x: anp.cumprod(x, axis=axis)), (x,), (0,)


def logsumexp_case(draw, r, k, n):
    axis = axis_choice(draw, 3)
    keepdims = draw(st.booleans())
    return (lambda x: anp.logsumexp(x, axis=axis, keepdims=keepdims)), (vals(r, (k, n, n)),), (0,)


def two_operand_case(fn, shapes):
    """fn(a, b) for operand shapes drawn from shapes(k, n)."""
    def case(draw, r, k, n):
        sa, sb = draw(st.sampled_from(shapes(k, n)))
        return fn, (vals(r, sa), vals(r, sb)), (0, 1)
    return case


MATMUL_SHAPES = lambda k, n: [((k, n, n), (k, n, n)), ((k, n, n), (n, n)), ((n, n), (k, n, n)),  # noqa: E731
                              ((k, n, n), (n,)), ((n,), (k, n, n)), ((k, 1, n, n), (k, n, 2)),
                              ((k, n), (n, k)), ((n,), (n,))]
DOT_SHAPES = lambda k, n: [((k, n), (n, k)), ((k, n), (n,)), ((n,), (n, k)), ((n,), (n,)),  # noqa: E731
                           ((k, n), ()), ((), (k, n)), ((k, n, n), (n, 2)), ((k, n), (k, n, 2)),
                           ((n,), (k, n, n)), ((k, n, n), (n,)), ((2, k, n), (k, n, n))]

EINSUMS = [('kij,kjl->kil', 'kij', 'kjl'), ('kij,jl->kil', 'kij', 'jl'), ('kij,j->ki', 'kij', 'j'),
           ('ij,kj->ki', 'ij', 'kj'), ('kij,kij->k', 'kij', 'kij'), ('kij,kj->i', 'kij', 'kj'),
           ('kij->kji', 'kij', None), ('kij->k', 'kij', None), ('kij->j', 'kij', None),
           ('...ij,...jl->...il', 'kij', 'jl'), ('kij,kjl', 'kij', 'kjl'), ('kii->ki', 'kii', None),
           ('kii', 'kii', None), ('...j,...ij', 'kj', 'kij'), ('kij,ij->i', 'kij', 'ij')]


def einsum3_case(draw, r, k, n):
    spec = draw(st.sampled_from(['kij,jl,kl->ki', 'ki,ij,kj', '...i,...i,i->...']))
    dims = {'k': k, 'i': n, 'j': n, 'l': 2}
    shapes = {'kij,jl,kl->ki': ('kij', 'jl', 'kl'), 'ki,ij,kj': ('ki', 'ij', 'kj'),
              '...i,...i,i->...': ('ki', 'ki', 'i')}[spec]
    ops = tuple(vals(r, tuple(dims[c] for c in s)) for s in shapes)
    return (lambda *o: anp.einsum(spec, *o)), ops, (0, 1, 2)


def tensordot_case(draw, r, k, n):
    sa, sb, axes = draw(st.sampled_from([((k, n, n), (n, n, 2), 2), ((k, n), (k, n), ([0, 1], [0, 1])),
                                         ((k, n, n), (n, k), ([0, 2], [1, 0])), ((k, n), (2,), 0)]))
    return (lambda a, b: anp.tensordot(a, b, axes)), (vals(r, sa), vals(r, sb)), (0, 1)


def einsum_case(draw, r, k, n):
    spec, sa, sb = draw(st.sampled_from(EINSUMS))
    dims = {'k': k, 'i': n, 'j': n, 'l': 2}
    a = vals(r, tuple(dims[c] for c in sa))
    if sb is None:
        return (lambda a: anp.einsum(spec, a)), (a,), (0,)
    b = vals(r, tuple(dims[c] for c in sb))
    return (lambda a, b: anp.einsum(spec, a, b)), (a, b), (0, 1)


def of_stack(op):
    """op(x, k, n) of one stack x of shape (k, n, n)."""
    def case(draw, r, k, n):
        return (lambda x: op(x, k, n)), (vals(r, (k, n, n)),), (0,)
    return case


SHAPE_OPS = {
    'reshape': lambda x, k, n: anp.reshape(x, (n, k * n)),
    'reshape-method': lambda x, k, n: x.reshape(-1, n),
    'transpose': lambda x, k, n: anp.transpose(x),
    'transpose-axes': lambda x, k, n: anp.transpose(x, (1, 2, 0)),
    'T': lambda x, k, n: x.T,
    'swapaxes': lambda x, k, n: anp.swapaxes(x, 0, -1),
    'moveaxis': lambda x, k, n: anp.moveaxis(x, 0, 2),
    'expand_dims': lambda x, k, n: anp.expand_dims(x, 1),
    'squeeze': lambda x, k, n: anp.squeeze(x[:, None]),
    'broadcast_to': lambda x, k, n: anp.broadcast_to(x, (2, k, n, n)),
    'ravel': lambda x, k, n: anp.ravel(x),
    'trace': lambda x, k, n: anp.trace(x),
    'diagonal': lambda x, k, n: anp.diagonal(x),
    'sum_to': lambda x, k, n: anp.sum_to(x, (1, n)),
    'atleast_2d': lambda x, k, n: anp.atleast_2d(x[0, 0]),
}


def index_case(make_index):
    def case(draw, r, k, n):
        index = make_index(r, k, n)
        return (lambda x: x[index]), (vals(r, (k, n, n)),), (0,)
    return case


INDICES = {     # repeated entries in an index array: the adjoint must add them up
    'int': lambda r, k, n: 0,
    'last': lambda r, k, n: -1,
    'column': lambda r, k, n: (slice(None), slice(None), 0),
    'ellipsis': lambda r, k, n: (Ellipsis, n - 1),
    'slices': lambda r, k, n: (slice(None, None, -1), slice(1, None)),
    'newaxis': lambda r, k, n: (slice(None), None, 0),
    'stack-array': lambda r, k, n: np.array([k - 1, 0, k - 1]),
    'row-array': lambda r, k, n: (Ellipsis, np.array([0, n - 1, 0])),
    'two-arrays': lambda r, k, n: (np.array([k - 1, 0, k - 1]), np.array([0, n - 1, 0])),
    'mask': lambda r, k, n: r.uniform(size=(k, n, n)) > 0.4,
    'matrix-mask': lambda r, k, n: (Ellipsis, np.eye(n, dtype=bool)),
    'mixed': lambda r, k, n: (np.array([k - 1, 0]), slice(None), 0),
}


def concatenate_case(draw, r, k, n):
    axis = draw(st.integers(-3, 2))
    s2 = [k, n, n]
    s2[axis] = 2
    return ((lambda x, y: anp.concatenate([x, y, x], axis=axis)),
            (vals(r, (k, n, n)), vals(r, tuple(s2))), (0, 1))


def stack_case(draw, r, k, n):
    axis = draw(st.integers(-4, 3))
    return (lambda x, y: anp.stack([x, y], axis=axis)), (vals(r, (k, n, n)), vals(r, (k, n, n))), (0, 1)


def hvstack_case(fn):
    def case(draw, r, k, n):
        shape = draw(st.sampled_from([(k, n), (n,), (k, n, n)]))
        return (lambda x, y: fn([x, y])), (vals(r, shape), vals(r, shape)), (0, 1)
    return case


def where_case(draw, r, k, n):
    cond = r.uniform(size=draw(st.sampled_from([(k, n, n), (k, 1, 1), (n,), (k, n, 1)]))) > 0.5
    sy = other_operand_shape(draw, k, n)
    return (lambda x, y: anp.where(cond, x, y)), (vals(r, (k, n, n)), vals(r, sy)), (0, 1)


def clip_case(draw, r, k, n):
    # entries at least 0.1 away from the bounds -0.5 and 1.5
    x = away_from_zero(r, (k, n, n), 0.6, 1.4) + np.where(r.uniform(size=(k, n, n)) > 0.5, 1.0, 0.0)
    return (lambda x: anp.clip(x, -0.5, 1.5)), (x,), (0,)


def of_matrices(op):
    def case(draw, r, k, n):
        return op, (matrices(r, k, n),), (0,)
    return case


def solve_case(draw, r, k, n):
    sb = draw(st.sampled_from([(n,), (k, n, 2), (n, 3), (2, k, n, 1)]))
    return anp.linalg.solve, (matrices(r, k, n), vals(r, sb)), (0, 1)


def spread(r, k, n):
    """A stack of k matrices whose eigenvalues (those of its lower triangle too) and singular
    values are real, distinct and at least about 1 apart (Gershgorin discs apart)."""
    return matrices(r, k, n) + 3.0 * np.diag(np.arange(n))


def joined(parts):
    return anp.concatenate([anp.ravel(p) for p in parts])


def of_spread(op):
    def case(draw, r, k, n):
        return op, (spread(r, k, n),), (0,)
    return case


def norm_case(draw, r, k, n):
    axis = draw(st.sampled_from([None, -1, 0, 1, (-2, -1), (0, 2), (1, 2)]))
    keepdims = draw(st.booleans())
    ord_ = 2 if isinstance(axis, int) and draw(st.booleans()) else None
    return (lambda a: anp.linalg.norm(a, ord=ord_, axis=axis, keepdims=keepdims)), (matrices(r, k, n),), (0,)


def at_case(kind):
    """x.at[index].<kind>(v) on a stack, differentiated w.r.t. x and v."""
    def case(draw, r, k, n):
        index = draw(st.sampled_from([
            (k - 1, slice(None), 0), (Ellipsis, n - 1), np.array([k - 1, 0, k - 1]),
            (slice(None), np.array([0, n - 1, 0]), np.array([n - 1, 0, n - 1])),
            (np.array([0, k - 1]), slice(None), np.array([n - 1, 0]))]))
        if kind == 'multiply' and not _is_basic(index):
            index = (Ellipsis, n - 1)           # multiply refuses repeated entries
        x = vals(r, (k, n, n))
        v = vals(r, np.broadcast_to(x, x.shape)[index].shape)
        return (lambda x, v: getattr(anp.at(x)[index], kind)(v)), (x, v), (0, 1)
    return case


# numpy functions made of the primitives (nestad/numpy/_more.py): their rules are the
# primitives', but the way they combine them (indices, choices, tie handling) is theirs
COMPOSITES = {
    'sinc': lambda x, k, n: anp.sinc(x),
    'sinc-near-0': lambda x, k, n: anp.sinc(x * 1e-3),          # the series branch
    'fmax': lambda x, k, n: anp.fmax(x, x[..., ::-1] + 0.05),
    'fmin': lambda x, k, n: anp.fmin(x[::-1] - 0.05, x),
    'rot90': lambda x, k, n: anp.rot90(x, k=3, axes=(1, 2)),
    'pad': lambda x, k, n: anp.pad(x, ((0, 1), (1, 0), (0, 0))),
    'gradient': lambda x, k, n: anp.stack(anp.gradient(x)) if k > 1 and n > 1 else x,
    'partition': lambda x, k, n: anp.partition(x, 0, axis=-1),
    'select': lambda x, k, n: anp.select([x > 0.3, x < -0.3], [x * x, -x], 0.0),
    'nan_to_num': lambda x, k, n: anp.nan_to_num(x),
    'column_stack': lambda x, k, n: anp.column_stack([x[0], x[-1]]),
    'rollaxis': lambda x, k, n: anp.rollaxis(x, 2),
    'atleast_3d': lambda x, k, n: anp.atleast_3d(x[0]),
    'rad2deg': lambda x, k, n: anp.rad2deg(x),
    'astype': lambda x, k, n: anp.astype(x, np.longdouble),      # (float32 would defeat the FD check)
}

def banded_case(kind):
    """The banded basis's dense form (nestad/numpy/_banded.py: diagonals of an n x m
    matrix from vectors, with stack axes) and its adjoint (one diagonal of a stack)."""
    def case(draw, r, k, n):
        from nestad.numpy._banded import banded_dense, banded_take
        m = max(1, n + draw(st.integers(-1, 1)))
        o1, o2 = draw(st.lists(st.integers(-m, n), min_size=2, max_size=2, unique=True))
        if kind == 'take':
            return (lambda x: banded_take(x, offset=o1, m=m)), (vals(r, (k, n, m)),), (0,)
        return ((lambda a, b: banded_dense(a, b, offsets=(o1, o2), shape=(n, m))),
                (vals(r, (k, m)), vals(r, (m,))), (0, 1))
    return case


CASES = {f'unary-{n}': unary_case(n) for n in UNARY}
CASES.update({f'composite-{n}': of_stack(op) for n, op in COMPOSITES.items()})
CASES.update({f'binary-{n}': binary_case(n) for n in BINARY})
CASES.update({f'reduce-{n}': reduction_case(n) for n in ('sum', 'mean', 'prod', 'max', 'min')})
CASES.update({f'shape-{n}': of_stack(op) for n, op in SHAPE_OPS.items()})
CASES.update({f'index-{n}': index_case(ix) for n, ix in INDICES.items()})
CASES.update({
    'cumsum': cumsum_case, 'cumprod': cumprod_case, 'logsumexp': logsumexp_case,
    'vecdot': two_operand_case(anp.vecdot, lambda k, n: [((k, n), (k, n)), ((k, n, n), (n,)),
                                                         ((n,), (k, 1, n))]),
    'matmul': two_operand_case(anp.matmul, MATMUL_SHAPES),
    'matmul-operator': two_operand_case(lambda a, b: a @ b, MATMUL_SHAPES),
    'dot': two_operand_case(anp.dot, DOT_SHAPES),
    'inner': two_operand_case(anp.inner, lambda k, n: [((k, n), (k, n)), ((n,), (k, n)), ((k, n, n), (n,))]),
    'outer': two_operand_case(anp.outer, lambda k, n: [((k,), (n,)), ((k, n), (n,))]),
    'vdot': two_operand_case(anp.vdot, lambda k, n: [((k, n), (k, n)), ((k, n, n), (k, n, n))]),
    'einsum': einsum_case,
    'concatenate': concatenate_case, 'stack': stack_case,
    'hstack': hvstack_case(anp.hstack), 'vstack': hvstack_case(anp.vstack),
    'where': where_case, 'clip': clip_case,
    'linalg-det': of_matrices(anp.linalg.det),
    'linalg-slogdet': of_matrices(lambda a: anp.linalg.slogdet(a)[1]),
    'linalg-inv': of_matrices(anp.linalg.inv),
    'linalg-cholesky': of_matrices(lambda a: anp.linalg.cholesky(a @ anp.swapaxes(a, -1, -2))),
    'linalg-solve': solve_case, 'linalg-norm': norm_case,
    'einsum-3': einsum3_case, 'tensordot': tensordot_case,
    'kron': two_operand_case(anp.kron, lambda k, n: [((k, n), (n, 2)), ((k,), (k, n, 1))]),
    'linalg-eigh': of_spread(lambda a: joined(anp.linalg.eigh(a))),
    'linalg-eigvalsh': of_spread(lambda a: anp.linalg.eigvalsh(a, 'U')),
    'linalg-eig': of_spread(lambda a: joined(anp.linalg.eig(a))),
    'linalg-eigvals': of_spread(anp.linalg.eigvals),
    'linalg-svd': of_spread(lambda a: joined(anp.linalg.svd(a))),
    'linalg-svdvals': of_spread(lambda a: anp.linalg.svd(a, compute_uv=False)),
    'linalg-pinv': of_spread(anp.linalg.pinv),
    'linalg-matrix_power': of_matrices(lambda a: anp.linalg.matrix_power(a, 3)),
    'linalg-norm-spectral': of_spread(lambda a: joined([anp.linalg.norm(a, o, (-2, -1))
                                                        for o in ('nuc', 2, -2)])),
    'at-set': at_case('set'), 'at-add': at_case('add'), 'at-multiply': at_case('multiply'),
    'banded_dense': banded_case('dense'), 'banded_take': banded_case('take'),
})
CONVOLVE_SHAPES = lambda k, n: [((k,), (n,)), ((n,), (k,)), ((k * n,), (n,)), ((1,), (n,))]  # noqa: E731
CASES.update({f'{name}-{mode}': two_operand_case(lambda a, v, f=getattr(anp, name), m=mode: f(a, v, m),
                                                 CONVOLVE_SHAPES)
              for name in ('convolve', 'correlate') for mode in ('full', 'same', 'valid')})


# ---------------------------------------------------------------- every primitive has a case

COVERED_BY = {'getitem': 'index-', 'scatter_add': 'index-', 'at.set': 'at-set', 'at.add': 'at-add',
              'astype': 'composite-astype', 'max': 'reduce-max', 'min': 'reduce-min',
              'sum_to': 'shape-sum_to', 'broadcast_to': 'shape-broadcast_to'}


def test_every_array_primitive_has_a_stacked_case():
    from nestad import registry
    for qualname in registry.PRIMITIVES:
        if not qualname.startswith('numpy.') or qualname in registry.USER:
            continue
        name = qualname[len('numpy.'):]
        wanted = COVERED_BY.get(name, name.split('.')[-1])
        assert any(wanted in case for case in CASES), f"{qualname} has no stacked property case"


# ---------------------------------------------------------------- checks

def fd_gradient(F, args, j, h=H):
    x = np.array(args[j], dtype=float)
    g = np.zeros(x.shape)
    for idx in np.ndindex(*x.shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += h
        xm[idx] -= h
        a_p, a_m = list(args), list(args)
        a_p[j], a_m[j] = xp, xm
        g[idx] = (F(*a_p) - F(*a_m)) / (2 * h)
    return g


def scale(*arrays):
    return 1.0 + max(float(np.max(np.abs(a), initial=0.0)) for a in arrays)


def close(actual, expected, tol, what):
    actual = np.asarray(actual, dtype=float)
    assert actual.shape == np.shape(expected), f"{what}: shape {actual.shape} != {np.shape(expected)}"
    err = float(np.max(np.abs(actual - expected), initial=0.0))
    assert err <= tol * scale(expected), f"{what}: max error {err:.3g}\n{actual}\n{expected}"


def scalarised(f, out_shape, r):
    w = r.uniform(0.5, 1.5, size=out_shape)
    u = r.uniform(0.5, 1.5, size=out_shape)

    def F(*args):
        y = f(*args)
        return anp.sum(w * y) + 0.5 * anp.sum(u * y * y)
    return F


@pytest.mark.parametrize('stack', ['k==n', 'k!=n'])
@pytest.mark.parametrize('name', sorted(CASES))
@SETTINGS
@given(data=st.data())
def test_gradients_and_hvps_of_stacked_inputs_agree_across_modes_and_with_fd(name, stack, data):
    n = data.draw(st.integers(1, 3), label='n')
    if stack == 'k==n':
        k = n
    else:
        k = data.draw(st.sampled_from([m for m in (1, 2, 3, 4) if m != n]), label='k')
    r = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1), label='seed'))
    f, args, argnums = CASES[name](data.draw, r, k, n)
    out_shape = np.shape(nd.primal_value(f(*args)))
    F = scalarised(f, out_shape, r)

    gr = nd.gradient_r(F, argnums=argnums)(*args)
    gf = nd.gradient_f(F, argnums=argnums)(*args)
    for j, a, b in zip(argnums, gr, gf):
        assert np.shape(a) == np.shape(args[j]) and np.shape(b) == np.shape(args[j])
        close(a, b, AD_TOL, f"gradient_r vs gradient_f, argument {j}")
        fd = fd_gradient(F, args, j)
        close(a, fd, FD_TOL, f"gradient_r vs FD, argument {j}")
        close(b, fd, FD_TOL, f"gradient_f vs FD, argument {j}")

    # second order, with respect to the first argument along a random direction v
    x, rest = args[0], args[1:]
    v = r.uniform(-1, 1, size=np.shape(x))
    G = lambda x: F(x, *rest)                                     # noqa: E731
    grad_r, grad_f = nd.gradient_r(G), nd.gradient_f(G)
    hv = {
        'fr': nd.jvp(grad_r, (x,), (v,))[1],
        'ff': nd.jvp(grad_f, (x,), (v,))[1],
        'rr': nd.vjp(grad_r, x)[1](v)[0],                         # H symmetric: v^T H = H v
        'rf': nd.vjp(grad_f, x)[1](v)[0],
        'batched fr': np.tensordot(nd.hessian(G)(x), v, axes=np.ndim(x)),
    }
    fd = (grad_r(x + H * v) - grad_r(x - H * v)) / (2 * H)
    for mode, value in hv.items():
        close(value, hv['fr'], AD2_TOL, f"Hv {mode} vs fr")
        close(value, fd, FD2_TOL, f"Hv {mode} vs FD")
