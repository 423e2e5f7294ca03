"""``nestad.scipy.stats``: log densities, densities and distribution functions.

Each function is scipy's (so its values are scipy's), declared a primitive with the
partial derivatives of its formula beside it; the partials use differentiable functions,
so higher derivatives work too.  Where a derivative would need a function scipy lacks
(a distribution function's derivative in a shape parameter, such as ``gamma.cdf`` in
``a``), asking for it raises instead of giving a silent zero.
"""
import functools
import math
import sys
import types

import numpy as np
import scipy.stats as _st

from ... import numpy as anp
from ...extend import primitive
from ...primitives import recip
from ...tracer import is_tracer
from ...values import primal_value
from ..special import (_at_edge, _no_derivative, _own, _powers_safe, _ratio, digamma, erfcx,
                       gammaln, polygamma)
from ..special import beta as beta_fn

_LOG_2PI = math.log(2.0 * math.pi)
_SHAPE = "scipy has no derivative of this distribution function in its shape parameter"


def _nan_if_invalid(partial):
    """The partial, but nan where scipy's value ``out`` is nan: a parameter outside its domain
    (scale <= 0, a shape parameter <= 0, ...).  The formula would give a number there
    (norm.logpdf's derivative in scale at scale = -1 was 0.96); the partial times a constant
    nan is nan at every order, in every mode."""
    @functools.wraps(partial)
    def checked(*args):
        d = partial(*args)
        bad = anp.isnan(primal_value(args[-1]))
        if not is_tracer(bad) and not np.any(bad):
            return d
        return d * anp.where(bad, np.nan, 1.0)
    return checked


def _define(name, plain, *partials):
    return _own(primitive(plain, name=f"scipy.stats.{name}").defpartials(
        *[_nan_if_invalid(p) for p in partials]))


def _distribution(name, **functions):
    """A distribution as a module of its functions, so that ported code may import it
    (``import nestad.scipy.stats.norm as norm``) as well as use it as an attribute."""
    module = types.ModuleType(f"{__name__}.{name}", f"scipy.stats.{name}'s functions that differentiate")
    module.__dict__.update(functions)
    module.rvs = getattr(_st, name).rvs       # scipy's sampler: draws are constants
    sys.modules[module.__name__] = module
    return module


# ---------------------------------------------------------------- normal

def _over(n, d):
    return anp.divide(n, d)     # (IEEE: a scale or df of 0 gives inf or nan, not ZeroDivisionError)


def _sq(v):
    return v * v            # (not v ** 2: Python's float power raises OverflowError)


def _z(x, loc, scale):
    return _over(x - loc, scale)


_norm_logpdf = _define(
    'norm.logpdf', lambda x, loc, scale: _st.norm.logpdf(x, loc, scale),
    lambda x, loc, scale, out: _over(-_z(x, loc, scale), scale),
    lambda x, loc, scale, out: _over(_z(x, loc, scale), scale),
    lambda x, loc, scale, out: _over(_sq(_z(x, loc, scale)) - 1.0, scale))
_norm_pdf = _define(
    'norm.pdf', lambda x, loc, scale: _st.norm.pdf(x, loc, scale),
    lambda x, loc, scale, out: _over(-out * _z(x, loc, scale), scale),
    lambda x, loc, scale, out: _over(out * _z(x, loc, scale), scale),
    lambda x, loc, scale, out: _over(out * (_sq(_z(x, loc, scale)) - 1.0), scale))
_norm_cdf = _define(
    'norm.cdf', lambda x, loc, scale: _st.norm.cdf(x, loc, scale),
    lambda x, loc, scale, out: _norm_pdf(x, loc, scale),
    lambda x, loc, scale, out: -_norm_pdf(x, loc, scale),
    lambda x, loc, scale, out: -_norm_pdf(x, loc, scale) * _z(x, loc, scale))
def _mills(z):
    """pdf(z) / cdf(z) of the standard normal as sqrt(2/pi) / erfcx(-z/sqrt(2)): the
    difference logpdf - logcdf cancels (2.6e-5 relative at z = -5e5), this does not."""
    return _SQRT_2_OVER_PI * recip(erfcx(-z * _SQRT_HALF))


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_SQRT_HALF = math.sqrt(0.5)
_norm_logcdf = _define(
    'norm.logcdf', lambda x, loc, scale: _st.norm.logcdf(x, loc, scale),
    lambda x, loc, scale, out: _over(_mills(_z(x, loc, scale)), scale),
    lambda x, loc, scale, out: _over(-_mills(_z(x, loc, scale)), scale),
    lambda x, loc, scale, out: _over(-_mills(_z(x, loc, scale)) * _z(x, loc, scale), scale))
