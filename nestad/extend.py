"""Adding primitives: a function of plain numbers or arrays, and its derivative rules.

Seed 001's form: for ``out = f(x1, ..., xn)`` write ``dout = a1 dx1 + ... + an dxn``
and give the partials ``ai`` as functions of the arguments and the output::

    @nd.primitive
    def softplus(x):
        return np.logaddexp(0.0, x)              # plain numbers or arrays in, out
    softplus.defpartials(lambda x, out: nd.numpy.exp(x - out))

Partials act elementwise (with numpy's broadcasting for several arguments).  For an
array function that is not elementwise, give its JVP and VJP per argument instead,
``jvp(t, *args, out, **params)`` and ``vjp(g, *args, out, **params)``::

    @nd.primitive
    def matvec(a, x):
        return a @ x
    matvec.defjvp(lambda t, a, x, out: t @ x, lambda t, a, x, out: a @ t)
    matvec.defvjp(lambda g, a, x, out: nd.numpy.outer(g, x), lambda g, a, x, out: a.T @ g)

``jacobian_f`` and ``hessian`` push many tangents at once, as leading batch axes of
``t``; a JVP written for one tangent is applied to each in turn.  A JVP that handles
the batch axes itself (addressing the argument's axes from the right, as nestad's own
do) says so with ``defjvp(..., batched=True)`` and is called once.

Write rules with nestad's functions (``nestad.numpy``, ``nestad.exp``...): they are
then differentiated in turn, so the primitive has derivatives of every order, in
every mode and pairing, batched (``jacobian_f``) and staged (``nd.stage`` records it
and calls ``f`` in the compiled code).  Keyword arguments are parameters, passed to
``f`` and the rules but not differentiated.  ``check_rules`` tests the rules against
finite differences and against each other.

Every call of a rule is checked (``_Rules``): its signature when given, and on each call
its arguments (one per rule) and its result: one real number or array of the shape its use
needs, carrying no perturbation its inputs do not.  A wrong one raises
``InvalidInputError`` naming the primitive, the argument and the call the rule must take.
"""
import inspect
from numbers import Real

import numpy as np

from . import batching
from .arrays import ArrayPrimitive, PerArgument, apply
from .errors import InvalidInputError, MissingRuleError
from .numpy._joining import one_tangent_at_a_time
from .numpy._plumbing import _align, _tangent_to, sum_to
from .numpy._plumbing import sum as _sum
from . import operators as _operators
from .tracer import _TracerBase, one_output_error
from .values import Batched, Perturbed, primal_value


def primitive(fn=None, *, name=None):
    """Declare ``fn`` a primitive (see the module docstring); ``name`` defaults to the
    function's module and qualified name.  Returns the differentiable function, whose
    ``defpartials``, ``defjvp`` and ``defvjp`` set its rules."""
    if fn is None:
        return lambda f: primitive(f, name=name)
    # (multiprocessing's workers run the main script as __mp_main__: the same name there,
    # so that programs pickled in the main process find it)
    module = '__main__' if fn.__module__ == '__mp_main__' else fn.__module__
    name = name or f"{module}.{fn.__qualname__}"
    prim = ArrayPrimitive(name, fn, namespace=None, user=True)
    batching.BATCH_RULES.pop(name, None)       # (a primitive defined again: its new rules)
    rules = _Rules(prim, fn)
    prim.jvps, prim.vjps = rules.jvp, rules.vjp

    def public(*args, **params):
        out = apply(prim, args, params)
        if out.__class__ in _COMMON or isinstance(out, _NUMBERS):
            return out
        raise one_output_error(name, out)      # (staged: checked when traced)
    public.__name__ = getattr(fn, '__name__', 'primitive')
    public.__qualname__ = getattr(fn, '__qualname__', public.__name__)
    public.__doc__ = fn.__doc__
    public.__wrapped__ = fn
    public.primitive = prim
    public.defpartials = lambda *partials: rules.set('partials', partials, public)
    public.defjvp = lambda *jvps, batched=False: rules.set('jvps', jvps, public, batched)
    public.defvjp = lambda *vjps: rules.set('vjps', vjps, public)
    prim.lifted = public
    return public


_FLOATS = frozenset((float, np.float64))
_COMMON = frozenset((float, np.ndarray, np.float64, int, bool, np.float32, np.int64, np.bool_))
_NUMBERS = (Perturbed, np.ndarray, np.generic, _TracerBase, Real)


