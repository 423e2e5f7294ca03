"""Differential fuzzing of nestad.numpy's manipulation, statistics, contraction and
linear-algebra functions against numpy (values), JAX float64 (derivatives) and central
differences.

Each case is one call of one function (repeat, tile, tril, roll, split, diag, sort, take,
linspace, diff, r_, pad, var, average, cov, quantile, cumprod, fmod, einsum, tensordot,
kron, cross, eigh, svd, pinv, norm...) with random arguments: shapes with empty and size-1
axes, 0-d inputs, negative and out-of-range axes and offsets, ddof >= n, repeated labels,
transposed (non-contiguous) inputs, float32 inputs, plain integer operands beside
perturbed ones.  The function is spelled as nestad.numpy's or as numpy's own (dispatch).
Compared:

* values: the primal of a forward and of a reverse run against numpy's call, bit for bit
  (dtype, shape, signed zeros, nan);
* derivatives: jvp and vjp of every output, gradient_r and gradient_f of a weighted sum,
  the Hessian in the four pairings jacobian_{f,r}(gradient_{f,r}) against JAX (and each
  other), jacobian_f against jacobian_r, a derivative nested inside gradient_r (a
  Hessian-vector product) against JAX; central differences decide a disagreement;
* staged against eager (nd.stage of the value, bit for bit, and of gradient_r);
* float32: values bit for bit with numpy, gradients float32.

Mismatches are classified as in fuzz_peers.py (nestad-modes, kink, nonfinite,
NESTAD-WRONG, peers-wrong, fd-unsure, nestad-error...).

    python benchmarks/fuzz_numpy.py --cases 2000 --seed 0 --log /tmp/fn.jsonl
    python benchmarks/fuzz_numpy.py --cases 1 --seed 0 --first 17 --show
    python benchmarks/fuzz_numpy.py --only eigh,svd --cases 300
"""
import argparse
import collections
import json
import os
import sys
import time
import traceback
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import fuzz_peers  # noqa: E402  (also configures JAX: float64, op by op, a compilation cache)
from fuzz_peers import close, hessian_blocks, jax  # noqa: E402

jnp = getattr(fuzz_peers, 'jnp', None)

import nestad as nd  # noqa: E402
import nestad.numpy as anp  # noqa: E402

warnings.filterwarnings('ignore')


# ================================================================ backends

class B:
    """A backend: ``B.np`` is the numpy namespace (numpy, nestad.numpy or jax.numpy),
    ``B.la`` its linalg."""
    def __init__(self, name, np_, la):
        self.name, self.np, self.la = name, np_, la


NUMPY = B('numpy', np, np.linalg)
NESTAD = B('nestad', anp, anp.linalg)
DISPATCH = B('dispatch', np, np.linalg)     # numpy's own functions on nestad values
JAX = B('jax', jnp, jnp.linalg) if jax is not None else None


class Case:
    """One call: ``f(B, *xs)`` returns a list of float outputs; ``xs`` are the
    differentiated inputs; ``canon(outs)`` (optional) gives constant multipliers making
    outputs independent of a library's sign choices (eigenvectors), from that library's
    own plain values."""
    def __init__(self, name, text, xs, f, jax_ok=True, canon=None, kink=False,
                 fd_ok=True, stage_ok=True, hess_ok=True):
        self.name, self.text, self.xs, self.f = name, text, xs, f
        self.jax_ok, self.canon, self.kink, self.fd_ok = jax_ok, canon, kink, fd_ok
        self.stage_ok, self.hess_ok = stage_ok, hess_ok


# ================================================================ inputs

SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0]


def draw(rng, shape, special=0.1, tie=0.1):
    x = rng.uniform(-2.0, 2.0, size=shape)
    flat = x.reshape(-1)
    if rng.random() < special:
        for i in range(flat.size):
            if rng.random() < 0.3:
                flat[i] = SPECIAL[rng.integers(len(SPECIAL))]
    if rng.random() < tie and flat.size >= 2:
        i, j = rng.choice(flat.size, 2, replace=False)
        flat[i] = flat[j]
    return x


def has_ties(x):
    v = np.ravel(x)
    return v.size != np.unique(v).size


def has_zeros(x):
    return bool(np.any(np.asarray(x) == 0))


def pick(rng, seq):
    return seq[int(rng.integers(len(seq)))]


SHAPES_ND = [(3,), (4,), (1,), (2, 3), (3, 1), (1, 3), (3, 3), (2, 2, 2), (2, 3, 2), (0,), (2, 0),
             (1, 1)]


def shape_nd(rng, min_nd=1, nonempty=False):
    while True:
        s = pick(rng, SHAPES_ND + ([()] if min_nd == 0 else []))
        if len(s) >= min_nd and (not nonempty or 0 not in s):
            return s


def axis_of(rng, nd_, none=True):
    if nd_ == 0:
        return None
    if none and rng.random() < 0.25:
        return None
    return int(rng.integers(-nd_, nd_))


def axes_tuple(rng, nd_):
    k = int(rng.integers(1, nd_ + 1))
    ax = [int(a) for a in rng.choice(nd_, k, replace=False)]
    return tuple(a - nd_ if rng.random() < 0.3 else a for a in ax)


# ================================================================ cases
# Each maker takes rng and returns a Case, or None to skip.

MAKERS = {}


def maker(*names):
    def deco(fn):
        for n in names:
            MAKERS[n] = fn
        return fn
    return deco


