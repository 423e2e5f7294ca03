"""``stage(f, backend="numba")``: the generated Python compiled by ``numba.njit``.

The same source as the Python backend: ``math`` calls, operators and loops, which
numba compiles to machine code.  Primitives spelled as calls of their plain Python
implementation are compiled with ``njit`` too.  Array code gets numba implementations of
the numpy reductions and plain implementations numba's numpy subset lacks, adding in
numpy's order.  A program numba still cannot compile runs with the Python backend
instead, with a warning naming numba's complaint.  Compiled code is cached on disk
(``cache_dir``).  numba is optional (``pip install "nestad[numba]"``).  See
notes/staging.md.
"""
import hashlib
import operator
import os
import re
import types as _pytypes
import warnings

import numpy as np

from ..errors import InvalidInputError
from . import lowering
from .codegen import python_sources
from .program import Program
from ..numpy._elementwise import _power_plain
from ..primitives import _pow_plain, _real_pow
from .program import GuardFailure


class NumbaFallbackWarning(UserWarning):
    """A staged program could not be compiled by numba and runs as Python instead."""


def _narrow_float(program):
    """True if a value of the program (its loops' included) is a float narrower than
    float64: numba types float32 times a Python float as float64, numpy (NEP 50) as
    float32, so numba's numbers would not be the Python backend's."""
    for v in program.inputs:
        if getattr(v, 'dtype', None) is not None and v.dtype.kind == 'f' and v.dtype.itemsize < 8:
            return True
    for eqn in program.eqns:
        for v in eqn.outs:
            if v.dtype is not None and v.dtype.kind == 'f' and v.dtype.itemsize < 8:
                return True
        if any(isinstance(p, Program) and _narrow_float(p) for p in eqn.params.values()):
            return True
    return False


# ---------------------------------------------------------------- numpy's reductions in numba
# numba's np.sum takes no keepdims (np.max no axis) and adds in a plain loop, where numpy
# sums a contiguous run pairwise (blocks of 8 partial sums) and other axes row after row.
# The staged code's ``np`` is, for numba, numpy with sum, max, min, mean, reshape and
# expand_dims replaced by functions whose numba implementations (``_teach_arrays``) compute as numpy
# does: the same numbers, bit for bit.  In Python they are numpy's.

def _sum(a, axis=None, keepdims=False):
    return np.sum(a, axis=axis, keepdims=keepdims)


def _max(a, axis=None, keepdims=False):
    return np.max(a, axis=axis, keepdims=keepdims)


def _min(a, axis=None, keepdims=False):
    return np.min(a, axis=axis, keepdims=keepdims)


def _mean(a, axis=None, keepdims=False):
    return np.mean(a, axis=axis, keepdims=keepdims)


def _reshape(a, shape):
    return np.reshape(a, shape)


def _expand_dims(a, axis):
    return np.expand_dims(a, axis)


def _numpy_for_numba():
    mod = _pytypes.ModuleType('numpy')         # (numba reads the attributes of a module global)
    mod.__dict__.update(np.__dict__)
    mod.sum, mod.max, mod.min, mod.mean = _sum, _max, _min, _mean
    mod.reshape, mod.expand_dims = _reshape, _expand_dims
    return mod


def _pairwise(a, lo, n):
    """numpy's pairwise sum of a[lo:lo + n] (``pairwise_sum`` in its loops): runs of at
    most 128 by eight partial sums, longer ones halved (at a multiple of 8) and the two
    sums added.  The recursion is kept on a stack of its own: numba's disk cache cannot
    load recursive code."""
    if n <= 128:                    # (no stack to allocate: most rows are short)
        return _block_sum(a, lo, n)
    los, ns = np.empty(64, np.int64), np.empty(64, np.int64)
    lefts, waiting = np.empty(64), np.zeros(64, np.bool_)     # left half's sum, if done
    depth, los[0], ns[0] = 0, lo, n
    while True:
        lo, n = los[depth], ns[depth]
        if n > 128:                             # descend into the left half
            half = n // 2
            half -= half % 8
            waiting[depth] = False
            depth += 1
            los[depth], ns[depth] = lo, half
            continue
        res = _block_sum(a, lo, n)
        while depth > 0:                        # climb while right halves are done
            depth -= 1
            if waiting[depth]:
                res = lefts[depth] + res
                continue
            lefts[depth], waiting[depth] = res, True
            half = ns[depth] // 2
            half -= half % 8
            los[depth + 1], ns[depth + 1] = los[depth] + half, ns[depth] - half
            depth += 1
            break
        else:
            return res


