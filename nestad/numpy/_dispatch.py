"""Plain numpy calls on nestad values, and array methods on ArrayBundle/ArrayTapeCell.

``numpy.sin(x)`` or ``a @ x`` with a nestad value reaches ``__array_ufunc__``;
``numpy.sum(x)`` reaches ``__array_function__``.  Both look the function up here and
call nestad.numpy's version; a numpy function nestad does not know raises a TypeError
naming it, instead of silently computing on primal values and dropping the derivative.
"""
import sys
import threading

import numpy as np

from . import _contract, _elementwise, _indexing, _plumbing, _products, _reductions
from ..lifting import ARRAY_ROUTES
from ..batching import batched_top, call_per_member
from ..structures import flatten
from .. import perturbation
from ..arrays import ArrayBundle, ArrayTapeCell, Compact
from ..errors import BatchedConversionError, PerturbedConversionError
from ..tracer import ArrayTracer
from ..values import Batched, Bundle, Perturbed, TapeCell, modular_pow_error, primal_value

_NAMESPACES = []       # (numpy module, nestad's mirror of it), given to install()


def _mirrors():
    """{numpy callable: nestad.numpy function}: every function nestad.numpy (and its linalg)
    defines mirrors numpy's function of the same name, so defining it there is what
    makes numpy's dispatch reach it."""
    table = {}
    for module, namespace in _NAMESPACES:
        for name, fn in vars(namespace).items():
            if name.startswith('_') or not callable(fn) or isinstance(fn, type) or \
                    not getattr(fn, '__module__', '').startswith('nestad'):
                continue
            target = getattr(module, name, None)
            if callable(target) and getattr(target, '__module__', None) != 'nestad':
                table[target] = fn
    return table


def _value_of(fn, of_shape=False):
    """A numpy function of the value alone (no derivative to keep); ``of_shape``: of its
    shape and dtype alone (then the same for every member of a batched value)."""
    def of_value(x, *a, **k):
        v = primal_value(x)
        if v.__class__ is Batched:
            if of_shape:
                return fn(np.zeros(v.shape, v.dtype), *a, **k)
            return _elementwise._batched_constant(fn, [v], k) if not a else fn(v, *a, **k)
        return fn(v, *a, **k)
    return of_value


def _result_type(*xs):
    return np.result_type(*[x.dtype if isinstance(x, Perturbed) else x for x in xs])


# Functions of values that read no derivative (tests, shapes) or of real values only.
_BY_VALUE = {
    np.isnan: _value_of(np.isnan), np.isfinite: _value_of(np.isfinite),
    np.isinf: _value_of(np.isinf), np.zeros_like: _value_of(np.zeros_like, True),
    np.ones_like: _value_of(np.ones_like, True), np.result_type: _result_type,
    np.imag: _value_of(np.zeros_like, True),
    np.shape: lambda x: x.shape, np.ndim: lambda x: x.ndim, np.size: lambda x: x.size,
    np.allclose: lambda a, b, **k: np.allclose(primal_value(a), primal_value(b), **k),
    np.conjugate: lambda x: x, np.real: lambda x: x,       # of real values
    np.iscomplex: _value_of(np.iscomplex), np.isreal: _value_of(np.isreal),
    np.iscomplexobj: _value_of(np.iscomplexobj, True), np.isrealobj: _value_of(np.isrealobj, True),
}
UFUNCS = {}          # numpy ufunc -> nestad.numpy function  (filled by install)
FUNCTIONS = {}       # other numpy function -> nestad.numpy function


def _fill(namespace):
    _NAMESPACES[:] = [(np, namespace), (np.linalg, namespace.linalg)]
    for f, fn in {**_mirrors(), **_BY_VALUE}.items():
        (UFUNCS if isinstance(f, np.ufunc) else FUNCTIONS)[f] = fn
    if hasattr(np, 'astype'):            # numpy >= 2.1
        FUNCTIONS[np.astype] = namespace.astype