def _out(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


@maker('repeat')
def _repeat(rng):
    s = shape_nd(rng, 0)
    ax = axis_of(rng, len(s))
    n = int(np.prod(s)) if ax is None else s[ax]
    reps = int(rng.integers(0, 4)) if rng.random() < 0.5 else rng.integers(0, 3, size=n)
    x = draw(rng, s)
    return Case('repeat', f"shape={s} repeats={reps!r} axis={ax}", [x],
                lambda B, x: [B.np.repeat(x, reps, axis=ax)])


@maker('tile')
def _tile(rng):
    s = shape_nd(rng, 0)
    reps = pick(rng, [2, 0, 1, (2,), (1, 2), (2, 1, 2), (0, 2), (3,)])
    return Case('tile', f"shape={s} reps={reps}", [draw(rng, s)],
                lambda B, x: [B.np.tile(x, reps)])


@maker('tril', 'triu')
def _tri(rng):
    s = shape_nd(rng, 1)
    k = int(rng.integers(-4, 5))
    name = pick(rng, ['tril', 'triu'])
    return Case(name, f"shape={s} k={k}", [draw(rng, s)],
                lambda B, x: [getattr(B.np, name)(x, k)])


@maker('roll')
def _roll(rng):
    s = shape_nd(rng, 0)
    nd_ = len(s)
    r = rng.random()
    if r < 0.3 or nd_ == 0:
        shift, ax = int(rng.integers(-7, 8)), None
    elif r < 0.7:
        shift, ax = int(rng.integers(-7, 8)), axis_of(rng, nd_, none=False)
    else:
        ax = axes_tuple(rng, nd_)
        shift = tuple(int(rng.integers(-5, 6)) for _ in ax) if rng.random() < 0.7 else int(rng.integers(-5, 6))
    return Case('roll', f"shape={s} shift={shift} axis={ax}", [draw(rng, s)],
                lambda B, x: [B.np.roll(x, shift, axis=ax)])


@maker('append')
def _append(rng):
    s = shape_nd(rng, 1)
    if rng.random() < 0.4:
        ax, t = None, pick(rng, [(), (2,), (1, 2)])
    else:
        ax = axis_of(rng, len(s), none=False)
        t = list(s)
        t[ax] = int(rng.integers(0, 3))
        t = tuple(t)
    const = rng.random() < 0.3
    y = draw(rng, t)
    if const:
        yc = np.round(y * 3).astype(int)
        return Case('append', f"shape={s} values=int{t} axis={ax}", [draw(rng, s)],
                    lambda B, x: [B.np.append(x, yc, axis=ax)])
    return Case('append', f"shapes={s},{t} axis={ax}", [draw(rng, s), y],
                lambda B, x, y: [B.np.append(x, y, axis=ax)])


@maker('split', 'array_split', 'hsplit', 'vsplit', 'dsplit')
def _split(rng):
    name = pick(rng, ['split', 'array_split', 'array_split', 'hsplit', 'vsplit', 'dsplit'])
    s = shape_nd(rng, {'vsplit': 2, 'dsplit': 3}.get(name, 1), nonempty=rng.random() < 0.8)
    ax = axis_of(rng, len(s), none=False) if name in ('split', 'array_split') else \
        {'vsplit': 0, 'dsplit': 2, 'hsplit': 1 if len(s) > 1 else 0}[name]
    n = s[ax]
    if rng.random() < 0.5:
        if name == 'array_split':
            sec = int(rng.integers(1, 5))
        else:
            divs = [d for d in range(1, n + 1) if n % d == 0] or [1]
            sec = pick(rng, divs)
    else:
        sec = sorted(int(i) for i in rng.integers(-1, n + 2, size=int(rng.integers(1, 3))))
        if rng.random() < 0.2:
            sec = sec[::-1]
    if name in ('split', 'array_split'):
        f = lambda B, x: _out(getattr(B.np, name)(x, sec, axis=ax))      # noqa: E731
    else:
        f = lambda B, x: _out(getattr(B.np, name)(x, sec))                # noqa: E731
    return Case(name, f"shape={s} sections={sec} axis={ax}", [draw(rng, s)], f)


@maker('diag', 'diagflat')
def _diag(rng):
    name = pick(rng, ['diag', 'diag', 'diagflat'])
    s = pick(rng, [(3,), (1,), (0,), (2, 3), (3, 3), (3, 1)] + ([(2, 2)] if name == 'diagflat' else []))
    k = int(rng.integers(-4, 5))
    return Case(name, f"shape={s} k={k}", [draw(rng, s)],
                lambda B, x: [getattr(B.np, name)(x, k)])


@maker('flip', 'flipud', 'fliplr')
def _flip(rng):
    name = pick(rng, ['flip', 'flip', 'flipud', 'fliplr'])
    s = shape_nd(rng, 2 if name == 'fliplr' else 1)
    if name == 'flip':
        r = rng.random()
        ax = None if r < 0.3 else (axis_of(rng, len(s), none=False) if r < 0.7 else axes_tuple(rng, len(s)))
        return Case('flip', f"shape={s} axis={ax}", [draw(rng, s)], lambda B, x: [B.np.flip(x, ax)])
    return Case(name, f"shape={s}", [draw(rng, s)], lambda B, x: [getattr(B.np, name)(x)])


@maker('sort')
def _sort(rng):
    s = shape_nd(rng, 1)
    ax = axis_of(rng, len(s)) if rng.random() < 0.3 else -1
    x = draw(rng, s, tie=0.3)
    return Case('sort', f"shape={s} axis={ax}", [x], lambda B, x: [B.np.sort(x, axis=ax)],
                kink=has_ties(x), stage_ok=False)


@maker('take', 'take_along_axis')
def _take(rng):
    s = shape_nd(rng, 1, nonempty=True)
    x = draw(rng, s)
    if rng.random() < 0.5:
        ax = axis_of(rng, len(s))
        n = x.size if ax is None else s[ax]
        mode = pick(rng, ['raise', 'wrap', 'clip'])
        lo, hi = (-n, n) if mode == 'raise' else (-2 * n, 2 * n + 1)
        idx = rng.integers(lo, hi, size=pick(rng, [(), (3,), (2, 2)]))
        if rng.random() < 0.1:                 # numpy reads bools as the indices 0 and 1
            idx = rng.random(size=3) < 0.5
        jax_mode = None if mode == 'raise' else mode

        def f(B, x):
            if B is JAX:
                return [jnp.take(x, idx, axis=ax, mode=jax_mode)]
            return [B.np.take(x, idx, axis=ax, mode=mode)]
        return Case('take', f"shape={s} idx={idx.tolist()} axis={ax} mode={mode}", [x], f)
    ax = axis_of(rng, len(s))
    if ax is None:
        idx = rng.integers(0, x.size, size=4)
    else:
        shp = list(s)
        shp[ax] = int(rng.integers(1, 4))
        idx = rng.integers(-s[ax], s[ax], size=shp)
    return Case('take_along_axis', f"shape={s} idx={idx.tolist()} axis={ax}", [x],
                lambda B, x: [B.np.take_along_axis(x, idx, axis=ax)])


@maker('linspace')
def _linspace(rng):
    s = pick(rng, [(), (), (2,), (2, 1)])
    num = int(pick(rng, [0, 1, 2, 5, 7]))
    endpoint = bool(rng.random() < 0.7)
    ax = pick(rng, [0, -1]) if s else 0
    both = rng.random() < 0.6
    a, b = draw(rng, s), draw(rng, s, special=0.3)
    if not s:
        a, b = float(a), float(b)
    retstep = bool(rng.random() < 0.2)

    def out(r):
        return [r[0], np.asarray(r[1])] if retstep else [r]

    if both:
        def f(B, a, b):
            r = B.np.linspace(a, b, num, endpoint=endpoint, retstep=retstep, axis=ax)
            return [r[0], r[1] + 0.0 * a] if retstep else [r]
        return Case('linspace', f"start,stop shape={s} num={num} endpoint={endpoint} axis={ax} "
                    f"retstep={retstep}", [a, b], f)
    stop = 1.5 if not s else np.full(s, 1.5)

    def f1(B, a):
        r = B.np.linspace(a, stop, num, endpoint=endpoint, retstep=retstep, axis=ax)
        return [r[0], r[1] + 0.0 * a] if retstep else [r]
    return Case('linspace', f"start shape={s} stop=1.5 num={num} endpoint={endpoint} axis={ax} "
                f"retstep={retstep}", [a], f1)


@maker('diff')
def _diff(rng):
    s = shape_nd(rng, 1)
    ax = axis_of(rng, len(s), none=False)
    n = int(pick(rng, [0, 1, 1, 2, 3]))
    kind = pick(rng, ['none', 'none', 'scalar', 'array', 'const'])
    x = draw(rng, s)
    if kind == 'none':
        return Case('diff', f"shape={s} n={n} axis={ax}", [x], lambda B, x: [B.np.diff(x, n, axis=ax)])
    if kind == 'const':
        return Case('diff', f"shape={s} n={n} axis={ax} prepend=1.5 append=-0.0", [x],
                    lambda B, x: [B.np.diff(x, n, axis=ax, prepend=1.5, append=-0.0)])
    if kind == 'scalar':
        p = float(draw(rng, ()))
        return Case('diff', f"shape={s} n={n} axis={ax} prepend=<x1 scalar>", [x, p],
                    lambda B, x, p: [B.np.diff(x, n, axis=ax, prepend=p)])
    t = list(s)
    t[ax] = 2
    return Case('diff', f"shape={s} n={n} axis={ax} append=<x1 {tuple(t)}>", [x, draw(rng, tuple(t))],
                lambda B, x, p: [B.np.diff(x, n, axis=ax, append=p)])


@maker('r_', 'c_')
def _rc(rng):
    name = pick(rng, ['r_', 'r_', 'c_'])
    form = int(rng.integers(5))
    if form == 0:
        a, b = draw(rng, (3,)), draw(rng, (2,))
        return Case(name, "[x, y] 1-d", [a, b], lambda B, x, y: [getattr(B.np, name)[x, y]],
                    stage_ok=True) if name == 'r_' else \
            Case(name, "[x, y] 1-d equal", [a, draw(rng, (3,))], lambda B, x, y: [B.np.c_[x, y]])
    if form == 1:
        a = draw(rng, (2,))
        return Case(name, "[x, 1.5, 0:3]", [a], lambda B, x: [getattr(B.np, name)[x, 1.5, 0:2]]) \
            if name == 'r_' else Case(name, "[x, x2]", [a], lambda B, x: [B.np.c_[x, 2.0 * x]])
    if form == 2:
        a, b = draw(rng, (2, 3)), draw(rng, (2, 3))
        d = pick(rng, ['0', '1', '-1'])
        return Case(name, f"['{d}', x, y] 2-d", [a, b],
                    lambda B, x, y: [getattr(B.np, name)[d, x, y]])
    if form == 3:
        a, b = draw(rng, (3,)), draw(rng, (3,))
        d = pick(rng, ['0,2', '1,2', '0,2,0', '0,3,-1', '1,2,0', '0,3,1'])
        return Case(name, f"['{d}', x, y] 1-d", [a, b], lambda B, x, y: [getattr(B.np, name)[d, x, y]])
    a = draw(rng, ())
    return Case(name, "[x scalar, 0-d 2.0, -1.0]", [float(a)],
                lambda B, x: [getattr(B.np, name)[x, np.float64(2.0), -1.0]])


@maker('pad')
def _pad(rng):
    s = shape_nd(rng, 1)
    mode = pick(rng, ['constant', 'edge', 'reflect', 'symmetric', 'wrap'])
    w = pick(rng, [1, 2, (1, 2), ((0, 1),), None, 0, 3])
    if w is None:
        w = tuple((int(rng.integers(0, 4)), int(rng.integers(0, 4))) for _ in s)
    x = draw(rng, s)
    if mode == 'constant' and rng.random() < 0.4:
        c = float(draw(rng, ()))
        return Case('pad', f"shape={s} width={w} mode=constant constant_values=<x1>", [x, c],
                    lambda B, x, c: [B.np.pad(x, w, mode='constant', constant_values=c)])
    kw = {'constant_values': pick(rng, [0, -0.0, 1.5, (1.0, -2.0)])} if mode == 'constant' else {}
    return Case('pad', f"shape={s} width={w} mode={mode} {kw}", [x],
                lambda B, x: [B.np.pad(x, w, mode=mode, **kw)])


@maker('var', 'std', 'nanvar', 'nanstd')
def _var(rng):
    name = pick(rng, ['var', 'std', 'nanvar', 'nanstd'])
    s = shape_nd(rng, 0)
    r = rng.random()
    ax = None if r < 0.3 or not s else (axis_of(rng, len(s), none=False) if r < 0.7 else axes_tuple(rng, len(s)))
    ddof = int(pick(rng, [0, 0, 1, 2, 5]))
    keep = bool(rng.random() < 0.3)
    x = draw(rng, s, tie=0.0)
    if name.startswith('nan') and x.size and rng.random() < 0.7:
        x.reshape(-1)[rng.integers(x.size)] = np.nan
    n = x.size if ax is None else int(np.prod([s[a] for a in (ax if isinstance(ax, tuple) else (ax,))]))
    return Case(name, f"shape={s} axis={ax} ddof={ddof} keepdims={keep}", [x],
                lambda B, x: [getattr(B.np, name)(x, axis=ax, ddof=ddof, keepdims=keep)],
                kink=name.endswith('std') and n - (np.isnan(x).sum() if name.startswith('nan') else 0) <= 1)


@maker('average')
def _average(rng):
    s = shape_nd(rng, 1, nonempty=True)
    ax = axis_of(rng, len(s))
    if ax is not None and rng.random() < 0.3:
        ax = axes_tuple(rng, len(s))
    kind = pick(rng, ['none', 'full', 'full_const', 'vec', 'vec_const'])
    returned = bool(rng.random() < 0.3)
    keep = bool(rng.random() < 0.2)
    x = draw(rng, s)

    def res(r):
        return list(r) if returned else [r]
    if kind == 'none':
        return Case('average', f"shape={s} axis={ax} returned={returned} keepdims={keep}", [x],
                    lambda B, x: res(B.np.average(x, axis=ax, returned=returned, keepdims=keep)))
    axt = None if ax is None else (ax if isinstance(ax, tuple) else (ax,))
    ws = s if kind.startswith('full') or ax is None else tuple(s[a] for a in axt)
    w = rng.uniform(0.2, 2.0, size=ws)
    if kind.endswith('const'):
        return Case('average', f"shape={s} axis={ax} weights=const{ws} returned={returned}", [x],
                    lambda B, x: res(B.np.average(x, axis=ax, weights=w, returned=returned,
                                                  keepdims=keep)))
    return Case('average', f"shape={s} axis={ax} weights=<x1 {ws}> returned={returned}", [x, w],
                lambda B, x, w: res(B.np.average(x, axis=ax, weights=w, returned=returned,
                                                 keepdims=keep)))


@maker('cov', 'corrcoef')
def _cov(rng):
    name = pick(rng, ['cov', 'cov', 'corrcoef'])
    s = pick(rng, [(3,), (2, 4), (3, 5), (1, 4), (4, 2), (2, 3)])
    rowvar = bool(rng.random() < 0.7)
    x = draw(rng, s, tie=0.0)
    nobs = s[-1] if (rowvar or len(s) == 1) else s[0]
    xs = [x]
    usey = rng.random() < 0.3
    if usey:
        ys = (nobs,) if rowvar else (nobs,)
        xs.append(draw(rng, ys))
    if name == 'corrcoef':
        if usey:
            return Case(name, f"shape={s} y rowvar={rowvar}", xs,
                        lambda B, x, y: [B.np.corrcoef(x, y, rowvar=rowvar)])
        return Case(name, f"shape={s} rowvar={rowvar}", xs, lambda B, x: [B.np.corrcoef(x, rowvar=rowvar)])
    bias = bool(rng.random() < 0.3)
    ddof = pick(rng, [None, None, 0, 1, 2, nobs, nobs + 1])
    fw = rng.integers(1, 4, size=nobs) if rng.random() < 0.3 else None
    aw_kind = pick(rng, [None, None, 'const', 'pert'])
    aw = rng.uniform(0.3, 2.0, size=nobs) if aw_kind else None
    text = f"shape={s} y={usey} rowvar={rowvar} bias={bias} ddof={ddof} fweights={fw} aweights={aw_kind}"
    if aw_kind == 'pert':
        xs.append(aw)

    def f(B, x, *rest):
        rest = list(rest)
        y = rest.pop(0) if usey else None
        a = rest.pop(0) if aw_kind == 'pert' else aw
        return [B.np.cov(x, y, rowvar=rowvar, bias=bias, ddof=ddof, fweights=fw, aweights=a)]
    return Case('cov', text, xs, f)


@maker('ptp')
def _ptp(rng):
    s = shape_nd(rng, 1, nonempty=True)
    ax = axis_of(rng, len(s))
    keep = bool(rng.random() < 0.3)
    x = draw(rng, s, tie=0.3)
    return Case('ptp', f"shape={s} axis={ax} keepdims={keep}", [x],
                lambda B, x: [B.np.ptp(x, axis=ax, keepdims=keep)], kink=has_ties(x))


@maker('nansum', 'nanmean', 'nanprod', 'nanmax', 'nanmin', 'nancumsum', 'nancumprod')
def _nanred(rng):
    name = pick(rng, ['nansum', 'nanmean', 'nanprod', 'nanmax', 'nanmin', 'nancumsum', 'nancumprod'])
    s = shape_nd(rng, 0)
    cum = 'cum' in name
    ax = axis_of(rng, len(s)) if cum or rng.random() < 0.7 or not s else axes_tuple(rng, len(s))
    x = draw(rng, s, tie=0.2)
    if x.size and rng.random() < 0.7:
        for _ in range(int(rng.integers(1, 3))):
            x.reshape(-1)[rng.integers(x.size)] = np.nan
    if x.ndim == 0 and rng.random() < 0.3:
        x = np.array(np.nan)
    keep = bool(rng.random() < 0.3)
    kw = {} if cum else {'keepdims': keep}
    kink = name in ('nanmax', 'nanmin') and has_ties(x[~np.isnan(x)]) or \
        name in ('nanprod', 'nancumprod') and has_zeros(x)
    return Case(name, f"shape={s} axis={ax} {kw} nans={int(np.isnan(x).sum())}", [x],
                lambda B, x: [getattr(B.np, name)(x, axis=ax, **kw)], kink=kink)


@maker('median', 'quantile', 'percentile')
def _quant(rng):
    name = pick(rng, ['median', 'quantile', 'percentile'])
    s = shape_nd(rng, 1)
    r = rng.random()
    ax = None if r < 0.3 else (axis_of(rng, len(s), none=False) if r < 0.7 else axes_tuple(rng, len(s)))
    keep = bool(rng.random() < 0.3)
    x = draw(rng, s, tie=0.2)
    if x.size and rng.random() < 0.1:
        x.reshape(-1)[rng.integers(x.size)] = np.nan
    if name == 'median':
        return Case(name, f"shape={s} axis={ax} keepdims={keep}", [x],
                    lambda B, x: [B.np.median(x, axis=ax, keepdims=keep)], kink=has_ties(x),
                    stage_ok=False)
    q = pick(rng, [0.5, 0.0, 1.0, 0.25, 0.3, [0.1, 0.9], [[0.2], [0.75]], 0.99])
    if name == 'percentile':
        q = np.multiply(q, 100.0).tolist() if isinstance(q, list) else q * 100
    method = pick(rng, ['linear', 'linear', 'lower', 'higher', 'nearest', 'midpoint'])
    q = np.asarray(q) if isinstance(q, list) and rng.random() < 0.5 else q
    return Case(name, f"shape={s} q={q!r} axis={ax} method={method} keepdims={keep}", [x],
                lambda B, x: [getattr(B.np, name)(x, q, axis=ax, method=method, keepdims=keep)],
                kink=has_ties(x), stage_ok=False, jax_ok=np.ndim(q) < 2)


@maker('cumprod')
def _cumprod(rng):
    s = shape_nd(rng, 0)
    ax = axis_of(rng, len(s))
    x = draw(rng, s, special=0.4)
    if x.size and rng.random() < 0.3:
        x.reshape(-1)[rng.integers(x.size)] = 0.0
    return Case('cumprod', f"shape={s} axis={ax}", [x], lambda B, x: [B.np.cumprod(x, axis=ax)])


@maker('fmod', 'copysign', 'heaviside', 'float_power')
def _binary(rng):
    name = pick(rng, ['fmod', 'copysign', 'heaviside', 'float_power'])
    s, t = pick(rng, [((3,), (3,)), ((2, 3), (3,)), ((), (3,)), ((2, 1), (1, 3)), ((), ())])
    x, y = draw(rng, s, special=0.3), draw(rng, t, special=0.3)
    if name == 'float_power':
        x = np.abs(x) + 0.5
    kink = {'fmod': bool(np.any(np.asarray(y) == 0)) or
            bool(np.any(np.abs(np.fmod(x, np.where(y == 0, 1, y))) < 1e-9)),
            'copysign': has_zeros(x) or has_zeros(y),
            'heaviside': has_zeros(x), 'float_power': False}[name]
    if rng.random() < 0.25:           # a plain operand
        which = int(rng.integers(2))
        c = (y if which else x)
        if rng.random() < 0.5 and name != 'float_power':
            c = np.round(np.asarray(c) * 2).astype(int)
        xs = [x] if which else [y]
        f = (lambda B, a: [getattr(B.np, name)(a, c)]) if which else \
            (lambda B, a: [getattr(B.np, name)(c, a)])
        return Case(name, f"shapes={s},{t} plain arg {which} dtype={np.asarray(c).dtype}", xs, f,
                    kink=kink)
    return Case(name, f"shapes={s},{t}", [x, y], lambda B, a, b: [getattr(B.np, name)(a, b)],
                kink=kink)


# ---------------------------------------------------------------- contractions

EINSUM_SPECS = [
    ('ij,jk->ik', [(2, 3), (3, 4)]), ('ij,jk', [(2, 3), (3, 2)]), ('ii->i', [(3, 3)]), ('ii', [(3, 3)]),
    ('i,i', [(3,), (3,)]), ('i,i->', [(3,), (3,)]), ('ij->', [(2, 3)]), ('ij->ji', [(2, 3)]),
    ('ji', [(2, 3)]), ('...ij,...jk->...ik', [(2, 2, 3), (3, 2)]), ('...ij,...jk', [(1, 2, 3), (2, 3, 2)]),
    ('ij,ij->ij', [(2, 3), (2, 3)]), ('iij->j', [(2, 2, 3)]), ('i,j,k->ijk', [(2,), (3,), (2,)]),
    ('bij,bjk->bik', [(2, 2, 3), (2, 3, 2)]), ('i...->...', [(3, 2)]), ('...,...', [(2, 3), (3,)]),
    ('ij,j->i', [(3, 3), (3,)]), ('ij,i->ij', [(2, 3), (2,)]), ('iji->j', [(2, 3, 2)]),
    ('ii,ij->j', [(3, 3), (3, 2)]), ('i,->i', [(3,), ()]), (',', [(), ()]), ('ab,cd->abcd', [(2, 1), (1, 2)]),
    ('ij,jk,kl->il', [(2, 3), (3, 2), (2, 2)]), ('iij,jkk->ik', [(2, 2, 3), (3, 2, 2)]),
    ('...i,...i->...', [(2, 3), (1, 3)]), ('ij,ij', [(2, 3), (2, 3)]), ('Ab,bC->AC', [(2, 2), (2, 3)]),
    ('i', [(3,)]), ('ijk->kji', [(2, 3, 2)]), ('ij,kj->ik', [(2, 3), (1, 3)]),
]


@maker('einsum')
def _einsum(rng):
    spec, shapes = pick(rng, EINSUM_SPECS)
    xs = [draw(rng, s) for s in shapes]
    nplain = 0
    if len(xs) > 1 and rng.random() < 0.2:
        nplain = 1
    plain = xs[:nplain]
    xs = xs[nplain:]
    opt = bool(rng.random() < 0.2)
    sub = rng.random() < 0.2 and '...' not in spec and '->' in spec
    if sub:
        ins, out = spec.split('->')
        letters = sorted(set(spec) - set(',->'))
        code = {c: i for i, c in enumerate(letters)}
        subs = [[code[c] for c in t] for t in ins.split(',')]
        outsub = [code[c] for c in out]

        def f(B, *ops):
            ops = plain + list(ops)
            args = []
            for o, sl in zip(ops, subs):
                args += [o, sl]
            return [B.np.einsum(*args, outsub, optimize=opt)]
    else:
        def f(B, *ops):
            return [B.np.einsum(spec, *(plain + list(ops)), optimize=opt)]
    return Case('einsum', f"{spec!r} shapes={shapes} plain={nplain} optimize={opt} sublist={sub}", xs, f)


@maker('dot')
def _dot(rng):
    s, t = pick(rng, [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 2)), ((2, 3), (3, 2)), ((2, 2, 3), (3, 2)),
                      ((2, 3), (2, 3, 2)), ((2, 2, 3), (2, 3, 2)), ((), (2, 3)), ((3,), ()), ((1, 3), (3, 1)),
                      ((2, 0), (0, 3))])
    x, y = draw(rng, s), draw(rng, t)
    if rng.random() < 0.2:
        yc = np.round(y * 2).astype(int)
        return Case('dot', f"{s}.{t} int b", [x], lambda B, a: [B.np.dot(a, yc)])
    return Case('dot', f"{s}.{t}", [x, y], lambda B, a, b: [B.np.dot(a, b)])