def _block_sum(a, lo, n):
    if n < 8:
        res = -0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    # (eight partial sums in locals: an array of them, allocated per call, made a sum
    # over a (5000, 10) array's rows cost more than all the rest of the program)
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    while i < n - n % 8:
        j = lo + i
        r0, r1, r2, r3 = r0 + a[j], r1 + a[j + 1], r2 + a[j + 2], r3 + a[j + 3]
        r4, r5, r6, r7 = r4 + a[j + 4], r5 + a[j + 5], r6 + a[j + 6], r7 + a[j + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


def _reduce_middle(b, kind):
    """b (pre, n, post), C order, reduced over its middle axis as numpy does (``kind``: 0
    sum, 1 max, 2 min): a contiguous run (post == 1) added pairwise, otherwise rows
    accumulated in order; max and min propagate nan and keep the later of equal values."""
    is_sum = kind == 0
    pre, n, post = b.shape
    out = np.empty((pre, post))
    flat = b.reshape(pre * n * post)    # (b is C-ordered: a row is a run of flat, no view made)
    for i in range(pre):
        if is_sum and post == 1:
            out[i, 0] = 0.0 + _pairwise(flat, i * n, n)
            continue
        # (element by element: a slice assignment brings numba's broadcasting checks and
        # the formatting of their error messages, seconds of compile)
        for k in range(post):
            out[i, k] = 0.0 if is_sum else b[i, 0, k]
        for j in range(0 if is_sum else 1, n):
            for k in range(post):
                x, acc = b[i, j, k], out[i, k]
                if is_sum:
                    out[i, k] = acc + x
                elif acc == acc and (x != x or (x >= acc if kind == 1 else x <= acc)):
                    out[i, k] = x
    return out


_REDUCTIONS = {}


def _reduction(ndim, axis, keepdims, kind):
    """numba implementation of ``np.sum``/``max``/``min``/``mean(a, axis, keepdims)`` for a
    C-ordered float64 array of ``ndim`` axes, reduced over ``axis``: None or the adjacent
    axes (lo, hi) (source written per case: the result's rank is static).  numpy's mean is
    the sum divided by the count."""
    key = ndim, axis, keepdims, kind
    if key not in _REDUCTIONS:
        s = [f"s[{i}]" for i in range(ndim)]
        lo, hi = (0, ndim) if axis is None else axis        # axes lo..hi-1
        pre, mid, post = ("*".join(["1"] + part) for part in (s[:lo], s[lo:hi], s[hi:]))
        shape = s[:lo] + ["1"] * (hi - lo) * keepdims + s[hi:]
        if not shape:
            result = "out[0, 0]"
        else:
            result = f"out.reshape(({', '.join(shape)},))"
        b = f"np.ascontiguousarray(a).reshape(({pre}, {mid}, {post}))"
        src = (f"def impl(a, axis=None, keepdims=False):\n"
               f"    s = a.shape\n"
               f"    out = _reduce_middle({b}, {kind % 3})\n"       # (a mean: a sum, then /)
               + (f"    out = out / ({mid})\n" if kind == 3 else "")
               + f"    return {result}\n")
        glb = {'np': np, '_reduce_middle': _reduce_middle}
        exec(compile(src, f"<nestad numba reduction {key}>", "exec"), glb)
        _REDUCTIONS[key] = glb['impl']
    return _REDUCTIONS[key]


_TAUGHT = None


def _teach(numba):
    """numba implementations of what staged scalar code calls and numba cannot compile
    as it is (registered once): the functions they implement, which stay as they are
    in the generated code.

    * ``pow``'s plain implementation (``_pow_plain``: numpy's IEEE answers where Python
      raises or makes a complex number).  numba's ``float ** float`` is C's ``pow``,
      which gives those answers (but where numpy's exponent 0.5 is a square root), and
      Python's ``x ** y`` of floats is that same ``pow`` elsewhere; an int exponent is
      made a float first, since numba computes ``x ** 3`` by multiplications (rounded
      differently).  Both ints: no implementation, so the program runs as Python
      (Python's ints are exact).
    * ``math.cbrt`` (Python 3.11), which numba lacks: numpy's ``cbrt``, the same C
      ``cbrt``."""
    global _TAUGHT
    from numba.core.compiler_lock import global_compiler_lock
    with global_compiler_lock:          # (the tiered backend readies numba in a thread)
        if _TAUGHT is None:
            _TAUGHT = _teach_once(numba)
    return _TAUGHT


def _teach_once(numba):
    import math

    import numpy as np
    from numba.core import types
    from numba.extending import overload


    def pow_ieee(x, y):
        x, y = float(x), float(y)
        if y == 0.5 and x <= 0.0:     # numpy's power is sqrt: -0.0 at -0.0, nan at -inf
            return np.sqrt(x)
        return x ** y

    @overload(_pow_plain)
    def _pow(x, y):
        if isinstance(x, types.Float) or isinstance(y, types.Float):
            return pow_ieee

    def int_pow(x, y):
        # exact below 2**63, as Python's ints; beyond, numba's would wrap: raise, and
        # the call reruns as Python (stage.Compiled)
        if abs(x) > 1 and y * math.log2(abs(x)) >= 62.0:
            raise OverflowError("an int power beyond 64 bits")
        return x ** y

    @overload(_real_pow)
    def _rpow(x, y):
        if isinstance(x, types.Integer) and isinstance(y, types.Integer):
            return int_pow
        return lambda x, y: float(x) ** float(y)
    taught = {_pow_plain} | _teach_arrays(numba, types, overload)
    if hasattr(math, 'cbrt') and not _knows(numba, math.cbrt):
        @overload(math.cbrt)
        def _cbrt(x):
            if isinstance(x, (types.Float, types.Integer)):
                return lambda x: np.cbrt(float(x))
    return taught


def _teach_arrays(numba, types, overload):
    """numba implementations of numpy's reductions as numpy computes them (``_sum``,
    ``_max``) and of array primitives' plain implementations (the ``NUMBA`` table's), for
    C-ordered float64 arrays; other arguments find none, and the program runs as Python.
    Returns the plain implementations it teaches (left as they are in generated code)."""
    global _block_sum, _pairwise, _reduce_middle    # (they call each other compiled)
    global _product, _product_y, _product_xy, _stacked
    _block_sum, _pairwise = _helper(numba, _block_sum), _helper(numba, _pairwise)
    _product_xy = _helper(numba, _product_xy)
    _product_y = _static_where_c(numba, _product_y, 1)
    _product = _static_where_c(numba, _product, 0)
    _reduce_middle = _helper(numba, _reduce_middle)
    _stacked = _helper(numba, _stacked)

    @overload(_slab)
    def slab(x, i):                     # a matrix of a stack, or the matrix itself
        if x.ndim == 3:
            return lambda x, i: x[i % x.shape[0]]
        return lambda x, i: x

    def reduction(a, axis, keepdims, kind):
        if not (isinstance(a, types.Array) and a.dtype == types.float64 and a.layout == 'C'
                and a.ndim >= 1):
            return None
        if axis is None or isinstance(axis, (types.NoneType, types.Omitted)):
            axis = None
        else:                           # an axis, or a run of adjacent axes
            axes = axis.types if isinstance(axis, types.BaseTuple) else (axis,)
            if not all(isinstance(t, types.IntegerLiteral) and -a.ndim <= t.literal_value < a.ndim
                       for t in axes) or not axes:
                return None
            axis = sorted(t.literal_value % a.ndim for t in axes)
            if axis != list(range(axis[0], axis[0] + len(axis))):
                return None
            axis = (axis[0], axis[-1] + 1)
        if keepdims is None or isinstance(keepdims, types.Omitted):
            keepdims = False
        elif isinstance(keepdims, types.BooleanLiteral):
            keepdims = keepdims.literal_value
        else:
            return None
        return _reduction(a.ndim, axis, keepdims, kind)

    def typer(kind):                    # (numba wants the signature of the function)
        return lambda a, axis=None, keepdims=False: reduction(a, axis, keepdims, kind)

    for kind, fn in enumerate((_sum, _max, _min, _mean)):
        overload(fn)(typer(kind))

    @overload(_reshape)
    def reshape(a, shape):              # numba reshapes contiguous arrays only: numpy copies
        if isinstance(a, types.Array):
            if a.layout == 'C':
                return lambda a, shape: a.reshape(shape)
            return lambda a, shape: np.ascontiguousarray(a).reshape(shape)
        if isinstance(a, types.Float):  # (a full reduction's result is a float in numba)
            return lambda a, shape: np.full(shape, a)

    @overload(_expand_dims)
    def expand_dims(a, axis):
        if isinstance(a, types.Array) and isinstance(axis, types.Integer):
            return lambda a, axis: np.expand_dims(a, axis)
        if isinstance(a, types.Float):
            ones = (1,) * (len(axis.types) if isinstance(axis, types.BaseTuple) else 1)
            return lambda a, axis: np.full(ones, a)
    sum_to = _helper(numba, _sum_to)

    @overload(operator.matmul)
    def matmul(a, b):                   # numba's '@' takes 1-d and 2-d arrays only
        if not (isinstance(a, types.Array) and isinstance(b, types.Array) and
                {a.ndim, b.ndim} <= {2, 3} and 3 in (a.ndim, b.ndim) and
                a.dtype == b.dtype == types.float64):
            return None
        return lambda a, b: _stacked(a, b)

    _NAMES.update(_nb_reciprocal=_helper(numba, _reciprocal), _nb_sum_to=sum_to,
                  _nb_scatter_add=_helper(numba, _scatter_add))

    @overload(_power_plain)
    def power(x, y):
        # (the plain implementation's np.errstate only silences warnings, which numba does
        # not give.)  numpy's loop takes a scalar exponent 0.5 as a square root: -0.0 at
        # -0.0 and nan at -inf, where C's pow gives 0.0 and inf.  Ints to ints: none (numpy
        # raises at negative exponents), and the program runs as Python.
        if all(isinstance(getattr(t, 'dtype', t), types.Integer) for t in (x, y)) or \
                not any(isinstance(t, types.Array) for t in (x, y)):
            return None
        if isinstance(y, (types.Float, types.Integer)):
            def scalar_exponent(x, y):
                if y == 0.5:
                    return np.sqrt(x)
                return np.power(x, float(y))
            return scalar_exponent
        return lambda x, y: np.power(x, y)
    return {_power_plain}


# ---------------------------------------------------------------- helpers cached on disk
# The functions above compile once per signature and process, typed and optimised apart
# (a second or so each); as numba's cached functions their machine code is kept in
# ``cache_dir()/helpers``, so a new program (in any process) calls the helpers its
# signatures already compiled instead of compiling them again.  numba's index of them is
# keyed by signature and voided when this file changes (its time and size) or numba's
# version does.  Overloads (the small functions choosing among them by type) cannot be
# cached: they are compiled into each program.
_HELPERS = []           # the helpers' dispatchers
_HELPERS_AT = [None]    # the cache directory their caches were made for


def _helper(numba, fn):
    dispatcher = numba.njit(fn)
    _HELPERS.append(dispatcher)
    _HELPERS_AT[0] = None
    return dispatcher


def _cache_helpers(directory):
    """Point the helpers' caches at ``directory/helpers`` (again, if it moved: a test or
    a benchmark sets ``NESTAD_CACHE_DIR`` per run)."""
    where = os.path.join(directory, 'helpers')
    if _HELPERS_AT[0] == where:
        return
    from numba.core import caching

    class Locator(caching.UserProvidedCacheLocator):
        def __init__(self, py_func, py_file):
            self._py_file, self._lineno = py_file, py_func.__code__.co_firstlineno
            self._cache_path = os.path.join(where, self.get_suitable_cache_subpath(py_file))

        @classmethod
        def from_function(cls, py_func, py_file):
            # (numba's, less its test of NUMBA_CACHE_DIR)
            return super(caching.UserProvidedCacheLocator, cls).from_function(py_func, py_file)

    class Impl(caching.CompileResultCacheImpl):
        _locator_classes = [Locator]

    class Cache(caching.FunctionCache):
        _impl_class = Impl

    for dispatcher in _HELPERS:
        try:
            dispatcher._cache = Cache(dispatcher.py_func)
        except Exception:               # (no writable directory, no source file: not cached)
            dispatcher._cache = caching.NullCache()
    _HELPERS_AT[0] = where


def _static_where_c(numba, fn, k):
    """fn compiled, with its run-time choice of layout for operand ``k`` skipped where
    numba's type says it is C-ordered (its flags would pick the C branch): each branch
    taken costs numba a typed copy of the rest of the chain and its BLAS calls (a
    stacked product of a C stack and a transposed one took 25 s to compile)."""
    from numba.extending import overload
    compiled = _helper(numba, fn)

    def stub(x, y, out):
        return fn(x, y, out)

    @overload(stub)
    def choose(x, y, out):
        if (x, y)[k].layout == 'C':
            rest = globals()['_product_y' if k == 0 else '_product_xy']
            return lambda x, y, out: rest(x, y, out)
        return lambda x, y, out: compiled(x, y, out)
    return stub


def _reciprocal(x):
    return 1.0 / x                      # numpy's reciprocal of a float: IEEE's 1 / x


def _slab(x, i):
    """Matrix ``i`` of a stack (batch axes of length 1 broadcast), or a matrix itself:
    numba's implementation is taught (``_teach_arrays``)."""
    return x[i % x.shape[0]] if x.ndim == 3 else x


def _stacked(a, b):
    """``a @ b`` where one or both are stacks of matrices: one product per matrix of the
    stack (the shapes were checked by numpy when the program was traced)."""
    n = max(a.shape[0] if a.ndim == 3 else 1, b.shape[0] if b.ndim == 3 else 1)
    out = np.empty((n, a.shape[-2], b.shape[-1]))
    for i in range(n):
        _product(_slab(a, i), _slab(b, i), out[i])
    return out


def _product(x, y, out):
    """out = x @ y by the BLAS call numpy makes: gemv where a side is a vector, else gemm,
    a transposed (Fortran-ordered) operand passed as such, not copied."""
    if x.flags.f_contiguous and not x.flags.c_contiguous:
        _product_y(np.asfortranarray(x), y, out)
    else:
        _product_y(np.ascontiguousarray(x), y, out)


def _product_y(x, y, out):
    if y.flags.f_contiguous and not y.flags.c_contiguous:
        _product_xy(x, np.asfortranarray(y), out)
    else:
        _product_xy(x, np.ascontiguousarray(y), out)


def _product_xy(x, y, out):
    if x.shape[0] == 1:
        out[0, :] = x[0, :] @ y
    elif y.shape[1] == 1:
        out[:, 0] = x @ y[:, 0]
    else:
        np.dot(x, y, out)       # (gemm into the stack's slab: no product allocated, copied)


def _scatter_add(g, index, shape):
    """numpy's scatter_add (``_scatter_plain``: zeros of ``shape`` with g added at
    ``index``) for any index numba's indexing takes, advanced ones (2-d integer arrays)
    included: the flat positions the index selects, and g added at them in order from
    0.0, as numpy's ``bincount`` adds its weights."""
    size = 1
    for n in shape:
        size *= n
    picked = np.arange(size).reshape(shape)[index]
    terms = np.ascontiguousarray(np.broadcast_to(g, picked.shape)).ravel()
    where = picked.ravel()
    out = np.zeros(size)
    for i in range(where.size):
        out[where[i]] += terms[i]
    return out.reshape(shape)


def _sum_to(x, shape):
    """numpy's ``sum_to`` (``_sum_to_plain``): the summed axes, past those of length 1,
    must be adjacent (one run, as numpy adds them); otherwise ValueError, which the staged
    function answers by running the program as Python."""
    xs = x.shape
    lead = len(xs) - len(shape)
    pre = mid = post = 1
    state = 0                       # 0: before the summed run, 1: in it, 2: after it
    for i in range(len(xs)):
        n = xs[i]
        if n == 1:
            continue
        if i < lead or shape[i - lead] == 1:
            if state == 2:
                raise ValueError("sum_to: summed axes apart")
            state = 1
            mid *= n
        elif state == 0:
            pre *= n
        else:
            state = 2
            post *= n
    out = _reduce_middle(np.ascontiguousarray(x).reshape((pre, mid, post)), 0)
    return out.reshape(shape)


# numba's lowering table: where numba's code calls its own implementation of an array
# primitive rather than the plain one (numba's numpy subset lacks it, or adds in
# another order).  Its names are bound once numba is imported (``_teach_arrays``).
_NAMES = {}


NUMBA = lowering.register('numba', {
    'numpy.reciprocal': '_nb_reciprocal({0})', 'numpy.sum_to': '_nb_sum_to({0}, {shape})',
    'numpy.scatter_add': '_nb_scatter_add({0}, {index}, {shape})'}, _NAMES)


def _knows(numba, fn):
    """Whether numba has a type for ``fn`` (asked of its typing context, without compiling)."""
    from numba.core.registry import cpu_target
    ctx = cpu_target.typing_context
    ctx.refresh()
    try:
        ctx.resolve_value_type(fn)
    except (ValueError, numba.core.errors.TypingError):
        return False
    return True


def cache_dir():
    """Where compiled numba code is kept between processes: ``$NESTAD_CACHE_DIR/numba``,
    else ``$XDG_CACHE_HOME/nestad/numba`` (``~/.cache/nestad/numba``)."""
    root = os.environ.get('NESTAD_CACHE_DIR') or os.path.join(
        os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache'),
        'nestad')
    return os.path.join(root, 'numba')


def _fingerprint(value):
    """A text standing for what ``value`` computes, the same in every process; None if
    there is none (an object known only by its address)."""
    if isinstance(value, np.ndarray):
        digest = hashlib.sha256(value.tobytes()).hexdigest()
        return f"array {value.dtype.str} {value.shape} {digest}"
    if isinstance(value, _pytypes.ModuleType):
        return f"module {value.__name__}"
    if isinstance(value, type):
        return f"type {value.__module__}.{value.__qualname__}"
    code = getattr(value, '__code__', None)
    if code is not None:
        cells = [_fingerprint(c.cell_contents) for c in value.__closure__ or ()]
        return None if None in cells else \
            f"function {value.__module__}.{value.__qualname__} {_code_key(code)} {cells}"
    text = repr(value)
    return None if ' at 0x' in text else f"{type(value).__name__} {text}"


def _code_key(code):
    consts = [_code_key(c) if isinstance(c, _pytypes.CodeType) else repr(c) for c in code.co_consts]
    return hashlib.sha256(repr((code.co_code, consts, code.co_names)).encode()).hexdigest()


def _cache_file(source, glb, directory, options=""):
    """A file in ``directory`` holding ``source`` for numba's ``cache=True``, named by a hash
    of the source, its globals' values, and the versions of what compiles it; None when a
    global has no stable fingerprint or the directory cannot be written."""
    import numba
    parts = [source, numba.__version__, np.__version__, _SELF, f"opt {OPT_LEVEL}", options,
             _code_key(compile_numba.__code__),
             _fingerprint(_teach_arrays), _fingerprint(_teach)]
    for name in sorted(glb):
        if name.startswith('__') or name in _NAMES:     # (_NAMES: _teach_arrays's, above)
            continue
        value = glb[name]       # (an array is an argument of numba's function: its type counts)
        fp = f"array {value.dtype.str} {value.ndim}" if isinstance(value, np.ndarray) \
            else _fingerprint(value)
        if fp is None:
            return None
        parts.append(f"{name}={fp}")
    key = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:40]
    path = os.path.join(directory, f"staged_{key}.py")
    try:
        if not os.path.exists(path):        # (rewritten, its new time would void numba's index)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, 'w') as f:
                f.write(source + "\n")
            os.replace(tmp, path)
    except OSError:
        return None
    return path


