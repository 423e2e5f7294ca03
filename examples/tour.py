"""A short tour of nestad: every line prints a derivative computed right now,
next to the value it must have (to 1e-9 relative); the exit status is 1 if any is WRONG."""
import math
import sys

import numpy as np

import nestad as nd
from nestad import derivative, gradient_r


wrong = 0


def show(label, got, want):
    global wrong
    ok = "ok" if math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12) else "WRONG"
    wrong += ok == "WRONG"
    print(f"  {label:<58} {got:>22.15g}   (expect {want:.15g}) {ok}")


print("1. Forward and reverse mode")
show("derivative(sin)(1.0)", derivative(nd.sin)(1.0), math.cos(1.0))
g = gradient_r(lambda v: v[0] * v[1] + nd.exp(v[2]))([2.0, 3.0, 0.5])
show("gradient_r(x*y + exp(z))[2] at (2,3,0.5)", g[2], math.exp(0.5))

print("2. Nesting in every pairing, no perturbation confusion")
for name, outer in (("derivative", derivative), ("gradient_r", gradient_r)):
    for iname, inner in (("derivative", derivative), ("gradient_r", gradient_r)):
        val = outer(lambda x: x * inner(lambda y: x + y)(1.0))(1.0)
        show(f"{name} o {iname}: d/dx [x * d/dy (x+y)] at 1", val, 1.0)
show("DVL: d/dy [d/dx x*(x*y) at x=3y] at y=5", derivative(
    lambda y: derivative(lambda x: x * (x * y))(y * 3))(5), 60.0)

print("3. Higher derivatives and Hessians")
f = nd.exp
for _ in range(8):
    f = derivative(f)
show("8th derivative of exp at 1", f(1.0), math.e)
H = nd.hessian(lambda v: v[0] ** 2 * v[1] + nd.sin(v[1]))([1.0, 2.0])
show("hessian(x^2 y + sin y)[1][1] at (1,2)", H[1][1], -math.sin(2.0))

print("4. Derivatives of functions that return functions (the 'amazing bug')")
fh = derivative(lambda x: lambda g: lambda y: g(x + y))(3.0)
show("fh(exp)(1)", fh(nd.exp)(1.0), math.exp(4))
show("fh(fh(exp))(1)   (a naive implementation gives 0)", fh(fh(nd.exp))(1.0), math.exp(7))
show("gradient_r of fh(fh(exp)) at 1", gradient_r(lambda y: fh(fh(nd.exp))(y))(1.0), math.exp(7))

print("5. Optimisation inside optimisation: d/da of argmin_x (x - a)^2 + x^4")


def argmin(a):
    x = 0.0
    for _ in range(50):                       # Newton's method, with derivatives inside
        dfx = derivative(lambda t: (t - a) ** 2 + t ** 4)
        x = x - dfx(x) / derivative(dfx)(x)
    return x


a = 1.0
x_star = nd.primal_value(argmin(a))
# implicit function theorem: dx*/da = 2 / (2 + 12 x*^2)
show("d argmin / da at a=1 (through the solver)", derivative(argmin)(a), 2 / (2 + 12 * x_star ** 2))

print("6. NumPy arrays: plain numpy calls differentiate")
A = np.array([[1.0, 2.0], [0.5, -1.0], [3.0, 0.2]])
x0 = np.array([0.3, -0.4])
g = gradient_r(lambda x: np.sum(np.tanh(A @ x)))(x0)
want = A.T @ (1 - np.tanh(A @ x0) ** 2)
show("gradient_r(sum(tanh(A @ x)))[1]", g[1], want[1])
H = nd.hessian(lambda x: nd.numpy.logsumexp(A @ x))(x0)
p = np.exp(A @ x0) / np.sum(np.exp(A @ x0))
show("hessian(logsumexp(A @ x))[0][1]", H[0, 1], (A.T @ (np.diag(p) - np.outer(p, p)) @ A)[0, 1])

print("7. Linear algebra: d(largest eigenvalue)/dS through eigh (numpy reads the lower triangle)")
S = np.array([[2.0, 0.5, 0.0], [0.5, 1.0, 0.3], [0.0, 0.3, -1.0]])
G = gradient_r(lambda s: nd.numpy.linalg.eigh(s)[0][-1])(S)
v = np.linalg.eigh(S)[1][:, -1]
show("gradient_r(largest eigenvalue of S)[1][0] = 2 v1 v0", G[1, 0], 2 * v[0] * v[1])

print("8. Implicit derivatives and your own primitives")
sqrt_heron = lambda a: nd.fixed_point(lambda x, a: (x + a / x) / 2, 1.0, a)
show("d/da fixed_point(Heron) at 9  (implicit, not unrolled)", derivative(sqrt_heron)(9.0), 1 / 6)


@nd.primitive
def softplus(x):
    return np.logaddexp(0.0, x)


softplus = softplus.defpartials(lambda x, out: nd.exp(x - out))     # d out / dx, nestable
show("2nd derivative of a custom softplus at 0", derivative(derivative(softplus))(0.0), 0.25)

print("9. Derivatives as programs: trace once, print, compile, replay")


def seed_002(x, y):                 # the example of seed 002: eight lines of ANF
    p = 7 * x
    r = 1 / y
    q = p * x * 5
    return 2 * p * q + 3 * r


program = nd.trace(seed_002, 2.0, 3.0)
print("  " + str(program).replace("\n", "\n  "))
d2 = nd.stage(derivative(gradient_r(lambda x: x * nd.exp(x))))
show("stage(derivative(gradient_r(x e^x)))(0.5) = (2 + x) e^x", d2(0.5), 2.5 * math.exp(0.5))
show("  the same staged function, second call (compiled)", d2(1.5), 3.5 * math.exp(1.5))

print("10. Bad input is refused, not silently wrong")
try:
    gradient_r(lambda v: [v[0], v[1]])([1.0, 2.0])
except nd.NonScalarOutputError as e:
    print("  NonScalarOutputError:", str(e)[:90], "...")
else:
    print("  WRONG: no NonScalarOutputError")
    wrong += 1
try:
    derivative(lambda x: math.sin(x))(1.0)
except nd.PerturbedConversionError as e:
    print("  PerturbedConversionError:", str(e)[:90], "...")
else:
    print("  WRONG: no PerturbedConversionError")
    wrong += 1

sys.exit(1 if wrong else 0)