@maker('tensordot')
def _tensordot(rng):
    s, t, axes = pick(rng, [((2, 3), (3, 2), 1), ((2, 3), (2, 3), 2), ((2, 3, 2), (3, 2, 2), 2),
                            ((2, 3), (3, 2), ([1], [0])), ((2, 3, 2), (2, 2, 3), ([0, 1], [1, 2])),
                            ((2, 3), (2,), ([0], [0])), ((2,), (3,), 0), ((3, 2), (2, 3), (-1, 0)),
                            ((2, 3, 2), (3, 2), ([-2, -1], [0, 1]))])
    return Case('tensordot', f"{s}.{t} axes={axes}", [draw(rng, s), draw(rng, t)],
                lambda B, a, b: [B.np.tensordot(a, b, axes)])


@maker('kron')
def _kron(rng):
    s, t = pick(rng, [((2,), (3,)), ((2, 2), (2, 3)), ((), (2,)), ((2,), ()), ((2, 1), (3,)), ((3,), (2, 2)),
                      ((2, 1, 2), (2, 2)), ((), ())])
    return Case('kron', f"{s} x {t}", [draw(rng, s), draw(rng, t)], lambda B, a, b: [B.np.kron(a, b)])


@maker('cross')
def _cross(rng):
    s, t = pick(rng, [((3,), (3,)), ((2, 3), (3,)), ((2, 3), (2, 3)), ((3, 2), (3, 2)), ((2,), (3,)),
                      ((3,), (2,)), ((2, 2), (2, 2)), ((3, 3), (1, 3))])
    kw = {}
    if s == (3, 2):
        kw = dict(axisa=0, axisb=0, axisc=pick(rng, [0, -1]))
    elif rng.random() < 0.2 and len(s) == 2 and len(t) == 2 and s[-1] == 3 and t[-1] == 3:
        kw = dict(axisc=0)
    return Case('cross', f"{s} x {t} {kw}", [draw(rng, s), draw(rng, t)],
                lambda B, a, b: [B.np.cross(a, b, **kw)])