_NUMPY = _numpy_for_numba()
# (numba's cache checks the staged code's file only: the implementations it calls, all in
# this module, count through its text)
try:
    with open(__file__, 'rb') as _f:
        _SELF = hashlib.sha256(_f.read()).hexdigest()
except OSError:                         # (no source file: the functions' code below)
    _SELF = ''


_NAMING = re.compile(r"(Use of unsupported NumPy function '[^']*'|No implementation of function "
                     r"[^\n]*\n\s*>>> [^\n]*|Unknown attribute '[^']*' of type [^\n]*|"
                     r"got an unexpected keyword argument '[^']*')")


def _complaint(e):
    """The line of numba's error that names what it could not compile (its first line,
    'Failed in nopython mode pipeline', does not)."""
    text = re.sub(r'\x1b\[[0-9;]*m', '', str(e))
    m = _NAMING.search(text)
    if m:
        line = re.sub(r'\s+', ' ', m.group(1).replace('Function(<function ', '(')
                      .replace('found for signature: >>> ', 'for '))
    else:
        line = text.strip().splitlines()[0] if text.strip() else "inside numba"
    return f"{type(e).__name__}: {line}"


# LLVM's optimisation level for a staged program's compile (its callees included).  A
# staged program is one long function of array loops, and LLVM's O3 passes over it are
# most of a cold compile; level 1 or 2 compiles GradBench's gmm gradient in about 40 s of
# CPU against 64 s at 3, but its calls then run 13-24% slower (notes/benchmarks.md,
# "numba's cold compile").  The default stays numba's 3 (those who pick numba pick it for
# the calls); a user who compiles often and calls little may set this lower.
OPT_LEVEL = 3