# How each kind of rule is called, and what it returns (for messages).
_DEFINE = {'partials': 'defpartials', 'jvps': 'defjvp', 'vjps': 'defvjp'}
_RULE = {'partials': 'partial', 'jvps': 'JVP rule', 'vjps': 'VJP rule'}
_CALL = {'partials': "partial({args}, out, **params): the arguments, the primitive's output "
                     "and its keyword parameters, returning d out/d {arg} elementwise",
         'jvps': "jvp(t, {args}, out, **params): a tangent t of {arg}, the arguments, the "
                 "output (as out=) and the keyword parameters, returning the output's tangent",
         'vjps': "vjp(g, {args}, out, **params): a cotangent g of the output, the arguments, "
                 "the output (as out=) and the keyword parameters, returning {arg}'s cotangent"}


class _Rules:
    """A primitive's rules per argument: given ones, or derived from its partials.

    Every call of a rule is checked: the arguments it gets (one per rule), and its result
    (a real number or array of the shape its use needs, carrying no perturbation its
    inputs do not carry).  A result of another shape would otherwise be broadcast into a
    gradient of the wrong shape, or summed into wrong numbers."""

    def __init__(self, prim, fn):
        self.prim, self.fn = prim, fn
        self.short = prim.name.rsplit('.', 1)[-1]
        self.names = _positional_names(fn)        # None if fn takes *args
        self.arity = None if self.names is None else len(self.names)
        self.keywords = _keyword_names(fn)        # the parameters rules may be given
        self.partials = self.jvps = self.vjps = None
        self.batched = False
        self.made = {}                  # i -> checked JVP rule, ~i -> VJP rule
        self.jvp = PerArgument(self._made_jvp)
        self.vjp = PerArgument(self._made_vjp)

    def set(self, kind, rules, public, batched=False):
        define = f"{self.prim.name}.{_DEFINE[kind]}"
        if self.arity is not None and len(rules) != self.arity:
            raise InvalidInputError(f"{define}: {len(rules)} rules given for "
                                    f"{self.arity} arguments ({', '.join(self.names)})")
        if not all(callable(r) or r is None for r in rules):
            raise InvalidInputError(f"{self.prim.name}: each rule must be a function (or None "
                                    "for an argument that is never differentiated)")
        for i, rule in enumerate(rules):
            # A rule may require the plain function's keyword parameters, or leave out
            # those no call passes (checked at the call): either binds here.
            if rule is not None and not (_binds(rule, kind, self.arity) or
                                         _binds(rule, kind, self.arity, self.keywords)):
                raise InvalidInputError(
                    f"{define}: the {_RULE[kind]} for argument {i}{self._label(i)}, "
                    f"{_signature(rule)}, cannot be called as {self._call_form(kind, i)}. "
                    f"Give it the parameters {self._parameters(kind)}.")
        setattr(self, kind, tuple(rules))
        if kind == 'partials':        # elementwise partials: an elementwise primitive
            batching.BATCH_RULES[self.prim.qualname] = batching.elementwise
        if kind == 'jvps':
            self.batched = batched
        self.made.clear()
        return public

    def _made_jvp(self, i):
        rule = self.made.get(i)
        if rule is None:
            rule = self.made[i] = self._jvp(i)
        return rule

    def _made_vjp(self, i):
        rule = self.made.get(~i)
        if rule is None:
            rule = self.made[~i] = self._vjp(i)
        return rule

    def _pick(self, i, kind):
        given = getattr(self, kind)
        if given is not None and i < len(given) and given[i] is not None:
            return given[i]
        if self.partials is not None and i < len(self.partials) and self.partials[i] is not None:
            return None                      # derive from the partial
        mode, define = ("forward", "defjvp") if kind == 'jvps' else ("reverse", "defvjp")
        raise MissingRuleError(
            f"primitive {self.prim.name} has no {mode} ({define[3:].upper()}) rule for "
            f"argument {i}, so it cannot be differentiated in {mode} mode: give one with "
            f"{self.short}.{define}(...) or {self.short}.defpartials(...)")

    def _jvp(self, i):
        rule = self._pick(i, 'jvps')
        if rule is None:
            partial = self._partial(i)

            def jvp(t, *xs, out, **params):
                return _tangent_to(partial(xs, out, params) * _align(t, xs[i], out), t, xs[i], out)
            return jvp
        jvp = self._checked(rule, 'jvps', i)
        return jvp if self.batched else one_tangent_at_a_time(jvp, i)

    def _vjp(self, i):
        rule = self._pick(i, 'vjps')
        if rule is None:
            partial = self._partial(i)

            def vjp(g, *xs, out, **params):
                return sum_to(partial(xs, out, params) * g, _shape(xs[i]))
            return vjp
        return self._checked(rule, 'vjps', i)

    # ------------------------------------------------ checks of each call

    def _checked(self, rule, kind, i):
        """The JVP or VJP ``rule`` for argument i, each call checked: given one argument per
        rule (a parameter passed positionally would shift the arguments each rule sees),
        returning a real number or array of the output's shape (a JVP: with t's batch axes
        first) or the argument's (a VJP)."""
        n, batched = self.arity, kind == 'jvps' and self.batched

        def checked(lead, *xs, out, **params):
            if n is not None and len(xs) != n:
                raise self._count_error(xs)
            try:
                r = rule(lead, *xs, out=out, **params)
            except TypeError as e:
                self._refuse_call(e, rule, kind, i, xs, params)
                raise
            like = out if kind == 'jvps' else xs[i]
            if not batched:                  # the common cases, at once
                if r.__class__ is np.ndarray:
                    if like.__class__ is np.ndarray and r.shape == like.shape and \
                            r.dtype.kind == 'f':
                        return r
                elif r.__class__ in _FLOATS and like.__class__ in _FLOATS:
                    return r
            want = _shape(like)
            if batched:
                want = _shape(lead)[:len(_shape(lead)) - len(_shape(xs[i]))] + want
            return self._result(r, want, kind, i, lead, xs, out, params)
        return checked

    def _partial(self, i):
        """The partial for argument i, each call checked: a real number or array that
        broadcasts to the output's shape (a larger one would be summed into wrong numbers)."""
        partial, n = self.partials[i], self.arity

        def checked(xs, out, params):
            if n is not None and len(xs) != n:
                raise self._count_error(xs)
            try:
                p = partial(*xs, out, **params)
            except TypeError as e:
                self._refuse_call(e, partial, 'partials', i, xs, params)
                raise
            if p.__class__ in _FLOATS or p.__class__ is np.ndarray and p.dtype.kind == 'f' and \
                    p.shape == _shape(out):
                return p
            return self._result(p, _shape(out), 'partials', i, None, xs, out, params)
        return checked

    def _count_error(self, xs):
        return InvalidInputError(
            f"primitive {self.prim.name} was called with {len(xs)} positional arguments, "
            f"but its rules are for {len(self.names)} ({', '.join(self.names)}): pass the "
            "others by keyword (keyword arguments are parameters, given to the function "
            "and to every rule), or make them arguments of the function with a rule each.")

    def _refuse_call(self, e, rule, kind, i, xs, params):
        """Raise for a TypeError ``e`` from calling ``rule`` if its signature cannot take
        the call (else ``e`` is the rule's own, raised inside it)."""
        if not _binds(rule, kind, len(xs), params):
            given = f" and the keyword parameters {', '.join(params)}" if params else ""
            raise self._error(kind, i, f"{_signature(rule)} cannot take {len(xs) + 1} "
                                       f"positional arguments{given}") from e

    def _result(self, r, want, kind, i, lead, xs, out, params):
        """``r``, checked: a real number or array of shape ``want`` (a partial: one that
        broadcasts to it) carrying no perturbation newer than its inputs' (the common
        cases are accepted by the callers before this)."""
        value = r
        if isinstance(r, Perturbed):
            inputs = (lead, out) + xs + tuple(params.values())
            if r.tag > max((x.tag for x in inputs if isinstance(x, Perturbed)), default=-1):
                raise self._error(kind, i, (
                    "returned a value carrying a perturbation that none of its inputs carries: "
                    "it uses a value being differentiated from its closure (or a global), so the "
                    "rule's result would hold that value's derivative as a number. Compute the "
                    "rule from what it is given only (pass that value to the primitive as an "
                    "argument, with a rule of its own)"))
            value = primal_value(r)
        if isinstance(value, (np.ndarray, np.generic, _TracerBase, Batched)):   # (a member's)
            shape, dtype = tuple(value.shape), value.dtype
        elif isinstance(value, Real) and not isinstance(value, bool):
            shape, dtype = (), None
        else:
            hint = (" (the rules are one per argument, each returning one value: not a tuple "
                    "for all arguments, as a JAX custom_vjp rule returns)"
                    if isinstance(value, (tuple, list)) else "")
            raise self._error(kind, i, f"returned {_describe(value)}, not a real number or "
                                       f"array{hint}")
        if dtype is not None and dtype.kind not in 'fiu':
            raise self._error(kind, i, f"returned an array of dtype {dtype}: a derivative is "
                                       "a real (floating-point) number or array")
        if shape == want or kind == 'partials' and _broadcasts(shape, want):
            return r
        nb = len(want) - len(_shape(out)) if kind == 'jvps' else 0
        need = {'partials': f"a partial must broadcast to the output's shape {want} (the "
                            "output's shape, the argument's or a scalar)",
                'vjps': f"the cotangent of {self._name(i)} must have its shape {want}",
                'jvps': f"the output's tangent must have the output's shape {want[nb:]}"
                        + (f" after the {nb} leading batch axes of t, {want}" if nb else "")}
        raise self._error(kind, i, f"returned shape {shape}; {need[kind]}")

    def _error(self, kind, i, what):
        return InvalidInputError(
            f"primitive {self.prim.name}: the {_RULE[kind]} for argument {i}"
            f"{self._label(i)} {what}. Fix the rule given to "
            f"{self.short}.{_DEFINE[kind]}(...), called as {self._call_form(kind, i)}.")

    def _name(self, i):
        return self.names[i] if self.names is not None else f"argument {i}"

    def _label(self, i):
        return f" ({self.names[i]})" if self.names is not None else ""

    def _parameters(self, kind):
        args = self.names if self.names is not None else ['*args']
        return "(" + ", ".join({'partials': [], 'jvps': ['t'], 'vjps': ['g']}[kind] + args
                               + ['out']) + ")"

    def _call_form(self, kind, i):
        args = ', '.join(self.names) if self.names is not None else '*args'
        return _CALL[kind].format(args=args, arg=self._name(i))