@maker('vecdot')
def _vecdot(rng):
    s, t, ax = pick(rng, [((3,), (3,), -1), ((2, 3), (3,), -1), ((2, 3), (2, 3), 0), ((2, 2, 3), (2, 3), -1),
                          ((3, 2), (3, 1), 0), ((1, 3), (2, 3), -1)])
    return Case('vecdot', f"{s}.{t} axis={ax}", [draw(rng, s), draw(rng, t)],
                lambda B, a, b: [B.np.vecdot(a, b, axis=ax)])


# ---------------------------------------------------------------- linear algebra

def _col_signs(v):
    """+-1 per column (the sign of its entry of largest magnitude): a constant that makes
    vectors independent of a library's choice of sign."""
    v = np.asarray(v)
    idx = np.argmax(np.abs(v), axis=-2)
    s = np.sign(np.take_along_axis(v, idx[..., None, :], axis=-2))
    return np.where(s == 0, 1.0, s)


def _sym(B, x):
    return x + B.np.swapaxes(x, -1, -2)


@maker('eigh', 'eigvalsh')
def _eigh(rng):
    name = pick(rng, ['eigh', 'eigh', 'eigvalsh'])
    s = pick(rng, [(2, 2), (3, 3), (4, 4), (2, 3, 3), (1, 1)])
    x = draw(rng, s, special=0.0, tie=0.0)
    w = np.linalg.eigvalsh(x + np.swapaxes(x, -1, -2))
    gap = np.min(np.diff(w, axis=-1)) if s[-1] > 1 else 1.0
    if rng.random() < 0.25:             # one triangle of a non-symmetric x, as numpy reads it
        uplo = pick(rng, ['L', 'U'])
        w1 = np.linalg.eigvalsh(x, uplo)
        gap1 = np.min(np.diff(w1, axis=-1)) if s[-1] > 1 else 1.0
        if name == 'eigvalsh':
            return Case(name, f"shape={s} UPLO={uplo}", [x], lambda B, x: [B.la.eigvalsh(x, uplo)],
                        kink=gap1 < 1e-6, jax_ok=False)

        def fu(B, x):
            r = B.la.eigh(x, uplo)
            return [r[0], r[1]]
        return Case('eigh', f"shape={s} UPLO={uplo}", [x], fu, jax_ok=False,
                    canon=lambda outs: [None, _col_signs(outs[1])], kink=gap1 < 1e-6)
    if name == 'eigvalsh':
        return Case(name, f"shape={s} of x + x^T", [x], lambda B, x: [B.la.eigvalsh(_sym(B, x))],
                    kink=gap < 1e-6)

    def f(B, x):
        r = B.la.eigh(_sym(B, x))
        return [r[0], r[1]]
    return Case('eigh', f"shape={s} of x + x^T", [x], f, canon=lambda outs: [None, _col_signs(outs[1])],
                kink=gap < 1e-6)