# LLVM's loop vectorizer only for a program with an array of at least this many elements.
# A staged jet's arrays are small (the largest in GradBench's ode jets 21-567 elements,
# gmm's 720 at k = 1), and vectorizing each of its many short loops (a vector body, a
# remainder, run-time alias checks) is a third of LLVM's time: gmm's jet at k = 1 compiled
# in 137 s of CPU without it against 212 s, and its calls ran as fast (notes/benchmarks.md,
# "numba-tier").  Large arrays keep it (GradBench's gmm objective, 50,000 entries, ran
# 13-24% slower at LLVM levels that do not vectorize); the bound between is a guess.
VECTORIZE_FROM = 4096


def _largest(program):
    """The most elements of any array of the program (its loops' included)."""
    most = 1
    for v in program.inputs:
        most = max(most, int(np.prod(getattr(v, 'shape', ()) or (1,))))
    for eqn in program.eqns:
        for v in list(eqn.outs) + list(eqn.args):
            shape = getattr(v, 'shape', None)
            if shape:
                most = max(most, int(np.prod(shape)))
        for p in eqn.params.values():
            if isinstance(p, Program):
                most = max(most, _largest(p))
    return most


class _optimisation(object):
    """numba's optimisation level set to ``level``, and its loop vectorizer on or off,
    while a staged program compiles (its callees are compiled then too): numba reads
    ``config.OPT`` and ``config.LOOP_VECTORIZE`` whenever it optimises a function (its
    cheap module pass reads its codegen's ``_loopvect``).  The compiler lock is held so
    that no other thread compiles meanwhile."""

    def __init__(self, numba, level, vectorize=True):
        from numba.core import config
        from numba.core.compiler_lock import global_compiler_lock
        from numba.core.registry import cpu_target
        self.config, self.lock, self.level = config, global_compiler_lock, level
        self.vectorize, self.codegen = int(vectorize), cpu_target.target_context.codegen()

    def __enter__(self):
        self.lock.acquire()
        self.saved = self.config.OPT, self.config.LOOP_VECTORIZE, \
            getattr(self.codegen, '_loopvect', None)
        self.config.OPT = type(self.saved[0])(self.level)
        self.config.LOOP_VECTORIZE = self.vectorize
        if self.saved[2] is not None:
            self.codegen._loopvect = bool(self.vectorize and self.saved[2])

    def __exit__(self, *exc):
        self.config.OPT, self.config.LOOP_VECTORIZE = self.saved[:2]
        if self.saved[2] is not None:
            self.codegen._loopvect = self.saved[2]
        self.lock.release()


