"""GradBench's ``gmm`` (from ADBench, with GradBench's fixes): the log posterior of a
Gaussian mixture model with a Wishart prior on the precision matrices, and its
gradient with respect to ``alpha``, ``mu``, ``q`` and ``l`` by reverse mode.

Component k has the precision matrix ``Q_k^T Q_k``, ``Q_k`` lower triangular with
``exp(q_k)`` on its diagonal and ``l_k`` below it, filled column by column.  With the
simplifications of the eval's README (log-determinants become sums of q, the prior's
trace a Frobenius norm) the objective is

    -N (D/2 log 2 pi + logsumexp(alpha)) + sum_i logsumexp_k(beta_ik)
    + K (n D log(gamma / sqrt 2) - log Gamma_D(n/2))
    - gamma^2/2 sum_k |Q_k|_F^2 + m sum_kj q_kj

where ``beta_ik = alpha_k + sum_j q_kj - |Q_k (x_i - mu_k)|^2 / 2`` and ``n = D + m + 1``.
"""
import math

import numpy

import nestad as nd
import nestad.numpy as np

from . import function


def lower_triangle_index(d):
    """index[i, j] = 1 + the position in l_k of entry (i, j) of Q_k below the diagonal
    (column by column), 0 elsewhere: an index into ``[0, *l_k]``."""
    index = numpy.zeros((d, d), dtype=int)
    p = 1
    for j in range(d):
        for i in range(j + 1, d):
            index[i, j] = p
            p += 1
    return index


def log_multigamma(a, p):
    """log of the multivariate gamma function Gamma_p(a)."""
    return p * (p - 1) / 4 * math.log(math.pi) + sum(math.lgamma(a + (1 - j) / 2)
                                                     for j in range(1, p + 1))


def log_posterior(params, x, m, gamma):
    alpha, mu, q, l = params['alpha'], params['mu'], params['q'], params['l']
    n, d = x.shape
    k = alpha.shape[0]
    # Q_k for every k: (k, d, d)
    zero_then_l = np.concatenate([numpy.zeros((k, 1)), l], axis=1)
    Q = zero_then_l[:, lower_triangle_index(d)] + np.exp(q)[:, :, None] * numpy.eye(d)
    centred = x[None, :, :] - mu[:, None, :]                    # (k, n, d): x_i - mu_k
    Qx = centred @ np.swapaxes(Q, 1, 2)                        # (k, n, d): Q_k (x_i - mu_k)
    sum_q = np.sum(q, axis=1)
    beta = (alpha + sum_q)[:, None] - 0.5 * np.sum(Qx * Qx, axis=2)     # (k, n)
    log_likelihood = (-n * (d / 2 * math.log(2 * math.pi) + np.logsumexp(alpha))
                      + np.sum(np.logsumexp(beta, axis=0)))
    dof = d + m + 1
    frobenius = np.sum(np.exp(q) ** 2) + np.sum(l * l)
    log_prior = (k * (dof * d * math.log(gamma / math.sqrt(2)) - log_multigamma(dof / 2, d))
                 - gamma * gamma / 2 * frobenius + m * np.sum(sum_q))
    return log_likelihood + log_prior


def _prepare(input):
    d, k = input['d'], input['k']
    params = {
        'alpha': numpy.array(input['alpha'], dtype=float),
        'mu': numpy.array(input['mu'], dtype=float).reshape(k, d),
        'q': numpy.array(input['q'], dtype=float).reshape(k, d),
        'l': numpy.array(input['l'], dtype=float).reshape(k, d * (d - 1) // 2),
    }
    x = numpy.array(input['x'], dtype=float).reshape(input['n'], d)
    return params, x, int(input['m']), float(input['gamma'])


@function(prepare=_prepare)
def objective(params, x, m, gamma):
    return log_posterior(params, x, m, gamma)


@function(prepare=_prepare, output=lambda g: {name: v.tolist() for name, v in g.items()})
def jacobian(params, x, m, gamma):
    return nd.gradient_r(log_posterior)(params, x, m, gamma)
