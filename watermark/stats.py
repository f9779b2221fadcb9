"""The test statistics: z-scores and exact one-sided p-values.

Under the null hypothesis (the text does not carry this key's watermark) each scored
token is green independently with probability ``p_i``: ``gamma`` for a plain green
list, ``k_i / n_i`` when the list was drawn among the ``n_i`` tokens a grammar allowed.
The number of green tokens is then binomial (all ``p_i`` equal) or Poisson-binomial,
and ``p_value = P(X >= observed)`` is computed exactly, in log space for the binomial.
"""

from __future__ import annotations

import math

import numpy as np

#: Above this many scored tokens the Poisson-binomial tail (O(T^2)) uses the normal
#: approximation with a continuity correction instead.
EXACT_POISSON_BINOMIAL_MAX = 4000


def z_score(green: float, means, variances) -> float:
    """``(G - sum p_i) / sqrt(sum p_i (1 - p_i))``; with all p_i = gamma this is the
    z of Kirchenbauer et al. (and Hugging Face's ``WatermarkDetector``)."""
    mu = float(np.sum(means))
    var = float(np.sum(variances))
    if var <= 0:
        return 0.0
    return (green - mu) / math.sqrt(var)


def binomial_sf(g: int, t: int, p: float) -> float:
    """``P(X >= g)`` for ``X ~ Binomial(t, p)``, exactly (log-space sum of the pmf)."""
    if g <= 0:
        return 1.0
    if g > t:
        return 0.0
    first = (math.lgamma(t + 1) - math.lgamma(g + 1) - math.lgamma(t - g + 1)
             + g * math.log(p) + (t - g) * math.log1p(-p))
    k = np.arange(g, t, dtype=np.float64)  # pmf(k + 1) / pmf(k) = (t - k) / (k + 1) * p / (1 - p)
    steps = np.log((t - k) / (k + 1)) + (math.log(p) - math.log1p(-p))
    log_pmf = first + np.concatenate([[0.0], np.cumsum(steps)])
    top = log_pmf.max()
    return float(min(1.0, math.exp(top) * np.exp(log_pmf - top).sum()))


def poisson_binomial_sf(g: int, probs) -> float:
    """``P(X >= g)`` for a sum of independent Bernoulli(p_i)."""
    probs = np.asarray(probs, dtype=np.float64)
    t = len(probs)
    if g <= 0:
        return 1.0
    if g > t:
        return 0.0
    if len(np.unique(probs)) == 1:
        return binomial_sf(g, t, float(probs[0]))
    if t > EXACT_POISSON_BINOMIAL_MAX:
        mu = probs.sum()
        sd = math.sqrt((probs * (1 - probs)).sum())
        return 0.5 * math.erfc((g - 0.5 - mu) / (sd * math.sqrt(2)))
    pmf = np.zeros(t + 1)
    pmf[0] = 1.0
    for i, p in enumerate(probs):
        pmf[1 : i + 2] = pmf[1 : i + 2] * (1 - p) + pmf[: i + 1] * p
        pmf[0] *= 1 - p
    return float(min(1.0, pmf[g:].sum()))


def normal_sf(z: float) -> float:
    """One-sided tail of the standard normal (what Hugging Face's detector reports)."""
    return 0.5 * math.erfc(z / math.sqrt(2))


def best_window(green: np.ndarray, probs: np.ndarray, min_tokens: int):
    """The span of scored positions with the highest z among a fixed family of windows.

    Windows have lengths ``min_tokens * 2**j`` (and the whole text) and start every
    quarter length. Returns ``(start, end, z, p_raw, n_windows)``; the caller corrects
    ``p_raw`` for the search (Bonferroni: times ``n_windows``).
    """
    t = len(green)
    if t == 0:
        return 0, 0, 0.0, 1.0, 0
    cg = np.concatenate([[0], np.cumsum(green, dtype=np.float64)])
    cp = np.concatenate([[0], np.cumsum(probs)])
    cv = np.concatenate([[0], np.cumsum(probs * (1 - probs))])
    lengths = []
    n = max(1, min_tokens)
    while n < t:
        lengths.append(n)
        n *= 2
    lengths.append(t)
    best = (0, t, -math.inf)
    count = 0
    for n in lengths:
        starts = np.arange(0, t - n + 1, max(1, n // 4))
        ends = starts + n
        var = cv[ends] - cv[starts]
        z = np.where(var > 0, (cg[ends] - cg[starts] - (cp[ends] - cp[starts])) / np.sqrt(np.maximum(var, 1e-300)), 0.0)
        count += len(starts)
        i = int(np.argmax(z))
        if z[i] > best[2]:
            best = (int(starts[i]), int(ends[i]), float(z[i]))
    s, e, z = best
    p_raw = poisson_binomial_sf(int(green[s:e].sum()), probs[s:e])
    return s, e, z, p_raw, count