# A long program is compiled in pieces of about this many top-level lines
# (``codegen.python_sources``: each piece a function taking the variables live where it
# starts, the last function calling them in turn).  LLVM's time grows faster than a
# function's length (its SROA pass over the allocas of every variable: 27 of the 82 s of
# CPU of GradBench's ode jet at k = 1 as one function of 636 equations); in pieces, 62 s
# (numba still links the pieces' code into the calling function and optimises it there).
PIECE_LINES = 100


def _taking(source, arrays, calls):
    """A function of ``python_sources`` taking the constant ``arrays`` as its last
    parameters; ``calls``: its lines call the pieces (``_s = staged_1(*_s)``), which
    pass the arrays on."""
    extra = ", ".join(arrays)
    head, *lines = source.split("\n")                 # def staged(x, y):
    head = head[:-2] + (", " if head[-3] != "(" else "") + extra + "):"
    if calls:
        for i, line in enumerate(lines):
            call, args = line[:-1].split("(", 1)
            args = f"*(_s + ({extra},))" if args == "*_s" else (args + ", " if args else "") + extra
            lines[i] = f"{call}({args})"
    return "\n".join([head] + lines)


def _with_constants(jitted, arrays):
    def staged(*args):
        return jitted(*args, *arrays)
    staged.dispatcher = jitted
    return staged