# What to use instead of some numpy functions nestad does not differentiate.
ALTERNATIVES = {
    'numpy.add.accumulate': 'nestad.numpy.cumsum',
    'numpy.add.at': "the functional update x.at[index].add(values)",
    'numpy.copyto': "nestad.numpy.full_like(a, x), or the functional update "
                    "nestad.numpy.at(out)[index].set(x)",
    'numpy.linalg.lstsq': 'nestad.numpy.linalg.pinv(a) @ b (or nestad.numpy.linalg.solve of the '
                          'normal equations)',
}


def _public_name(func):
    """numpy.linalg.eigh, numpy.fft.fft, numpy.sort: the name a user calls the function by."""
    module = getattr(func, '__module__', None) or 'numpy'
    if module.startswith('numpy._core') or module.startswith('numpy.core'):
        module = 'numpy'
    return f"{module}.{getattr(func, '__name__', repr(func))}"


_SCIPY_ADVICE = (
    "nestad.scipy.special and nestad.scipy.stats have differentiable versions of some scipy "
    "functions (README, section SciPy); for another, write it with nestad.numpy functions or "
    "define a primitive with nestad.primitive(f).defpartials(...) (README, section "
    "Controlling differentiation, and adding primitives)")


def _scipy_caller():
    """'scipy.stats.rv_continuous.logpdf': the outermost scipy function on the stack, when a
    nestad value reached numpy from inside scipy (the user called that function, not the
    numpy one); None otherwise.  Only on the way to an error."""
    frame, found = sys._getframe(1), None
    while frame is not None:
        module = frame.f_globals.get('__name__', '')
        if module == 'scipy' or module.startswith('scipy.'):
            found = f"{'.'.join(module.split('.')[:2])}.{frame.f_code.co_qualname}"
        elif found:
            break
        frame = frame.f_back
    return found


def _foreign_ufunc(ufunc):
    """The error for a ufunc that is not numpy's: scipy.special's (gammaln, the private ones
    its functions call), whose rules nestad.scipy installs."""
    name = ufunc.__name__
    special = sys.modules.get('scipy.special')
    if special is not None and getattr(special, name, None) is ufunc:
        name = f"scipy.special.{name}"
    else:
        caller = _scipy_caller()
        name = f"{caller} (through the ufunc {name})" if caller else f"the ufunc {name}"
    if 'nestad.scipy' not in sys.modules:
        return TypeError(
            f"{name} on a nestad value: import nestad.scipy first; it makes scipy.special's "
            "functions that nestad.scipy.special has rules for differentiate (or call "
            f"nestad.scipy.special's function itself). {_SCIPY_ADVICE}.")
    return TypeError(f"{name} is not differentiable by nestad: calling it on a nestad value "
                     f"would drop the derivative. {_SCIPY_ADVICE}.")


def _unsupported(name):
    caller = _scipy_caller()
    if caller:
        return TypeError(
            f"{caller} is not differentiable by nestad: it passes its nestad argument to {name}, "
            f"which would drop the derivative. {_SCIPY_ADVICE}.")
    alternative = ALTERNATIVES.get(name)
    instead = (f"Use {alternative} instead" if alternative else
               "nestad.numpy has no differentiable version of it: use the functions nestad.numpy "
               "provides (README, section Arrays)")
    return TypeError(
        f"{name} is not differentiable by nestad: calling it on a nestad value would drop "
        f"the derivative. {instead}, or nestad.primal_value(x) if you want the value "
        "without its derivative.")


_active = threading.local()


