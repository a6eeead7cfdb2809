"""Designs of experiments over a :class:`sweep.axle.params.ParameterSet`.

``sweep.design``: nominal (one variant at the nominal values), grid (full
factorial, ``levels`` per parameter), lhs (Latin hypercube), sobol
(scrambled Sobol' sequence), random (uniform), table (explicit CSV with one
column per parameter), saltelli (Saltelli's scheme for Sobol' sensitivity
indices, :func:`saltelli_size`). All sampling happens in the unit cube and is
mapped through each parameter's scale (linear or log), so a log-scaled
parameter is sampled uniformly in its logarithm. Every design is
deterministic for a given config (``seed``).

saltelli: ``sweep.n_base`` = N base samples (a power of 2) of a scrambled
Sobol' sequence in 2D dimensions (SALib.sample.sobol), in Saltelli's order:
per base sample a block of the rows A, AB_1..AB_D, [BA_1..BA_D,] B - N(2D+2)
variants with ``sweep.calc_second_order: true`` (the default), N(D+2) without.
``sweep.n_variants`` is not used (the size follows from N and D). The cube
records the config (``design``, ``n_base``, ``calc_second_order``, ``seed``
in its ``config`` attribute) and the parameter order (``parameters``):
:func:`sweep.sensitivity.sobol_indices` reads them back, and needs the
variants in this order.
"""
from __future__ import annotations

import csv
import itertools

import numpy as np


from sweep.core.config import Bool, ConfigError, Int, fmt

DESIGNS = ("nominal", "grid", "lhs", "sobol", "random", "table", "saltelli")


def make_design(cfg, params) -> np.ndarray:
    """Return the (n_variants, n_params) parameter values of the design."""
    kind = cfg.get("design", "nominal")
    if kind not in DESIGNS:
        raise ConfigError(f"sweep.design = {kind!r} is not one of {', '.join(DESIGNS)}")
    k = len(params)
    seed = Int(ge=0).check(cfg.get("seed", 0), "sweep.seed")
    if kind == "nominal":
        return params.nominal[None, :]
    if k == 0:
        raise ConfigError(f"sweep.parameters: design {kind!r} needs at least one parameter")
    if kind == "table":
        return _table(cfg.get("table"), params)
    if kind == "saltelli":
        n, second = saltelli_settings(cfg)
        import importlib.metadata

        from sweep.core import tracecache
        Z = tracecache.memo("design", (kind, k, n, second, seed, importlib.metadata.version("SALib"),
                                       importlib.metadata.version("scipy")),
                            lambda: _saltelli_unit(k, n, second, seed))
        return params.from_unit(Z)
    if kind == "grid":
        levels = cfg.get("levels", 3)
        levels = [Int().check(levels, "sweep.levels")] * k if np.isscalar(levels) else \
            [Int().check(x, f"sweep.levels[{i}]") for i, x in enumerate(levels)]
        if len(levels) != k:
            raise ConfigError(f"sweep.levels = {cfg.get('levels')!r}: {len(levels)} value(s) for {k} parameter(s) "
                              "(give one value, or one per parameter)")
        if min(levels) < 1:
            raise ConfigError(f"sweep.levels = {cfg.get('levels')!r} must be >= 1 (one value or one per parameter)")
        axes = [np.linspace(0, 1, n) if n > 1 else np.array([params.params[i].to_unit(params.params[i].nominal)])
                for i, n in enumerate(levels)]
        Z = np.array(list(itertools.product(*axes)))
        return params.from_unit(Z)
    n = cfg.get("n_variants")
    if n is None:
        raise ConfigError("sweep.n_variants is missing: give the number of variants")
    n = Int().check(n, "sweep.n_variants")
    if n < 1:
        raise ConfigError(f"sweep.n_variants = {n!r} must be >= 1")
    if kind == "random":
        Z = np.random.default_rng(seed).random((n, k))
    else:
        # the unit sample depends on (design, k, n, seed, scipy) only: a rerun loads
        # it from the trace cache and skips importing scipy.stats (~0.5-1 s)
        import importlib.metadata

        from sweep.core import tracecache
        Z = tracecache.memo("design", (kind, k, n, seed, importlib.metadata.version("scipy")),
                            lambda: _qmc_unit(kind, k, n, seed))
    return params.from_unit(Z)