@maker('eig', 'eigvals')
def _eig(rng):
    name = pick(rng, ['eig', 'eigvals'])
    n = int(pick(rng, [2, 3, 4]))
    # distinct real eigenvalues: a triangular matrix with spread diagonal, plus a small x
    base = np.triu(rng.uniform(-1, 1, (n, n)), 1) + np.diag(np.arange(n) * 1.5 - 1.0)
    x = draw(rng, (n, n), special=0.0, tie=0.0) * 0.1
    if name == 'eigvals':
        return Case(name, f"n={n} of T + x", [x], lambda B, x: [B.la.eigvals(base + x)], jax_ok=False)

    def f(B, x):
        r = B.la.eig(base + x)
        return [r[0], r[1]]
    return Case('eig', f"n={n} of T + x", [x], f, jax_ok=False,
                canon=lambda outs: [None, _col_signs(outs[1])])


@maker('svd', 'svdvals')
def _svd(rng):
    name = pick(rng, ['svd', 'svd', 'svdvals', 'svd_values'])
    s = pick(rng, [(2, 2), (3, 2), (2, 3), (3, 3), (2, 3, 2), (1, 3), (4, 2)])
    x = draw(rng, s, special=0.0, tie=0.0)
    sv = np.linalg.svd(x, compute_uv=False)
    kink = bool(np.min(sv) < 1e-6) or (sv.shape[-1] > 1 and np.min(-np.diff(sv, axis=-1)) < 1e-6)
    if name == 'svdvals':
        return Case(name, f"shape={s}", [x], lambda B, x: [B.la.svdvals(x)], kink=kink)
    if name == 'svd_values':
        return Case(name, f"shape={s} compute_uv=False", [x],
                    lambda B, x: [B.la.svd(x, compute_uv=False)], kink=kink)
    full = s[-1] == s[-2] and rng.random() < 0.5
    herm = s[-1] == s[-2] and rng.random() < 0.25
    if herm:                          # numpy's hermitian svd reads the lower triangle
        svh = np.linalg.svd(x, compute_uv=False, hermitian=True)
        kink = bool(np.min(svh) < 1e-6) or (svh.shape[-1] > 1 and np.min(-np.diff(svh, axis=-1)) < 1e-6)

    def f(B, x):
        if herm:
            if B is JAX:
                raise NotImplementedError("JAX's hermitian svd symmetrises")
            u, sv, vh = B.la.svd(x, full_matrices=full, hermitian=True)
        else:
            u, sv, vh = B.la.svd(x, full_matrices=full)
        return [u, sv, vh]

    def canon(outs):
        c = _col_signs(outs[0])
        return [c, None, np.swapaxes(c, -1, -2)]
    return Case('svd', f"shape={s} full_matrices={full} hermitian={herm}", [x], f, canon=canon,
                kink=kink, jax_ok=not herm)


@maker('pinv')
def _pinv(rng):
    s = pick(rng, [(2, 2), (3, 2), (2, 3), (2, 3, 2), (1, 3)])
    x = draw(rng, s, special=0.0, tie=0.0)
    herm = s[-1] == s[-2] and rng.random() < 0.3
    if herm:
        return Case('pinv', f"shape={s} of x + x^T hermitian", [x],
                    lambda B, x: [B.la.pinv(_sym(B, x), hermitian=True)])
    if rng.random() < 0.2:            # a cut-off that drops the smallest singular value
        sv = np.linalg.svd(x, compute_uv=False)
        rc = float(np.sqrt(sv[..., -1] * sv[..., -2] if sv.shape[-1] > 1 else 0.5) / sv[..., 0]) \
            if sv.ndim == 1 and sv.shape[-1] > 1 else 0.3
        kink = sv.ndim == 1 and sv.shape[-1] > 1 and (abs(sv[-1] - rc * sv[0]) < 1e-3)
        return Case('pinv', f"shape={s} rcond={rc:.3g}", [x], lambda B, x: [B.la.pinv(x, rcond=rc)],
                    kink=kink, jax_ok=False)
    return Case('pinv', f"shape={s}", [x], lambda B, x: [B.la.pinv(x)],
                kink=bool(np.min(np.linalg.svd(x, compute_uv=False)) < 1e-6))


@maker('matrix_power')
def _mpow(rng):
    s = pick(rng, [(2, 2), (3, 3), (2, 2, 2), (1, 1)])
    n = int(rng.integers(-3, 7))
    x = draw(rng, s, special=0.0) + (np.eye(s[-1]) * 2 if n < 0 else 0)
    return Case('matrix_power', f"shape={s} n={n}", [x], lambda B, x: [B.la.matrix_power(x, n)])


@maker('multi_dot')
def _multi_dot(rng):
    k = int(rng.integers(2, 6))
    dims = [int(rng.integers(1, 4)) for _ in range(k + 1)]
    shapes = [(dims[i], dims[i + 1]) for i in range(k)]
    if rng.random() < 0.3:
        shapes[0] = (dims[1],)
    if rng.random() < 0.3:
        shapes[-1] = (dims[-2],)
    return Case('multi_dot', f"shapes={shapes}", [draw(rng, s) for s in shapes],
                lambda B, *a: [B.la.multi_dot(list(a))])