def _call(name, fn, args, kwargs, func=None):
    # nestad's version of a numpy function may compute a value with numpy's own function
    # (np.linalg.slogdet(primal_value(a)) for the sign).  On a value batched by vmap that
    # call comes back here: it is then applied member by member (it reads values only).
    for a in args:
        if a.__class__ is Batched:
            break
    else:
        return _call_once(name, fn, args, kwargs)
    if func in _BY_VALUE:
        return _call_once(name, fn, args, kwargs)
    leaves, tree = flatten((args, kwargs))
    top = batched_top(leaves)
    if top is None:
        return _call_once(name, fn, args, kwargs)
    active = getattr(_active, 'calls', None)
    if active is None:
        active = _active.calls = set()
    key = (func, top)
    if key in active:
        return call_per_member(lambda s: func(*s[0], **s[1]), leaves, tree, top,
                               _public_name(func))
    active.add(key)
    try:
        return _call_once(name, fn, args, kwargs)
    finally:
        active.discard(key)


def _call_once(name, fn, args, kwargs):
    try:
        return fn(*args, **kwargs)
    except TypeError as e:       # a keyword of numpy's that nestad's version does not take
        if 'unexpected keyword argument' not in str(e):
            raise
        raise TypeError(f"{name}(..., {', '.join(f'{k}=' for k in kwargs)}...) on a nestad value: "
                        f"nestad supports {name} without some of these keyword arguments "
                        f"({e})") from None


def _array_ufunc(self, ufunc, method, *inputs, **kwargs):
    name = f"numpy.{ufunc.__name__}"
    if kwargs.get('out') is not None:
        raise TypeError(f"{name}(..., out=...) cannot write a nestad value into a plain array; "
                        "use the result it returns (or x.at[index].set(values))")
    if method == '__call__':
        fn = UFUNCS.get(ufunc)
        if fn is None:
            raise (_unsupported(name) if getattr(np, ufunc.__name__, None) is ufunc
                   else _foreign_ufunc(ufunc))
        return _call(name, fn, inputs, {k: v for k, v in kwargs.items() if k != 'out'}, ufunc)
    if method == 'reduce' and ufunc in (np.add, np.multiply, np.maximum, np.minimum):
        reducer = {np.add: _plumbing.sum, np.multiply: _reductions.prod, np.maximum: _reductions.max,
                   np.minimum: _reductions.min}[ufunc]
        return reducer(inputs[0], axis=kwargs.get('axis', 0), keepdims=kwargs.get('keepdims', False))
    raise _unsupported(f"{name}.{method}")


def _array_function(self, func, types, args, kwargs):
    fn = FUNCTIONS.get(func)
    if fn is None:
        raise _unsupported(_public_name(func))
    return _call(_public_name(func), fn, args, kwargs, func)


def _reshape_method(self, *shape):
    return _plumbing.reshape(self, shape[0] if len(shape) == 1 else shape)


def _transpose_method(self, *axes):
    return _plumbing.transpose(self, axes[0] if len(axes) == 1 else (axes or None))


def _pow_method(self, other, mod=None):
    if mod is not None:                     # pow(x, y, mod)
        raise modular_pow_error()
    return _elementwise.power(self, other)


def _iter(self):
    for i in range(len(self)):
        yield self[i]


def _tolist(self):
    """Nested lists of nestad scalars (the entries keep their derivatives, as indexing does)."""
    flat = _plumbing.ravel(self)
    items = [_indexing.getitem(flat, k) for k in range(self.size)]
    for n in reversed(self.shape[1:]):
        items = [items[k:k + n] for k in range(0, len(items), n)]
    return items if self.shape else _indexing.getitem(self, ())


def _item(self, *index):
    """The entry as a nestad scalar (numpy's item gives a Python number, without derivative)."""
    if not index:
        if self.size != 1:
            raise ValueError("can only convert an array of size 1 to a Python scalar")
        index = (0,)
    return _indexing.getitem(_plumbing.ravel(self), index[0]) if len(index) == 1 else _indexing.getitem(self, index)


def _setitem(self, index, value):
    raise TypeError(
        "a nestad array cannot be assigned to (x[i] = v): its derivative needs the old values. "
        "Use the functional update x = x.at[i].set(v) (also .add, .multiply), which returns "
        "the updated array.")


