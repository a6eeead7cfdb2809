"""Tabulated characteristics: piecewise-linear or monotone cubic Hermite interpolation.

A characteristic is given as knots ``(x_i, y_i)`` with strictly increasing
``x`` and an interpolation that says what the table means (stated per curve
in the model YAML, key ``interpolation``):

- ``"linear"``: straight segments between the knots (piecewise-linear data,
  e.g. the published main spring: a straight 22 kN/m middle segment must
  stay straight; slope jumps at the knots).
- ``"pchip"`` (default): a C1 cubic Hermite curve whose knot slopes follow
  Fritsch-Carlson (shape preserving: a monotone table gives a monotone
  curve, no overshoot), for a table that samples a smooth law (e.g. a
  damper curve). The end slopes are the secants of the end segments. Outside
the table it continues as a straight line with that end slope
(``extrapolate="linear"``) or as a constant (``extrapolate="constant"``, used
by bump and rebound stops, which are zero before their clearance so that the
force is continuous at engagement).

Tables are built once in numpy (:func:`hermite_table`) and padded to a
common number of knots so that a whole group of elements evaluates in one
vectorised call (:func:`evaluate`). Evaluation is pure JAX and
differentiable in x and in the (scaled) coefficients.
"""
import jax
import jax.numpy as jnp
import numpy as np

PAD = 1e30  # abscissa of padding breaks: never reached by a finite argument


def _fritsch_carlson_slopes(x, y):
    h = np.diff(x)
    delta = np.diff(y) / h
    n = len(x)
    d = np.zeros(n)
    d[0], d[-1] = delta[0], delta[-1]
    for i in range(1, n - 1):
        if delta[i - 1] * delta[i] <= 0.0:
            d[i] = 0.0
        else:  # weighted harmonic mean (Fritsch-Butland / PCHIP)
            w1 = 2 * h[i] + h[i - 1]
            w2 = h[i] + 2 * h[i - 1]
            d[i] = (w1 + w2) / (w1 / delta[i - 1] + w2 / delta[i])
    return d


INTERPOLATIONS = ("linear", "pchip")


def hermite_table(x, y, n_knots=None, extrapolate=("linear", "linear"), interpolation="pchip"):
    """Build a padded segment table of a characteristic.

    Args:
      x, y: knots, x strictly increasing (checked by the model builder).
      n_knots: pad to this many knots (>= len(x)).
      extrapolate: (left, right), each "linear" or "constant".
      interpolation: "linear" (knot slopes = secants, straight segments) or
        "pchip" (Fritsch-Carlson monotone cubic).

    Returns dict with ``breaks`` (n_knots,), ``origin`` (n_knots+1,) and
    ``coef`` (n_knots+1, 4): segment j (j = number of breaks <= x) is
    ``sum_k coef[j, k] * (x - origin[j])**k``.
    """
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    n = len(x)
    if n == 1:  # a constant
        x = np.array([x[0], x[0] + 1.0])
        y = np.array([y[0], y[0]])
        n = 2
    n_knots = max(n, n_knots or n)
    if interpolation not in INTERPOLATIONS:
        raise ValueError(f"interpolation = {interpolation!r} is not one of {INTERPOLATIONS}")
    d = _fritsch_carlson_slopes(x, y)
    breaks = np.full(n_knots, PAD)
    breaks[:n] = x
    origin = np.zeros(n_knots + 1)
    coef = np.zeros((n_knots + 1, 4))
    # left extrapolation
    origin[0] = x[0]
    coef[0] = [y[0], d[0] if extrapolate[0] == "linear" else 0.0, 0.0, 0.0]
    for i in range(n - 1):
        h = x[i + 1] - x[i]
        delta = (y[i + 1] - y[i]) / h
        origin[i + 1] = x[i]
        if interpolation == "linear":
            coef[i + 1] = [y[i], delta, 0.0, 0.0]
        else:
            coef[i + 1] = [y[i], d[i], (3 * delta - 2 * d[i] - d[i + 1]) / h,
                           (d[i] + d[i + 1] - 2 * delta) / h ** 2]
    # right extrapolation (and every padding segment after it)
    right = [y[-1], d[-1] if extrapolate[1] == "linear" else 0.0, 0.0, 0.0]
    for j in range(n, n_knots + 1):
        origin[j] = x[-1]
        coef[j] = right
    return {"breaks": breaks, "origin": origin, "coef": coef}


def stack_tables(tables):
    """Stack padded tables into arrays with a leading element axis."""
    if not tables:
        return {"breaks": np.zeros((0, 2)), "origin": np.zeros((0, 3)),
                "coef": np.zeros((0, 3, 4))}
    return {k: np.stack([t[k] for t in tables]) for k in ("breaks", "origin", "coef")}


def evaluate(breaks, origin, coef, x):
    """Evaluate one table at scalar x (vmap for groups)."""
    j = jnp.sum(x >= breaks)
    t = x - origin[j]
    c = coef[j]
    return c[0] + t * (c[1] + t * (c[2] + t * c[3]))


def evaluate_many(table, x):
    """Evaluate a stacked table (leading axis n) at x of shape (n,)."""
    return jax.vmap(evaluate)(table["breaks"], table["origin"], table["coef"], x)
