"""Differential fuzzing of Taylor mode on array programs against JAX's ``jet``.

Each case is a random chain of 3-8 array operations on a (3, 4) input (sums and products of
jets, products and quotients by constants, exp, log, slicing, concatenate, stack,
transpose, reshape, reductions, matmul by a constant and of two jets, where, division by a
jet, sin, cos, sinh, cosh), reduced to a number.  For a random order K = 1..5 and random input series it compares:

* ``nd.jet`` against ``jax.experimental.jet.jet`` (every coefficient, relative 1e-10);
* ``nd.stage`` of the jet against the eager jet (1e-12);
* ``nd.gradient_r`` of the top coefficient against ``jax.grad`` of JAX's jet (1e-10):
  reverse mode over the stacked rules;
* ``nd.vmap`` of the jet over three inputs against the jets of each (1e-12): the batch
  rules of the stacked and fused rules (``nestad.series``).

    python benchmarks/fuzz_jet.py [seed, default 0] [cases, default 200]

Prints each mismatch or error with its program, then the count.
"""
import os
import random
import sys

os.environ["OPENBLAS_NUM_THREADS"] = "1"
import numpy as onp  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.experimental import jet as jjet  # noqa: E402
jax.config.update("jax_enable_x64", True)
import nestad as nd  # noqa: E402
import nestad.numpy as anp  # noqa: E402

OPS = ['add', 'sub', 'mul', 'mulc', 'divc', 'exp', 'log', 'getitem', 'concat', 'transpose', 'sum0',
       'matmulc', 'matmul', 'where', 'neg', 'reshape', 'sq', 'stack', 'div', 'sin', 'cos', 'sinh',
       'cosh']


def step(op, a, b, r, C, m):
    """Operation ``op`` of the last value ``a`` and an earlier one ``b`` (``m``: nestad.numpy or
    jax.numpy); None where the shapes do not suit it."""
    same = b.shape == a.shape
    two = a.ndim == 2
    if op in ('add', 'sub', 'mul', 'where', 'stack') and not same:
        return None
    if op in ('getitem', 'concat', 'transpose', 'sum0') and not two:
        return None
    if op == 'add':
        return a + b
    if op == 'sub':
        return a - b
    if op == 'mul':
        return a * b * 0.5
    if op == 'mulc':
        return a * (r + 0.3)
    if op == 'divc':
        return a / (r + 0.5)
    if op == 'exp':
        return m.exp(0.3 * a)
    if op == 'div':                 # a jet divisor (away from 0); a row divisor, broadcast
        return a / (1.5 + b * b) if same else a / (1.2 + a[..., :1] ** 2)
    if op in ('sin', 'cos', 'sinh', 'cosh'):
        return getattr(m, op)(0.7 * a)
    if op == 'log':
        return m.log(1.5 + a * a)
    if op == 'getitem':
        return a[1:, ::-1] if a.shape[0] > 1 else None
    if op == 'concat':
        return m.concatenate([a, 0.5 * a[:1]], axis=0)
    if op == 'transpose':
        return a.T
    if op == 'sum0':
        return m.sum(a, axis=0)
    if op == 'matmulc':
        return a @ C if a.shape[-1] == 4 else None
    if op == 'matmul':
        return a @ b.T * 0.3 if two and b.ndim == 2 and a.shape[1] == b.shape[1] else None
    if op == 'where':
        return m.where(onp.arange(a.size).reshape(a.shape) % 2 == 0, a, b)
    if op == 'neg':
        return -a
    if op == 'reshape':
        return m.reshape(a, (-1,))
    if op == 'sq':
        return a ** 2
    if op == 'stack':
        return m.stack([a, b])[0] + m.stack([a, b])[1]


def make(rng):
    """A random program of a (3, 4) array: its steps, each an op, a constant and which
    earlier value is its second operand."""
    ops = [(rng.choice(OPS), rng.random(), rng.randint(0, 10)) for _ in range(rng.randint(3, 9))]
    C = onp.random.default_rng(rng.randint(0, 10**6)).normal(size=(4, 4))

    def prog(x, m):
        vals = [x]
        for op, r, j in ops:
            a = vals[-1]
            y = step(op, a, vals[j % len(vals)], r, C, m)
            vals.append(a * 1.1 if y is None else y)
        return m.sum(vals[-1]) + 0.1 * m.sum(vals[len(vals) // 2])
    return prog, ops


def check(case, seed):
    """One case: a list of what disagreed (empty if nothing did)."""
    rng = random.Random(seed * 100000 + case)
    prog, ops = make(rng)
    r = onp.random.default_rng(case)
    x0, K = 0.5 * r.normal(size=(3, 4)), rng.randint(1, 5)
    series = [r.normal(size=(3, 4)) for _ in range(K)]
    jseries = [jnp.asarray(v) for v in series]

    def ours_of(x, ser):
        return nd.jet(lambda y: prog(y, anp), (x,), (list(ser),))

    def jax_of(x):
        return jjet.jet(lambda y: prog(y, jnp), (x,), (jseries,))
    try:
        p, s = ours_of(x0, series)
        pj, sj = jax_of(jnp.asarray(x0))
        ps, ss = nd.stage(lambda x, *ser: ours_of(x, ser))(x0, *series)
        g = nd.gradient_r(lambda x: ours_of(x, series)[1][-1])(x0)
        gj = jax.grad(lambda x: jax_of(x)[1][-1])(jnp.asarray(x0))
        xs = onp.stack([x0, 0.9 * x0, x0 + 0.1])
        vs = nd.vmap(lambda x: ours_of(x, series)[1][-1])(xs)
        each = [ours_of(x, series)[1][-1] for x in xs]
    except Exception as e:                      # noqa: BLE001 (every error is a finding)
        return [f"error {type(e).__name__}: {str(e)[:200]} in K = {K}, {ops}"]
    ref = [float(pj)] + [float(v) for v in sj]
    ours = [float(p)] + [float(v) for v in s]
    staged = [float(ps)] + [float(v) for v in ss]
    scale = max(1.0, max(abs(v) for v in ref))
    found = []
    err = max(abs(a - b) for a, b in zip(ours, ref)) / scale
    if err > 1e-10:
        found.append(f"jet against JAX's jet: {err:.2e}")
    err = max(abs(a - b) for a, b in zip(staged, ours)) / scale
    if err > 1e-12:
        found.append(f"staged against eager: {err:.2e}")
    err = float(onp.max(onp.abs(onp.asarray(g) - onp.asarray(gj)))) / max(1.0, float(onp.max(onp.abs(gj))))
    if err > 1e-10:
        found.append(f"gradient_r of the top coefficient against jax.grad: {err:.2e}")
    err = max(abs(float(a) - float(b)) / max(1.0, abs(float(b))) for a, b in zip(vs, each))
    if err > 1e-12:
        found.append(f"vmap of the jet against each member's: {err:.2e}")
    return [f"{what} in K = {K}, {ops}" for what in found]


def main():
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    cases = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    bad = 0
    for case in range(cases):
        for finding in check(case, seed):
            print(f"case {case}: {finding}")
            bad += 1
    print(f"cases {cases}, findings {bad}")


if __name__ == '__main__':
    main()