def _load_cached(dispatcher, args):
    """Whether ``dispatcher``'s code for ``args`` was in its disk cache; if so it is
    loaded and added, as numba's own ``Dispatcher.compile`` does with a cache hit."""
    from numba.core.compiler_lock import global_compiler_lock
    with global_compiler_lock:
        sig = tuple(dispatcher.typeof_pyval(a) for a in args)
        cres = dispatcher._cache.load_overload(sig, dispatcher.targetctx)
        if cres is None:
            return False
        dispatcher._cache_hits[sig] += 1
        dispatcher.targetctx.insert_user_function(cres.entry_point, cres.fndesc, [cres.library])
        dispatcher.add_overload(cres)
    return True


def compile_numba(fn, program, directory=None, info=None, load_only=False):
    """``program`` spelled with numba's lowering table and compiled by numba, with its
    machine code cached on disk (in ``directory``, by default ``cache_dir()``); or ``fn``
    (the Python backend's function of it) itself, with a warning, where numba cannot
    compile it.  ``info``, a dict, gets the cache file's path (None: not cached).
    ``load_only``: the program's code loaded from the disk cache, or None where it is not
    there (nothing compiled: the tiered backend's switch must not pause for minutes)."""
    try:
        import numba
    except ImportError:
        raise InvalidInputError('stage(backend="numba") needs numba: pip install "nestad[numba]"') \
            from None
    if _narrow_float(program):
        warnings.warn("numba would compute a staged program's float32 values in float64 (it "
                      "promotes float32 with Python floats, numpy does not); it runs as Python "
                      "code instead", NumbaFallbackWarning, stacklevel=4)
        return fn
    taught = _teach(numba)
    directory = directory or cache_dir()
    _cache_helpers(directory)
    sources, glb = python_sources(program, fn.__name__, backend='numba', piece=PIECE_LINES)
    # Constant arrays become arguments (of every piece): numba would freeze them into the
    # machine code (slow to compile for large ones, and code holding them is not cached).
    arrays = [name for name, value in glb.items() if isinstance(value, np.ndarray)]
    if arrays:
        sources = [_taking(src, arrays, j == len(sources) - 1 > 0) for j, src in enumerate(sources)]
    source = "\n\n".join(sources)
    pieces = [f"{fn.__name__}_{j}" for j in range(len(sources) - 1)]
    vectorize = _largest(program) >= VECTORIZE_FROM
    path = _cache_file(source, glb, directory, f"vectorize {vectorize}")
    if info is not None:
        info['path'] = path
    glb['np'] = _NUMPY
    # numba loading cached code imports the module its globals name (compiled nopython
    # code reads no global at run time): this one, as the generated module is no module
    glb['__name__'] = __name__
    try:
        for name, value in list(glb.items()):
            if name.startswith('_p_') and callable(value) and value not in taught:
                # (``value.numba``: a version that raises where numba's arithmetic
                # would not give Python's answer, so that the call reruns as Python)
                glb[name] = numba.njit(cache=False)(getattr(value, 'numba', value))
        exec(compile(source, path or f"<nestad staged {fn.__name__}>", "exec"), glb)
        for name in pieces:         # (the last function calls them from the module's globals)
            glb[name] = numba.njit(cache=path is not None)(glb[name])
        jitted = numba.njit(cache=path is not None)(glb[fn.__name__])
        # (C-ordered: a view traced as a constant or an argument pickles as a copy, and the
        # tiered backend's child compiles for the copy's layout; numba's cache is keyed by it)
        constants = [np.ascontiguousarray(glb[name]) for name in arrays]
        example = [np.ascontiguousarray(a) if isinstance(a, np.ndarray) else a
                   for a in program.example]
        if load_only and (path is None or not _load_cached(jitted, example + constants)):
            return None
        if arrays:
            jitted = _with_constants(jitted, constants)
        if load_only:
            return jitted
        with warnings.catch_warnings(), _optimisation(numba, OPT_LEVEL, vectorize):
            warnings.simplefilter('ignore', numba.NumbaPerformanceWarning)  # ('@' of non-contiguous)
            jitted(*example)            # compile now, at the example the program was traced at
    except Exception as e:              # numba's typing and lowering errors have many types
        if isinstance(e, GuardFailure):
            raise
        warnings.warn(f"numba could not compile a staged program ({_complaint(e)}); it runs "
                      "as Python code instead", NumbaFallbackWarning, stacklevel=4)
        return fn
    return jitted