def _qmc_unit(kind, k, n, seed):
    """(n, k) points of scipy's Latin hypercube or scrambled Sobol' sequence in [0, 1)."""
    from scipy.stats import qmc
    if kind == "lhs":
        return qmc.LatinHypercube(d=k, seed=seed).random(n)
    return qmc.Sobol(d=k, scramble=True, seed=seed).random(n)


def saltelli_settings(cfg):
    """(N, calc_second_order) of a saltelli design config: ``sweep.n_base``
    (a power of 2) and ``sweep.calc_second_order`` (default true)."""
    n = cfg.get("n_base")
    if n is None:
        raise ConfigError("sweep.n_base is missing: the saltelli design needs the number of base samples N "
                          "(a power of 2, e.g. sweep.n_base=64; N(2D+2) variants)")
    n = Int().check(n, "sweep.n_base")
    if n < 2 or n & (n - 1):
        raise ConfigError(f"sweep.n_base = {n!r} must be a power of 2 (>= 2): Saltelli's scheme on a Sobol' "
                          f"sequence, e.g. {max(2, 1 << max(1, int(n).bit_length() - 1))}")
    second = Bool().check(cfg.get("calc_second_order", True), "sweep.calc_second_order")
    return n, second


def saltelli_size(n_base, n_params, calc_second_order=True):
    """Number of variants of a saltelli design: N(2D+2), or N(D+2) without
    the second-order indices."""
    return n_base * ((2 * n_params + 2) if calc_second_order else (n_params + 2))


def _saltelli_unit(k, n, second, seed):
    """(saltelli_size(n, k, second), k) points of SALib's Saltelli sample in [0, 1)."""
    from SALib.sample import sobol
    problem = {"num_vars": k, "names": [f"x{i}" for i in range(k)], "bounds": [[0.0, 1.0]] * k}
    return np.asarray(sobol.sample(problem, n, calc_second_order=second, scramble=True, seed=seed), float)


def _table(path, params):
    """The CSV design: a header of parameter names, one row of numbers per
    variant. Every bad row or cell is named by its line and column."""
    key = f"sweep.table = {fmt(path)}"
    if not path or path == "???":
        raise ConfigError("sweep.table: the table design needs a CSV path (sweep.table=my_design.csv)")
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:     # Excel's "CSV UTF-8" starts with a BOM
            lines = [(i + 1, row) for i, row in enumerate(csv.reader(f)) if any(c.strip() for c in row)]
    except OSError as err:
        raise ConfigError(f"{key}: cannot be read ({err.strerror})") from None
    except (csv.Error, UnicodeDecodeError) as err:
        raise ConfigError(f"{key}: not a CSV file ({err})") from None
    if len(lines) < 2:
        raise ConfigError(f"{key}: has no rows (a header of parameter names, then one row per variant)")
    header = [c.strip() for c in lines[0][1]]
    for name in params.names:
        if name not in header:
            raise ConfigError(f"{key}: has no column {name!r} (columns: {', '.join(header)})")
    for c in header:
        if c not in params.names:
            raise ConfigError(f"{key}: column {c!r} is not a sweep parameter ({', '.join(params.names)})")
    if len(set(header)) != len(header):
        raise ConfigError(f"{key}: a column appears twice in the header")
    cols = [header.index(n) for n in params.names]
    X = np.empty((len(lines) - 1, len(params)))
    for r, (line, row) in enumerate(lines[1:]):
        if len(row) != len(header):
            where = (f"column {header[len(row)]!r} is missing" if len(row) < len(header)
                     else f"{len(row) - len(header)} value(s) after the last column {header[-1]!r}")
            raise ConfigError(f"{key}: line {line} has {len(row)} fields, the header {len(header)}: {where}")
        for j, c in enumerate(cols):
            cell = row[c].strip()
            try:
                v = float(cell)
            except ValueError:
                raise ConfigError(f"{key}: line {line}, column {header[c]!r} = {cell!r} is not a number") from None
            if not np.isfinite(v):
                raise ConfigError(f"{key}: line {line}, column {header[c]!r} = {cell} is not finite")
            X[r, j] = v
    params.check_values(X, key)
    return X