def _len(self):
    s = self.shape
    if not s:
        raise TypeError("len() of a 0-d nestad array")
    return s[0]


ARRAY_METHODS = dict(
    __add__=lambda s, o: _elementwise.add(s, o), __radd__=lambda s, o: _elementwise.add(o, s),
    __sub__=lambda s, o: _elementwise.subtract(s, o), __rsub__=lambda s, o: _elementwise.subtract(o, s),
    __mul__=lambda s, o: _elementwise.multiply(s, o), __rmul__=lambda s, o: _elementwise.multiply(o, s),
    __truediv__=lambda s, o: _elementwise.divide(s, o), __rtruediv__=lambda s, o: _elementwise.divide(o, s),
    __pow__=_pow_method, __rpow__=lambda s, o: _elementwise.power(o, s),
    __matmul__=lambda s, o: _products.matmul(s, o), __rmatmul__=lambda s, o: _products.matmul(o, s),
    __mod__=lambda s, o: _elementwise.mod(s, o), __rmod__=lambda s, o: _elementwise.mod(o, s),
    __floordiv__=lambda s, o: _elementwise.floor_divide(s, o),
    __rfloordiv__=lambda s, o: _elementwise.floor_divide(o, s),
    __neg__=lambda s: _elementwise.negative(s), __pos__=lambda s: s,
    __abs__=lambda s: _elementwise.absolute(s),
    __getitem__=lambda s, i: _indexing.getitem(s, i), __iter__=_iter, __len__=_len,
    reshape=_reshape_method, transpose=_transpose_method, ravel=lambda s: _plumbing.ravel(s),
    flatten=lambda s: _plumbing.ravel(s), squeeze=lambda s, axis=None: _plumbing.squeeze(s, axis),
    swapaxes=lambda s, a, b: _plumbing.swapaxes(s, a, b),
    sum=lambda s, axis=None, keepdims=False: _plumbing.sum(s, axis, keepdims),
    mean=lambda s, axis=None, keepdims=False: _reductions.mean(s, axis, keepdims),
    prod=lambda s, axis=None, keepdims=False: _reductions.prod(s, axis, keepdims),
    max=lambda s, axis=None, keepdims=False: _reductions.max(s, axis, keepdims),
    min=lambda s, axis=None, keepdims=False: _reductions.min(s, axis, keepdims),
    dot=lambda s, o: _contract.dot(s, o),
    T=property(lambda s: _plumbing.transpose(s)),
    copy=lambda s: s, astype=lambda s, dtype, copy=True: _indexing.astype(s, dtype),
    tolist=_tolist, item=_item, at=property(lambda s: _indexing.at(s)), __setitem__=_setitem,
)


def _array(self, dtype=None, copy=None):
    # An integer or boolean dtype asked for (numpy.int64(x), numpy.asarray(x, dtype=int)):
    # the cast is piecewise constant, its derivative zero, so the values are the answer
    # and no derivative is dropped (as x.astype(int)).
    if dtype is not None and np.dtype(dtype).kind in 'biu':
        if not perturbation.is_live(self.tag):
            self._refuse(f"numpy.{np.dtype(dtype).name}()")
        return np.asarray(primal_value(self)).astype(dtype)
    if self.__class__ is Batched and perturbation.is_live(self.tag):
        raise BatchedConversionError(
            "converting a value batched by nestad.vmap to a plain numpy array (numpy.asarray, "
            "or indexing a numpy array with it) would need one array for all the members. Use "
            "nestad.numpy functions on it; for x[i] with i mapped: " + "an index batched by nestad.vmap (x[i] with i mapped) is not supported yet: each member "
            "would select other entries. Select with a one-hot product (x @ (arange(n) == i)) or "
            "nestad.numpy.where, or loop over the indices outside vmap.")
    # numpy.asarray / ndarray methods that cannot be intercepted would otherwise build an
    # object array and compute without the derivative.
    caller = _scipy_caller()
    if caller:
        raise PerturbedConversionError(
            f"{caller} is not differentiable by nestad: it converts its nestad argument to a "
            f"plain numpy array, which would drop the derivative. {_SCIPY_ADVICE}.")
    raise PerturbedConversionError(
        "converting a nestad value to a plain numpy array would drop its derivative "
        "(numpy.asarray, numpy.array, ndarray methods such as a.dot(x), storing it into a numpy "
        "array with out[i] = x, arithmetic with a numpy.ma masked array or a numpy.matrix on "
        "the left, which nestad does not support). Use nestad.numpy functions or the @ "
        "operator; build arrays of nestad values with nestad.numpy.array or stack, and update "
        "one functionally with nestad.numpy.at(out)[i].set(x) (x.at[i].set(v) on nestad arrays); "
        "cast with x.astype(numpy.float32).")