_norm_sf = _define(
    'norm.sf', lambda x, loc, scale: _st.norm.sf(x, loc, scale),
    lambda x, loc, scale, out: -_norm_pdf(x, loc, scale),
    lambda x, loc, scale, out: _norm_pdf(x, loc, scale),
    lambda x, loc, scale, out: _norm_pdf(x, loc, scale) * _z(x, loc, scale))
_norm_logsf = _define(
    'norm.logsf', lambda x, loc, scale: _st.norm.logsf(x, loc, scale),
    lambda x, loc, scale, out: _over(-_mills(-_z(x, loc, scale)), scale),
    lambda x, loc, scale, out: _over(_mills(-_z(x, loc, scale)), scale),
    lambda x, loc, scale, out: _over(_mills(-_z(x, loc, scale)) * _z(x, loc, scale), scale))

norm = _distribution(
    'norm',
    logpdf=lambda x, loc=0.0, scale=1.0: _norm_logpdf(x, loc, scale),
    pdf=lambda x, loc=0.0, scale=1.0: _norm_pdf(x, loc, scale),
    cdf=lambda x, loc=0.0, scale=1.0: _norm_cdf(x, loc, scale),
    logcdf=lambda x, loc=0.0, scale=1.0: _norm_logcdf(x, loc, scale),
    sf=lambda x, loc=0.0, scale=1.0: _norm_sf(x, loc, scale),
    logsf=lambda x, loc=0.0, scale=1.0: _norm_logsf(x, loc, scale))


# ---------------------------------------------------------------- Student's t

def _t_u(x, df, loc, scale):
    z = _z(x, loc, scale)
    return z, 1.0 + _over(z * z, df)


_t_logpdf = _define(
    't.logpdf', lambda x, df, loc, scale: _st.t.logpdf(x, df, loc, scale),
    lambda x, df, loc, scale, out: _over(-(df + 1.0) * _z(x, loc, scale), df * scale * _t_u(x, df, loc, scale)[1]),
    lambda x, df, loc, scale, out: 0.5 * (digamma((df + 1.0) / 2.0) - digamma(df / 2.0)) - _over(0.5, df)
    - 0.5 * anp.log(_t_u(x, df, loc, scale)[1])
    + (df + 1.0) * _sq(_z(x, loc, scale)) * recip(2.0 * df * df * _t_u(x, df, loc, scale)[1]),
    lambda x, df, loc, scale, out: _over((df + 1.0) * _z(x, loc, scale), df * scale * _t_u(x, df, loc, scale)[1]),
    lambda x, df, loc, scale, out: _over(_over((df + 1.0) * _sq(_z(x, loc, scale)),
                                               df * _t_u(x, df, loc, scale)[1]) - 1.0, scale))
_t_cdf = _define(
    't.cdf', lambda x, df, loc, scale: _st.t.cdf(x, df, loc, scale),
    lambda x, df, loc, scale, out: anp.exp(_t_logpdf(x, df, loc, scale)),
    _no_derivative('stats.t.cdf', 'df', _SHAPE),
    lambda x, df, loc, scale, out: -anp.exp(_t_logpdf(x, df, loc, scale)),
    lambda x, df, loc, scale, out: -anp.exp(_t_logpdf(x, df, loc, scale)) * _z(x, loc, scale))

t = _distribution(
    't',
    logpdf=lambda x, df, loc=0.0, scale=1.0: _t_logpdf(x, df, loc, scale),
    pdf=lambda x, df, loc=0.0, scale=1.0: anp.exp(_t_logpdf(x, df, loc, scale)),
    cdf=lambda x, df, loc=0.0, scale=1.0: _t_cdf(x, df, loc, scale),
    logcdf=lambda x, df, loc=0.0, scale=1.0: anp.log(_t_cdf(x, df, loc, scale)))


# ---------------------------------------------------------------- gamma

_gamma_logpdf = _define(
    'gamma.logpdf', lambda x, a, loc, scale: _st.gamma.logpdf(x, a, loc, scale),
    lambda x, a, loc, scale, out: _over(_ratio(a - 1.0, _z(x, loc, scale)) - 1.0, scale),
    lambda x, a, loc, scale, out: anp.log(_z(x, loc, scale)) - digamma(a),
    lambda x, a, loc, scale, out: _over(-(_ratio(a - 1.0, _z(x, loc, scale)) - 1.0), scale),
    lambda x, a, loc, scale, out: _over(_z(x, loc, scale) - a, scale))