@maker('norm', 'vector_norm', 'matrix_norm')
def _norm(rng):
    name = pick(rng, ['norm', 'norm', 'norm', 'vector_norm', 'matrix_norm'])
    keep = bool(rng.random() < 0.3)
    if name == 'matrix_norm':
        s = pick(rng, [(2, 3), (3, 3), (2, 2, 3)])
        ordm = pick(rng, ['fro', 'nuc', np.inf, -np.inf, 1, -1, 2, -2])
        x = draw(rng, s, tie=0.0)
        return Case(name, f"shape={s} ord={ordm} keepdims={keep}", [x],
                    lambda B, x: [B.la.matrix_norm(x, ord=ordm, keepdims=keep)],
                    kink=has_zeros(x) or ordm in (np.inf, -np.inf, 1, -1))
    if name == 'vector_norm':
        s = shape_nd(rng, 1, nonempty=True)
        r = rng.random()
        ax = None if r < 0.4 else (axis_of(rng, len(s), none=False) if r < 0.7 else axes_tuple(rng, len(s)))
        o = pick(rng, [2, 1, np.inf, -np.inf, 0, 3, 0.5, -1, -2, 1.5])
        x = draw(rng, s, tie=0.0)
        return Case(name, f"shape={s} axis={ax} ord={o} keepdims={keep}", [x],
                    lambda B, x: [B.la.vector_norm(x, axis=ax, ord=o, keepdims=keep)],
                    kink=has_zeros(x), jax_ok=o != 0)
    s = shape_nd(rng, 1, nonempty=True)
    nd_ = len(s)
    r = rng.random()
    if r < 0.3:
        ax = None
        ords = [None, 2, 1, np.inf, -np.inf, 3, 0.5, -1] if nd_ == 1 else \
            ([None, 'fro', 'nuc', np.inf, -np.inf, 1, -1, 2, -2] if nd_ == 2 else [None])
    elif r < 0.7 or nd_ < 2:
        ax = axis_of(rng, nd_, none=False)
        ords = [None, 2, 1, np.inf, -np.inf, 0, 3, 0.5, -1, -2]
    else:
        a = [int(v) for v in rng.choice(nd_, 2, replace=False)]
        ax = tuple(v - nd_ if rng.random() < 0.3 else v for v in a)
        ords = [None, 'fro', 'nuc', np.inf, -np.inf, 1, -1, 2, -2]
    o = pick(rng, ords)
    x = draw(rng, s, tie=0.0)
    kink = has_zeros(x) or o in (np.inf, -np.inf) and has_ties(np.abs(x)) or o in (-1, 1) and \
        isinstance(ax, tuple)
    return Case('norm', f"shape={s} ord={o} axis={ax} keepdims={keep}", [x],
                lambda B, x: [B.la.norm(x, ord=o, axis=ax, keepdims=keep)],
                kink=kink, jax_ok=o != 0)


# ================================================================ running a case

def flat(outs):
    return np.concatenate([np.ravel(np.asarray(nd.primal_value(o), float)) for o in outs]) \
        if outs else np.zeros(0)


def as_float_list(x):
    if isinstance(x, (list, tuple)):
        return [as_float_list(v) for v in x]
    return np.asarray(nd.primal_value(x), float)


def flatten_all(x):
    if isinstance(x, (list, tuple)):
        parts = [flatten_all(v) for v in x]
        return np.concatenate(parts) if parts else np.zeros(0)
    return np.ravel(np.asarray(x, float))