# Scalar nestad values answer the same non-arithmetic methods as numpy scalars do
# (x.sum(), x.reshape(1)); their arithmetic keeps the scalar fast paths.
SCALAR_METHODS = ('reshape', 'transpose', 'ravel', 'flatten', 'squeeze', 'sum', 'mean', 'prod',
                  'max', 'min', 'dot', 'T', 'copy', 'astype')
SCALAR_SELF = ('item', 'tolist')      # a nestad scalar is its own item


# Traced arrays compare elementwise into traced boolean arrays, as ndarrays do.
TRACER_COMPARISONS = dict(
    __lt__=lambda s, o: np.less(s, o), __le__=lambda s, o: np.less_equal(s, o),
    __gt__=lambda s, o: np.greater(s, o), __ge__=lambda s, o: np.greater_equal(s, o),
    __eq__=lambda s, o: np.equal(s, o), __ne__=lambda s, o: np.not_equal(s, o))


# A batched bool combines elementwise, per member (``|`` and ``&`` of conditions).
_logic = {op: ARRAY_ROUTES[op] for op in ('and', 'or', 'xor', 'not')}
BATCHED_LOGIC = dict(
    __and__=lambda s, o: _logic['and'](s, o), __rand__=lambda s, o: _logic['and'](o, s),
    __or__=lambda s, o: _logic['or'](s, o), __ror__=lambda s, o: _logic['or'](o, s),
    __xor__=lambda s, o: _logic['xor'](s, o), __rxor__=lambda s, o: _logic['xor'](o, s),
    __invert__=lambda s: _logic['not'](s))


def _over_members(npfn):
    """numpy.any / numpy.all of a whole value: of every member of a batched one too (rules
    use them to skip work that no entry needs, and to refuse bad entries)."""
    def fn(x, axis=None, **kwargs):
        v = primal_value(x)
        if axis is not None or kwargs or v.__class__ is not Batched:
            raise _unsupported(f"numpy.{npfn.__name__}")
        while isinstance(v, Perturbed):
            v = v.primal
        return npfn(v)
    return fn


FUNCTIONS.update({np.any: _over_members(np.any), np.all: _over_members(np.all)})


def install(namespace):
    """Make numpy's calls on nestad values reach ``namespace`` (the nestad.numpy module,
    which calls this once all its functions are defined)."""
    _fill(namespace)
    Perturbed.__array__ = _array
    Perturbed.__array_ufunc__ = _array_ufunc
    Perturbed.__array_function__ = _array_function
    for cls in (ArrayBundle, ArrayTapeCell, ArrayTracer, Compact):
        for name, fn in ARRAY_METHODS.items():
            setattr(cls, name, fn)
    for name, fn in TRACER_COMPARISONS.items():
        setattr(ArrayTracer, name, fn)
    for name, fn in {**ARRAY_METHODS, **BATCHED_LOGIC}.items():
        setattr(Batched, name, fn)
    for cls in (Bundle, TapeCell):
        for name in SCALAR_METHODS:
            setattr(cls, name, ARRAY_METHODS[name])
        for name in SCALAR_SELF:
            setattr(cls, name, lambda s: s)