def _gamma_pdf(x, a, loc, scale):
    # exp(logpdf), but below z = 1 z^(a-1) e^-z / (Gamma(a) scale), whose derivatives are
    # exact at the support's end (the logarithm's are 0 * inf) and do not underflow near it
    # (as special.gammainc's)
    edge = primal_value(_z(x, loc, scale)) < 1.0
    return _at_edge(edge, lambda x: anp.power(_z(x, loc, scale), a - 1.0)
                    * anp.exp(-_z(x, loc, scale) - gammaln(a)) / scale,
                    lambda x: anp.exp(_gamma_logpdf(x, a, loc, scale)), loc + scale)(x)


_gamma_cdf = _define(
    'gamma.cdf', lambda x, a, loc, scale: _st.gamma.cdf(x, a, loc, scale),
    lambda x, a, loc, scale, out: _gamma_pdf(x, a, loc, scale),
    _no_derivative('stats.gamma.cdf', 'a', _SHAPE),
    lambda x, a, loc, scale, out: -_gamma_pdf(x, a, loc, scale),
    lambda x, a, loc, scale, out: -_gamma_pdf(x, a, loc, scale) * _z(x, loc, scale))

gamma = _distribution(
    'gamma',
    logpdf=lambda x, a, loc=0.0, scale=1.0: _gamma_logpdf(x, a, loc, scale),
    pdf=lambda x, a, loc=0.0, scale=1.0: anp.exp(_gamma_logpdf(x, a, loc, scale)),
    cdf=lambda x, a, loc=0.0, scale=1.0: _gamma_cdf(x, a, loc, scale))


# ---------------------------------------------------------------- beta

_beta_logpdf = _define(
    'beta.logpdf', lambda x, a, b: _st.beta.logpdf(x, a, b),
    lambda x, a, b, out: _ratio(a - 1.0, x) - _ratio(b - 1.0, 1.0 - x),
    lambda x, a, b, out: anp.log(x) - digamma(a) + digamma(a + b),
    lambda x, a, b, out: anp.log1p(-x) - digamma(b) + digamma(a + b))
def _beta_pdf(x, a, b):
    # by powers, as special.betainc's derivative (the logarithm's derivatives are 0 * inf at
    # 0 and 1, and underflow near them)
    return _at_edge(_powers_safe(a, b),
                    lambda x: anp.power(x, a - 1.0) * anp.power(1.0 - x, b - 1.0) / beta_fn(a, b),
                    lambda x: anp.exp(_beta_logpdf(x, a, b)), 0.5)(x)


_beta_cdf = _define(
    'beta.cdf', lambda x, a, b: _st.beta.cdf(x, a, b),
    lambda x, a, b, out: _beta_pdf(x, a, b),
    _no_derivative('stats.beta.cdf', 'a', _SHAPE), _no_derivative('stats.beta.cdf', 'b', _SHAPE))

beta = _distribution('beta', logpdf=_beta_logpdf, cdf=_beta_cdf,
                     pdf=lambda x, a, b: anp.exp(_beta_logpdf(x, a, b)))


# ---------------------------------------------------------------- Poisson

_poisson_logpmf = _define(
    'poisson.logpmf', lambda k, mu: _st.poisson.logpmf(k, mu),
    _no_derivative('stats.poisson.logpmf', 'k', "it is a count"),
    lambda k, mu, out: _ratio(k, mu) - 1.0)
_poisson_cdf = _define(
    'poisson.cdf', lambda k, mu: _st.poisson.cdf(k, mu),
    _no_derivative('stats.poisson.cdf', 'k', "it is a count"),
    lambda k, mu, out: -anp.exp(_poisson_logpmf(np.floor(k), mu)))

poisson = _distribution('poisson', logpmf=_poisson_logpmf, cdf=_poisson_cdf,
                        pmf=lambda k, mu: anp.exp(_poisson_logpmf(k, mu)))


# ---------------------------------------------------------------- chi-squared

_chi2_logpdf = _define(
    'chi2.logpdf', lambda x, df: _st.chi2.logpdf(x, df),
    lambda x, df, out: _ratio(df / 2.0 - 1.0, x) - 0.5,
    lambda x, df, out: 0.5 * (anp.log(x / 2.0) - digamma(df / 2.0)))
_chi2_cdf = _define(
    'chi2.cdf', lambda x, df: _st.chi2.cdf(x, df),
    lambda x, df, out: anp.exp(_chi2_logpdf(x, df)),
    _no_derivative('stats.chi2.cdf', 'df', _SHAPE))
chi2 = _distribution('chi2', logpdf=_chi2_logpdf, cdf=_chi2_cdf,
                     pdf=lambda x, df: anp.exp(_chi2_logpdf(x, df)))


# ---------------------------------------------------------------- multivariate normal and Dirichlet
# Written with differentiable array functions (solve, slogdet, gammaln), so every rule
# comes from theirs; values agree with scipy's to rounding.