def bits_equal(a, b):
    """Same shape, dtype, values, nan positions and signs of zeros."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind not in 'fc':
        return bool(np.array_equal(a, b))
    return bool(np.array_equal(a, b, equal_nan=True) and np.array_equal(np.signbit(a), np.signbit(b)))


def describe(v):
    v = np.asarray(v)
    return f"{v.dtype}{list(v.shape)} {v.ravel()[:12].tolist()}"


class Result:
    def __init__(self, log=None):
        self.counts = collections.Counter()
        self.classes = collections.Counter()
        self.examples = collections.defaultdict(list)
        self.log = log

    def record(self, cls, check, case, cid, **info):
        self.counts['mismatches'] += 1
        key = f"{cls} [{case.name}: {check}]"
        self.classes[key] += 1
        if len(self.examples[key]) < 3:
            self.examples[key].append(cid)
        if self.log is not None:
            self.log.write(json.dumps(dict(cls=cls, check=check, name=case.name, id=cid,
                                           text=case.text, **info), default=str) + "\n")
            self.log.flush()


def run(fn):
    try:
        with np.errstate(all='ignore'):
            return ('ok', fn())
    except Exception as e:                 # noqa: BLE001  (an error is a result)
        return ('error', f"{type(e).__name__}: {str(e)[:300]}")


EXPECTED_ERRORS = ('sorting a traced array',)


def _err_class(msg):
    if any(s in msg for s in EXPECTED_ERRORS):
        return None
    return 'nestad-error'


def fd_jvp(case, xs, ts, fn, h):
    """Central difference of fn (numpy outputs, flattened) along ts."""
    def at(s):
        return flat(fn(*[x + s * t for x, t in zip(xs, ts)]))
    return (at(h) - at(-h)) / (2 * h)


def run_case(res, seed, cid, opts):
    rng = np.random.default_rng([seed, cid])
    names = opts.only or sorted(MAKERS)
    name = pick(rng, names)
    case = MAKERS[name](rng)
    if case is None:
        return
    res.counts['cases'] += 1
    res.counts[f'case {case.name}'] += 1
    xs = [np.asarray(x, float) if np.ndim(x) else float(x) for x in case.xs]
    # non-contiguous inputs (transposed or strided views of the same values)
    if rng.random() < 0.2:
        xs = [np.asfortranarray(x) if np.ndim(x) >= 2 else
              (np.repeat(x, 2)[::2] if np.ndim(x) == 1 else x) for x in xs]
    spell = NESTAD if rng.random() < 0.6 else DISPATCH
    if case.name in ('r_', 'c_'):         # numpy's r_ cannot reach nestad (notes/arrays.md)
        spell = NESTAD
    if opts.show:
        print(f"[{cid}] {case.name} {case.text} spell={spell.name} kink={case.kink}")
        for x in xs:
            print("   x:", describe(x))

    def f_np(*a):
        return [np.asarray(o) for o in case.f(NUMPY, *a)]

    ref = run(lambda: f_np(*xs))
    if ref[0] == 'error':
        # numpy refuses: nestad must refuse too (not compute a number)
        got = run(lambda: nd.jvp(lambda *a: case.f(spell, *a), tuple(xs),
                                 tuple(np.ones_like(x) if np.ndim(x) else 1.0 for x in xs)))
        res.counts['numpy errors'] += 1
        if got[0] == 'ok':
            res.record('numpy-raises-nestad-computes', 'value', case, cid, numpy=ref[1])
        return
    outs_np = ref[1]
    if any(o.dtype.kind not in 'fiub' for o in outs_np):
        res.counts['skipped complex'] += 1
        return
    canon_np = case.canon(outs_np) if case.canon else [None] * len(outs_np)
    ws = [rng.uniform(0.5, 1.5, size=o.shape) for o in outs_np]
    sizes = [int(np.size(x)) for x in xs]
    argnums = tuple(range(len(xs)))

    def canon_outs(outs, canon):
        return [o if c is None else o * c for o, c in zip(outs, canon)]

    def F_for(Bk, canon):
        def F(*a):
            outs = canon_outs(case.f(Bk, *a), canon)
            total = 0.0
            for w, o in zip(ws, outs):
                total = total + Bk.np.sum(o * w) if np.ndim(w) else total + o * float(w)
            return total
        return F

    Fn = F_for(spell, canon_np)

    def fn_outs(*a):
        return canon_outs(case.f(spell, *a), canon_np)

    # ---------------------------------------------------------------- values
    ts = [rng.uniform(-1, 1, size=np.shape(x)) if np.ndim(x) else float(rng.uniform(-1, 1)) for x in xs]
    fwd = run(lambda: nd.jvp(lambda *a: tuple(case.f(spell, *a)), tuple(xs), tuple(ts)))
    res.counts['comparisons'] += 1
    if fwd[0] == 'error':
        if _err_class(fwd[1]):
            res.record('nestad-error', 'jvp', case, cid, error=fwd[1])
        return
    prim, tan = fwd[1]
    for k, (p, o) in enumerate(zip(prim, outs_np)):
        pv = np.asarray(nd.primal_value(p)) if not isinstance(p, np.ndarray) else p
        if isinstance(p, float) and o.ndim == 0 and o.dtype == np.float64:
            pv = np.float64(p)
        if not bits_equal(pv, o):
            cls = 'value-dtype' if np.asarray(pv).dtype != o.dtype or np.shape(pv) != o.shape else 'value-bits'
            res.record(cls, f'primal (jvp) output {k}', case, cid, nestad=describe(pv), numpy=describe(o))
    bwd = run(lambda: nd.vjp(lambda *a: tuple(case.f(spell, *a)), *xs))
    res.counts['comparisons'] += 1
    if bwd[0] == 'error':
        if _err_class(bwd[1]):
            res.record('nestad-error', 'vjp', case, cid, error=bwd[1])
        return
    for k, (p, o) in enumerate(zip(bwd[1][0], outs_np)):
        pv = np.asarray(p) if not isinstance(p, float) else np.float64(p)
        if not bits_equal(pv, o):
            res.record('value-bits', f'primal (vjp) output {k}', case, cid, nestad=describe(pv),
                       numpy=describe(o))

    # ---------------------------------------------------------------- derivatives vs JAX
    use_jax = JAX is not None and case.jax_ok and not opts.no_jax
    kink = case.kink
    # a value that is nan or inf: its derivatives are conventions (nan, inf or 0), not numbers
    value_nonfinite = not all(np.all(np.isfinite(o)) for o in outs_np if o.dtype.kind == 'f')
    info = dict(xs=[np.asarray(x).tolist() for x in xs], seed=seed)

    def judge(check, nv, peer, fd=None, rtol=1e-7):
        res.counts['comparisons'] += 1
        st, v = nv
        if st == 'error':
            if _err_class(v) and (peer is None or peer[0] == 'ok'):
                res.record('nestad-error', check, case, cid, error=v, **info)
            return
        if peer is None or peer[0] == 'error':
            if peer is not None:
                res.counts['jax errors'] += 1
            ref_ = fd() if fd is not None and case.fd_ok else None
            if ref_ is None:
                return
            f1, f2 = ref_
            if close(f1, f2, 1e-4, 1e-6)[0] and not close(v, f1, 1e-4, 1e-6)[0]:
                res.record('kink' if kink else 'nonfinite' if value_nonfinite else 'NESTAD-WRONG (fd)',
                           check, case, cid,
                           nestad=np.asarray(v).tolist(), fd=f1.tolist(), **info)
            return
        ok, nonfinite = close(v, peer[1], rtol)
        if ok:
            return
        data = dict(nestad=np.asarray(v).tolist(), jax=np.asarray(peer[1]).tolist(), **info)
        if kink:
            res.record('kink', check, case, cid, **data)
            return
        if nonfinite or value_nonfinite:
            res.record('nonfinite', check, case, cid, **data)
            return
        if fd is not None and case.fd_ok:
            f1, f2 = fd()
            if close(f1, f2, 1e-4, 1e-6)[0]:
                if close(v, f1, 1e-4, 1e-6)[0]:
                    res.record('peers-wrong', check, case, cid, fd=f1.tolist(), **data)
                elif close(peer[1], f1, 1e-4, 1e-6)[0]:
                    res.record('NESTAD-WRONG', check, case, cid, fd=f1.tolist(), **data)
                else:
                    res.record('fd-unsure', check, case, cid, fd=f1.tolist(), **data)
                return
        res.record('nestad-outlier', check, case, cid, **data)

    def self_check(check, a, b, rtol=1e-9, bits=False):
        res.counts['comparisons'] += 1
        (sa, va), (sb, vb) = a, b
        if sa == 'error' or sb == 'error':
            if sa != sb:
                msg = va if sa == 'error' else vb
                if _err_class(msg):
                    res.record('nestad-modes-error', check, case, cid, a=str(va)[:300], b=str(vb)[:300], **info)
            return
        if bits:
            va_, vb_ = np.asarray(va), np.asarray(vb)
            if va_.shape == vb_.shape and bits_equal(va_, vb_):
                return
            if close(va, vb, 1e-12, 0.0)[0]:
                res.record('staged-not-bitwise', check, case, cid, a=va_.tolist(), b=vb_.tolist(), **info)
                return
        elif close(va, vb, rtol)[0]:
            return
        _, nf = close(va, vb, rtol)
        res.record('nestad-modes' + (' (kink)' if kink else '') + (' (nonfinite)' if nf else ''),
                   check, case, cid, a=np.asarray(va).tolist(), b=np.asarray(vb).tolist(), **info)

    jx = [jnp.asarray(x) for x in xs] if use_jax else None
    canon_j = None
    if use_jax:
        jref = run(lambda: [np.asarray(o) for o in case.f(JAX, *jx)])
        if jref[0] == 'ok':
            if case.canon:
                canon_j = case.canon(jref[1])
            else:
                canon_j = [None] * len(outs_np)
            canon_j = [None if c is None else jnp.asarray(c) for c in canon_j]
        else:
            res.counts['jax errors'] += 1
            use_jax = False
    Fj = F_for(JAX, canon_j) if use_jax else None

    # jvp of the outputs
    tan_n = ('ok', flatten_all([np.asarray(nd.primal_value(t), float) for t in canon_outs(tan, canon_np)]))
    tan_j = run(lambda: flatten_all([np.asarray(t, float) for t in canon_outs(
        jax.jvp(lambda *a: tuple(case.f(JAX, *a)), tuple(jx), tuple(jnp.asarray(t) for t in ts))[1],
        canon_j)])) if use_jax else None
    judge('jvp', tan_n, tan_j, lambda: (fd_jvp(case, xs, ts, lambda *a: canon_outs(f_np(*a), canon_np), 1e-6),
                                        fd_jvp(case, xs, ts, lambda *a: canon_outs(f_np(*a), canon_np), 1e-5)))

    # vjp
    cts = [rng.uniform(-1, 1, size=o.shape) if o.ndim else float(rng.uniform(-1, 1)) for o in outs_np]
    cts_n = [c if cn is None else c * cn for c, cn in zip(cts, canon_np)]
    vj_n = run(lambda: flatten_all(list(bwd[1][1](tuple(
        np.asarray(c, dtype=o.dtype) if o.ndim else c for c, o in zip(cts_n, outs_np))))))
    vj_j = None
    if use_jax:
        cts_j = [c if cj is None else c * np.asarray(cj) for c, cj in zip(cts, canon_j)]
        vj_j = run(lambda: flatten_all([np.asarray(g) for g in jax.vjp(
            lambda *a: tuple(case.f(JAX, *a)), *jx)[1](tuple(jnp.asarray(c) for c in cts_j))]))
    judge('vjp', vj_n, vj_j)

    # gradients of the weighted sum
    g_r = run(lambda: flatten_all(list(nd.gradient_r(Fn, argnums=argnums)(*xs))))
    g_f = run(lambda: flatten_all(list(nd.gradient_f(Fn, argnums=argnums)(*xs))))
    g_j = run(lambda: flatten_all([np.asarray(g) for g in jax.grad(Fj, argnums=argnums)(*jx)])) \
        if use_jax else None

    def fd_grad():
        F0 = F_for(NUMPY, canon_np)
        v = flatten_all(xs)
        out = []
        for h in (1e-6, 1e-5):
            g = np.zeros(v.size)
            for k in range(v.size):
                e = np.zeros(v.size)
                e[k] = 1.0
                parts = _unflat(e, xs)
                g[k] = (float(F0(*[x + h * p for x, p in zip(xs, parts)])) -
                        float(F0(*[x - h * p for x, p in zip(xs, parts)]))) / (2 * h)
            out.append(g)
        return out
    judge('gradient_r', g_r, g_j, fd_grad)
    judge('gradient_f', g_f, g_j, fd_grad)
    self_check('gradient_r vs gradient_f', g_r, g_f)

    # Jacobians of the outputs, forward against reverse
    if sum(sizes) <= 12 and sum(o.size for o in outs_np) <= 40:
        def jac(op):
            def g(*a):
                return tuple(fn_outs(*a))
            return flatten_all(_jac_blocks(op(g, argnums=argnums)(*xs)))
        self_check('jacobian_f vs jacobian_r', run(lambda: jac(nd.jacobian_f)), run(lambda: jac(nd.jacobian_r)))

    # Hessians in four pairings, and a derivative nested in gradient_r
    if case.hess_ok and sum(sizes) <= opts.max_hessian_size:
        H = {}
        for pair, (outer, inner) in {'fr': (nd.jacobian_f, nd.gradient_r), 'ff': (nd.jacobian_f, nd.gradient_f),
                                     'rf': (nd.jacobian_r, nd.gradient_f), 'rr': (nd.jacobian_r, nd.gradient_r)}.items():
            H[pair] = run(lambda o=outer, i=inner: hessian_blocks(
                o(i(Fn, argnums=argnums), argnums=argnums)(*xs), [np.shape(x) for x in xs]).ravel())
        h_j = None
        if use_jax:
            def FJflat(v):
                return Fj(*_unflat(v, jx))
            h_j = run(lambda: np.asarray(jax.hessian(FJflat)(jnp.asarray(flatten_all(xs)))).ravel())
        for pair, h in H.items():
            judge(f'hessian {pair}', h, h_j)
            if pair != 'fr':
                self_check(f'hessian {pair} vs fr', h, H['fr'], rtol=1e-7)
        vs = [rng.uniform(-1, 1, size=np.shape(x)) if np.ndim(x) else float(rng.uniform(-1, 1)) for x in xs]

        def nested(*a):
            return nd.derivative(lambda t: Fn(*[x + t * v for x, v in zip(a, vs)]))(0.0)
        hv_n = run(lambda: flatten_all(list(nd.gradient_r(nested, argnums=argnums)(*xs))))
        hv_j = None
        if use_jax:
            def GJ(*a):
                return jax.jvp(lambda *b: Fj(*b), tuple(a), tuple(jnp.asarray(v) for v in vs))[1]
            hv_j = run(lambda: flatten_all([np.asarray(g) for g in jax.grad(GJ, argnums=argnums)(*jx)]))
        judge('derivative inside gradient_r', hv_n, hv_j)

    # staged against eager
    if opts.stage and case.stage_ok:
        # each staged function called twice: the first call traces (and returns the trace's
        # values), the second runs the compiled program
        sF, sO = nd.stage(Fn), nd.stage(lambda *a: tuple(fn_outs(*a)))
        sG = nd.stage(nd.gradient_r(Fn, argnums=argnums))
        sJ = nd.stage(lambda *a: nd.jvp(lambda *b: tuple(fn_outs(*b)), a, tuple(ts))[1])
        ev = run(lambda: Fn(*xs))
        for call in ('traced', 'compiled'):
            st_v = run(lambda: sF(*xs))
            self_check(f'staged value ({call})', (st_v[0], np.asarray(nd.primal_value(st_v[1]))
                                                  if st_v[0] == 'ok' else st_v[1]),
                       (ev[0], np.asarray(nd.primal_value(ev[1])) if ev[0] == 'ok' else ev[1]), bits=True)
            st_o = run(lambda: [np.asarray(o) for o in sO(*xs)])
            if st_o[0] == 'ok':
                for k, (p, o) in enumerate(zip(st_o[1], canon_outs(outs_np, canon_np))):
                    if not bits_equal(p, np.asarray(o)):
                        res.record('staged-value-bits', f'staged output {k} ({call})', case, cid,
                                   staged=describe(p), numpy=describe(o), **info)
            elif _err_class(st_o[1]):
                res.record('nestad-error', f'staged outputs ({call})', case, cid, error=st_o[1], **info)
            st_g = run(lambda: flatten_all(list(sG(*xs))))
            self_check(f'staged gradient_r ({call})', st_g, g_r, rtol=1e-12)
            st_h = run(lambda: flatten_all(list(sJ(*xs))))
            self_check(f'staged jvp ({call})', st_h, tan_n, rtol=1e-12)

    # float32: numpy's values bit for bit, float32 gradients
    if opts.f32 and rng.random() < 0.3:
        x32 = [np.asarray(x, np.float32) for x in xs]
        ref32 = run(lambda: f_np(*x32))
        if ref32[0] == 'ok':
            got = run(lambda: nd.jvp(lambda *a: tuple(case.f(spell, *a)), tuple(x32),
                                     tuple(np.asarray(t, np.float32) for t in ts)))
            res.counts['comparisons'] += 1
            if got[0] == 'error':
                if _err_class(got[1]):
                    res.record('nestad-error', 'float32 jvp', case, cid, error=got[1])
            else:
                for k, (p, o) in enumerate(zip(got[1][0], ref32[1])):
                    pv = np.asarray(p)
                    if not bits_equal(pv, o):
                        res.record('float32-value', f'output {k}', case, cid, nestad=describe(pv),
                                   numpy=describe(o))
                    t = np.asarray(nd.primal_value(got[1][1][k]))
                    if t.dtype != o.dtype and o.dtype.kind == 'f' and t.size:
                        res.record('float32-tangent-dtype', f'output {k}', case, cid,
                                   tangent=str(t.dtype), numpy=str(o.dtype))
            g32 = run(lambda: list(nd.gradient_r(Fn, argnums=argnums)(*x32)))
            if g32[0] == 'ok':
                for k, g in enumerate(g32[1]):
                    if np.asarray(g).dtype != np.float32:
                        res.record('float32-gradient-dtype', f'argument {k}', case, cid,
                                   dtype=str(np.asarray(g).dtype))
                g64 = run(lambda: flatten_all(list(nd.gradient_r(Fn, argnums=argnums)(
                    *[np.asarray(x, float) for x in x32]))))
                if g64[0] == 'ok' and not case.kink:
                    a, b = flatten_all(g32[1]), g64[1]
                    if not close(a, b, 2e-3, 1e-3)[0]:
                        res.record('float32-gradient-far', 'gradient_r', case, cid,
                                   f32=a.tolist(), f64=b.tolist())
            elif _err_class(g32[1]):
                res.record('nestad-error', 'float32 gradient_r', case, cid, error=g32[1])


def _unflat(v, like):
    out, k = [], 0
    for x in like:
        m = int(np.size(x))
        s = np.shape(x)
        piece = v[k:k + m]
        out.append(piece.reshape(s) if s else piece.reshape(())[()] if hasattr(piece, 'reshape') else piece)
        k += m
    return out


def _jac_blocks(J):
    """A nested Jacobian (tuples of tuples of blocks) as a flat list of arrays."""
    if isinstance(J, (list, tuple)):
        out = []
        for j in J:
            out += _jac_blocks(j)
        return out
    return [np.asarray(nd.primal_value(J), float)]


# ================================================================ main

def summary(res, elapsed):
    lines = [f"{res.counts['cases']} cases, {res.counts['comparisons']} comparisons, "
             f"{res.counts['mismatches']} mismatches in {elapsed:.0f} s"]
    for k, v in sorted(res.counts.items()):
        if k not in ('cases', 'comparisons', 'mismatches') and not k.startswith('case '):
            lines.append(f"  {k}: {v}")
    lines.append("  per function: " + ", ".join(f"{k[5:]} {v}" for k, v in sorted(res.counts.items())
                                                 if k.startswith('case ')))
    lines.append("mismatches by class [function: check]: count (first case ids)")
    for k, v in sorted(res.classes.items()):
        lines.append(f"  {k}: {v} {res.examples[k]}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument('--cases', type=int, default=300)
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--first', type=int, default=0)
    ap.add_argument('--only', default=None, help="comma-separated function names")
    ap.add_argument('--log', default=None)
    ap.add_argument('--show', action='store_true')
    ap.add_argument('--no-jax', action='store_true')
    ap.add_argument('--no-stage', dest='stage', action='store_false')
    ap.add_argument('--no-f32', dest='f32', action='store_false')
    ap.add_argument('--max-hessian-size', type=int, default=10)
    opts = ap.parse_args(argv)
    if opts.only:
        opts.only = sorted(set(opts.only.split(',')) & set(MAKERS)) or sorted(opts.only.split(','))
    res = Result(open(opts.log, 'a') if opts.log else None)
    t0 = time.time()
    for cid in range(opts.first, opts.first + opts.cases):
        if jax is not None and cid % 25 == 24:
            jax.clear_caches()
        try:
            run_case(res, opts.seed, cid, opts)
        except Exception:                      # noqa: BLE001  (a fuzzer bug: keep going)
            res.counts['fuzzer errors'] += 1
            if opts.show or res.counts['fuzzer errors'] <= 3:
                print(f"fuzzer error in case {cid}:")
                traceback.print_exc()
    print(summary(res, time.time() - t0))


if __name__ == '__main__':
    main()
