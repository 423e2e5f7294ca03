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
"""
import inspect

import numpy as np

from . import batching
from .arrays import ArrayPrimitive, PerArgument, apply
from .errors import InvalidInputError, MissingRuleError


def primitive(fn=None, *, name=None):
    """Declare ``fn`` a primitive (see the module docstring); ``name`` defaults to the
    function's module and qualified name.  Returns the differentiable function, whose
    ``defpartials``, ``defjvp`` and ``defvjp`` set its rules."""
    if fn is None:
        return lambda f: primitive(f, name=name)
    name = name or f"{fn.__module__}.{fn.__qualname__}"
    prim = ArrayPrimitive(name, fn, namespace=None, user=True)
    batching.BATCH_RULES.pop(name, None)       # (a primitive defined again: its new rules)
    rules = _Rules(prim, fn)
    prim.jvps, prim.vjps = rules.jvp, rules.vjp

    def public(*args, **params):
        return apply(prim, args, params)
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


class _Rules:
    """A primitive's rules per argument: given ones, or derived from its partials."""

    def __init__(self, prim, fn):
        self.prim, self.fn = prim, fn
        self.partials = self.jvps = self.vjps = None
        self.batched = False
        self.jvp = PerArgument(self._jvp)
        self.vjp = PerArgument(self._vjp)

    def set(self, kind, rules, public, batched=False):
        arity = _arity(self.fn)
        if arity is not None and len(rules) != arity:
            raise InvalidInputError(f"{self.prim.name}.{'def' + kind.rstrip('s')}: "
                                    f"{len(rules)} rules given for {arity} arguments")
        if not all(callable(r) or r is None for r in rules):
            raise InvalidInputError(f"{self.prim.name}: each rule must be a function (or None "
                                    "for an argument that is never differentiated)")
        setattr(self, kind, tuple(rules))
        if kind == 'partials':        # elementwise partials: an elementwise primitive
            batching.BATCH_RULES[self.prim.qualname] = batching.elementwise
        if kind == 'jvps':
            self.batched = batched
        return public

    def _pick(self, i, kind):
        given = getattr(self, kind)
        if given is not None and i < len(given) and given[i] is not None:
            return given[i]
        if self.partials is not None and i < len(self.partials) and self.partials[i] is not None:
            return None                      # derive from the partial
        mode, define = ("forward", "defjvp") if kind == 'jvps' else ("reverse", "defvjp")
        short = self.prim.name.rsplit('.', 1)[-1]
        raise MissingRuleError(
            f"primitive {self.prim.name} has no {mode} ({define[3:].upper()}) rule for "
            f"argument {i}, so it cannot be differentiated in {mode} mode: give one with "
            f"{short}.{define}(...) or {short}.defpartials(...)")

    def _jvp(self, i):
        rule = self._pick(i, 'jvps')
        if rule is not None:
            return rule if self.batched else _one_tangent_at_a_time(rule, i)
        partial = self.partials[i]

        def jvp(t, *xs, out, **params):
            from .numpy import _align, _tangent_to
            return _tangent_to(partial(*xs, out, **params) * _align(t, xs[i], out), t, xs[i], out)
        return jvp

    def _vjp(self, i):
        rule = self._pick(i, 'vjps')
        if rule is not None:
            return rule
        partial = self.partials[i]

        def vjp(g, *xs, out, **params):
            from .numpy import _shape, sum_to
            return sum_to(partial(*xs, out, **params) * g, _shape(xs[i]))
        return vjp


def _one_tangent_at_a_time(rule, i):
    """A JVP rule for one tangent, applied to each tangent of a batch in turn."""
    def jvp(t, *xs, out, **params):
        from . import numpy as anp
        nb = anp._nbatch(t, xs[i])
        if nb == 0:
            return rule(t, *xs, out=out, **params)
        batch = anp._shape(t)[:nb]
        count = int(np.prod(batch))
        if count == 0:                 # no direction: an empty batch of tangents
            return np.zeros(batch + anp._shape(out))
        flat = anp.reshape(t, (count,) + anp._shape(xs[i]))
        terms = [rule(flat[k], *xs, out=out, **params) for k in range(anp._shape(flat)[0])]
        return anp.reshape(anp.stack(terms), batch + anp._shape(out))
    return jvp


def _arity(fn):
    """The number of positional parameters, or None if it takes *args."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return None
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
               and p.default is p.empty)


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

    Keyword arguments are passed to ``f`` as parameters."""
    import nestad as nd
    from . import numpy as anp
    rng = np.random.default_rng(seed)
    args = [np.array(a, dtype=float) if isinstance(a, (list, tuple)) else a for a in args]
    shapes = [np.shape(a) for a in args]
    out0 = f(*args, **params)
    w = rng.uniform(0.5, 1.5, size=np.shape(out0))
    u = rng.uniform(0.5, 1.5, size=np.shape(out0))

    def F(*xs):
        y = f(*xs, **params)
        return anp.sum(w * y) + 0.5 * anp.sum(u * y * y)

    report = {}
    nums = tuple(range(len(args)))
    gr = nd.gradient_r(F, argnums=nums)(*args)
    gf = nd.gradient_f(F, argnums=nums)(*args)
    for j, a in enumerate(args):
        fd = _fd_gradient(F, args, j, step)
        by_jvp = np.zeros(shapes[j])
        for idx in np.ndindex(*shapes[j]):
            e = np.zeros(shapes[j])
            e[idx] = 1.0
            tangents = [e if k == j else np.zeros(shapes[k]) for k in range(len(args))]
            tangents = [t if t.shape else float(t) for t in tangents]
            by_jvp[idx] = nd.jvp(F, tuple(args), tuple(tangents))[1]
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
                g = (nd.derivative if m == 'f' else nd.gradient_r)(g)
            values[modes] = float(nd.primal_value(g(0.0)))
        lower = phi
        for _ in range(k - 1):
            lower = nd.derivative(lower)
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