def _mvn_logpdf(x, mean, cov, allow_singular):
    d = np.shape(primal_value(cov))[-1]
    r = x - mean
    singular = _rank(cov, allow_singular)
    if singular is not None:                # the pseudo-inverse and pseudo-determinant
        keep, rank = singular
        s, u = anp.linalg.eigh(cov)
        u = u[:, keep] / anp.sqrt(s[keep])
        return -0.5 * (rank * _LOG_2PI + anp.sum(anp.log(s[keep]))
                       + anp.sum(anp.square(anp.matmul(r, u)), axis=-1))
    quad = anp.sum(r * anp.linalg.solve(cov, r[..., None])[..., 0] if anp.ndim(r) > 1
                   else r * anp.linalg.solve(cov, r), axis=-1)
    return -0.5 * (d * _LOG_2PI + anp.linalg.slogdet(cov)[1] + quad)


def _rank(cov, allow_singular):
    """None for a positive definite ``cov``; for a singular one (allowed), the mask of
    the eigenvalues kept and their number, by scipy's cut-off (1e6 float64 epsilons of the
    largest).  A singular ``cov`` not allowed raises numpy's LinAlgError, as scipy does."""
    s = np.linalg.eigvalsh(primal_value(cov))
    eps = 1e6 * np.finfo(float).eps * np.max(np.abs(s))
    if np.min(s) < -eps:
        raise ValueError("nestad.scipy.stats.multivariate_normal: the covariance matrix must be "
                         "symmetric positive definite (semidefinite with allow_singular=True), "
                         "as scipy's; pass a valid cov")
    if np.min(s) > eps:
        return None
    if not allow_singular:
        raise np.linalg.LinAlgError(
            "multivariate_normal: the covariance matrix is singular; pass allow_singular=True "
            "for the degenerate distribution (as scipy.stats)")
    return s > eps, int(np.sum(s > eps))


def _mvn_cov(x, cov):
    return (anp.array(cov) if np.ndim(primal_value(cov)) == 2
            else anp.eye(np.shape(primal_value(x))[-1]) * cov)


def _mvn_entropy(mean=None, cov=1.0, allow_singular=True):
    """scipy's: 0.5 (rank (log 2 pi + 1) + log pdet cov); a singular cov is allowed."""
    cov = _mvn_cov(np.zeros(1) if np.ndim(primal_value(cov)) < 2 else cov, cov)
    singular = _rank(cov, allow_singular)
    if singular is None:
        d = np.shape(primal_value(cov))[-1]
        return 0.5 * (d * (_LOG_2PI + 1.0) + anp.linalg.slogdet(cov)[1])
    keep, rank = singular
    return 0.5 * (rank * (_LOG_2PI + 1.0) + anp.sum(anp.log(anp.linalg.eigvalsh(cov)[keep])))


multivariate_normal = _distribution(
    'multivariate_normal',
    logpdf=lambda x, mean=None, cov=1.0, allow_singular=False: _mvn_logpdf(
        x, 0.0 if mean is None else mean, _mvn_cov(x, cov), allow_singular),
    pdf=lambda x, mean=None, cov=1.0, allow_singular=False: anp.exp(
        multivariate_normal.logpdf(x, mean, cov, allow_singular)),
    entropy=_mvn_entropy)


def _check_dirichlet(x, alpha):
    """scipy's refusals of alpha <= 0 and of entries of x outside [0, 1], where the formula
    would give a number (or -inf).  Unlike scipy, a point whose entries do not sum to 1 is
    taken: the density extended by its formula, so that derivatives in x (which leave the
    simplex) exist.  Staged code cannot check traced values."""
    a, v = primal_value(alpha), primal_value(x)
    if not is_tracer(a) and np.any(np.asarray(a) <= 0):
        raise ValueError("nestad.scipy.stats.dirichlet: all parameters alpha must be greater "
                         "than 0 (as scipy's)")
    if not is_tracer(v) and (np.any(np.asarray(v) < 0) or np.any(np.asarray(v) > 1)):
        raise ValueError("nestad.scipy.stats.dirichlet: the entries of x must lie in [0, 1] "
                         "(a point of the simplex, as scipy's)")


def _dirichlet_logpdf(x, alpha):
    _check_dirichlet(x, alpha)
    return (anp.sum((alpha - 1.0) * anp.log(x), axis=0) + gammaln(anp.sum(alpha))
            - anp.sum(gammaln(alpha)))


dirichlet = _distribution('dirichlet', logpdf=_dirichlet_logpdf,
                          pdf=lambda x, alpha: anp.exp(_dirichlet_logpdf(x, alpha)))

__all__ = ['norm', 't', 'gamma', 'beta', 'poisson', 'chi2', 'multivariate_normal', 'dirichlet',
           'polygamma']