def _shape(x):
    """The shape of a number, array, traced or perturbed value (numpy.shape of a float
    takes a microsecond: too slow for every call of a rule)."""
    while isinstance(x, Perturbed):
        if x.__class__ is Batched:          # a member's shape, as the rule sees it
            return tuple(x.shape)
        x = x.primal
    if x.__class__ is float or x.__class__ is int:
        return ()
    return tuple(x.shape) if hasattr(x, 'shape') else np.shape(x)


def _broadcasts(shape, to):
    """Does an array of ``shape`` broadcast to ``to`` without changing it?"""
    return len(shape) <= len(to) and all(s in (1, t) for s, t in zip(shape[::-1], to[::-1]))


def _describe(v):
    if v is None:
        return "None"
    if isinstance(v, (tuple, list)):
        return f"a {type(v).__name__} of {len(v)} values"
    if isinstance(v, bool):
        return f"a bool ({v})"
    return f"a {type(v).__module__}.{type(v).__qualname__} ({v!r:.40})" \
        if type(v).__module__ != 'builtins' else f"a {type(v).__name__} ({v!r:.40})"


def _positional_names(fn):
    """The names of ``fn``'s positional parameters without defaults (its arguments, one
    rule each), or None if it takes *args (or has no signature)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return None
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            and p.default is p.empty]


def _keyword_names(fn):
    """The names of ``fn``'s parameters that calls may pass by keyword (those with
    defaults, and keyword-only ones): rules receive them as keyword parameters."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return ()
    return tuple(p.name for p in params if p.kind == p.KEYWORD_ONLY or
                 p.kind == p.POSITIONAL_OR_KEYWORD and p.default is not p.empty)


def _binds(rule, kind, n, params=()):
    """False only when ``rule`` certainly cannot be called as its kind is, with ``n``
    arguments (None: unknown) and keyword ``params``."""
    try:
        sig = inspect.signature(rule)
    except (TypeError, ValueError):          # no signature (some builtins): do not guess
        return True
    keywords = dict.fromkeys(params)
    try:
        if kind == 'partials':
            if n is not None:
                sig.bind(*range(n + 1), **keywords)
        elif n is not None:
            sig.bind(*range(n + 1), out=None, **keywords)
        else:
            sig.bind_partial(None, out=None, **keywords)
    except TypeError:
        return False
    return True


def _signature(rule):
    try:
        return f"{getattr(rule, '__name__', 'rule')}{inspect.signature(rule)}"
    except (TypeError, ValueError):
        return repr(rule)


# ---------------------------------------------------------------- checking rules

def check_rules(f, *args, order=2, seed=0, step=1e-6, rtol=1e-5, ad_rtol=1e-9, **params):
    """Check ``f``'s derivatives at ``args`` to ``order``: raise ``AssertionError``
    naming the first disagreement, return a dict of the values compared otherwise.

    ``f`` is scalarised with random weights, ``F = sum(w * f) + sum(u * f**2) / 2`` (a
    uniform weight would hide an entry sent to the wrong place).  Checked:

    * order 1: the gradient of F by ``gradient_r``, by ``gradient_f`` (batched tangents
      for array arguments) and by one ``jvp`` per input direction (unbatched), with each
      other (``ad_rtol``) and with central differences (``rtol``, relative to 1 + the
      largest entry);
    * order k >= 2: along a random direction v, ``phi(t) = F(args + t v)``, the k-th
      derivative ``phi^(k)(0)`` by all 2^k nestings of ``derivative`` and
      ``gradient_r`` (each nesting exercises the rules of every lower order in another
      combination of modes), with each other and with a central difference of
      ``phi^(k-1)``.

    Keyword arguments are passed to ``f`` as parameters.  A rule that cannot take its call,
    or returns a result of the wrong shape or type, raises ``InvalidInputError`` naming it
    (the check every call of a rule makes) before anything is compared."""
    rng = np.random.default_rng(seed)
    args = [np.array(a, dtype=float) if isinstance(a, (list, tuple)) else a for a in args]
    shapes = [np.shape(a) for a in args]
    out0 = f(*args, **params)
    w = rng.uniform(0.5, 1.5, size=np.shape(out0))
    u = rng.uniform(0.5, 1.5, size=np.shape(out0))

    def F(*xs):
        y = f(*xs, **params)
        return _sum(w * y) + 0.5 * _sum(u * y * y)

    report = {}
    nums = tuple(range(len(args)))
    gr = _operators.gradient_r(F, argnums=nums)(*args)
    gf = _operators.gradient_f(F, argnums=nums)(*args)
    for j, a in enumerate(args):
        fd = _fd_gradient(F, args, j, step)
        by_jvp = np.zeros(shapes[j])
        for idx in np.ndindex(*shapes[j]):
            e = np.zeros(shapes[j])
            e[idx] = 1.0
            tangents = [e if k == j else np.zeros(shapes[k]) for k in range(len(args))]
            tangents = [t if t.shape else float(t) for t in tangents]
            by_jvp[idx] = _operators.jvp(F, tuple(args), tuple(tangents))[1]
        scale = 1.0 + float(np.max(np.abs(fd), initial=0.0))
        _agree(gr[j], gf[j], ad_rtol * scale, f"argument {j}: gradient_r vs gradient_f (batched)")
        _agree(gr[j], by_jvp, ad_rtol * scale, f"argument {j}: gradient_r vs jvp per direction")
        _agree(gr[j], fd, rtol * scale, f"argument {j}: gradient_r vs central differences")
        report[f"gradient {j}"] = np.asarray(gr[j])
    if order < 2:
        return report
    v = [rng.uniform(-1.0, 1.0, size=s) for s in shapes]
    v = [d if np.shape(d) else float(d) for d in v]

    def phi(t):
        return F(*[a + t * d for a, d in zip(args, v)])

    for k in range(2, order + 1):
        values = {}
        for modes in _nestings(k):
            g = phi
            for m in reversed(modes):
                g = (_operators.derivative if m == 'f' else _operators.gradient_r)(g)
            values[modes] = float(primal_value(g(0.0)))
        lower = phi
        for _ in range(k - 1):
            lower = _operators.derivative(lower)
        fd = (lower(step) - lower(-step)) / (2 * step)
        ref = values['f' * k]
        scale = 1.0 + abs(fd)
        for modes, value in values.items():
            _agree(value, ref, ad_rtol * scale, f"order {k}: {modes} vs {'f' * k}")
        _agree(ref, fd, rtol * scale * 10 ** (k - 2), f"order {k}: vs central differences")
        report[f"order {k}"] = ref
    return report


def _nestings(k):
    if k == 0:
        return ['']
    return [m + rest for m in 'fr' for rest in _nestings(k - 1)]


def _fd_gradient(F, args, j, h):
    x = np.array(args[j], dtype=float)
    g = np.zeros(x.shape)
    for idx in np.ndindex(*x.shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += h
        xm[idx] -= h
        a_p, a_m = list(args), list(args)
        a_p[j] = xp if xp.shape else float(xp)
        a_m[j] = xm if xm.shape else float(xm)
        g[idx] = (float(F(*a_p)) - float(F(*a_m))) / (2 * h)
    return g


def _agree(actual, expected, tol, what):
    actual = np.asarray(actual, dtype=float)
    expected = np.asarray(expected, dtype=float)
    if actual.shape != expected.shape:
        raise AssertionError(f"{what}: shape {actual.shape} != {expected.shape}")
    err = float(np.max(np.abs(actual - expected), initial=0.0))
    if not err <= tol:
        raise AssertionError(f"{what}: max difference {err:.3g} > {tol:.3g}\n"
                             f"  got      {actual}\n  expected {expected}")
