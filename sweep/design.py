"""Designs of experiments over a :class:`sweep.params.ParameterSet`.

``sweep.design``: nominal (one variant at the nominal values), grid (full
factorial, ``levels`` per parameter), lhs (Latin hypercube), sobol
(scrambled Sobol' sequence), random (uniform), table (explicit CSV with one
column per parameter). All sampling happens in the unit cube and is mapped
through each parameter's scale (linear or log), so a log-scaled parameter is
sampled uniformly in its logarithm. Every design is deterministic for a
given config (``seed``).
"""
from __future__ import annotations

import csv
import itertools

import numpy as np
from scipy.stats import qmc

from kernels.model import ModelError

DESIGNS = ("nominal", "grid", "lhs", "sobol", "random", "table")


def make_design(cfg, params) -> np.ndarray:
    """Return the (n_variants, n_params) parameter values of the design."""
    kind = cfg.get("design", "nominal")
    if kind not in DESIGNS:
        raise ModelError(f"sweep.design = {kind!r} is not one of {', '.join(DESIGNS)}")
    k = len(params)
    seed = int(cfg.get("seed", 0))
    if kind == "nominal":
        return params.nominal[None, :]
    if k == 0:
        raise ModelError(f"sweep.parameters: design {kind!r} needs at least one parameter")
    if kind == "table":
        return _table(cfg.get("table"), params)
    if kind == "grid":
        levels = cfg.get("levels", 3)
        levels = [int(levels)] * k if np.isscalar(levels) else [int(x) for x in levels]
        if len(levels) != k or min(levels) < 1:
            raise ModelError(f"sweep.levels = {cfg.get('levels')!r} must be >= 1 (one value or one per parameter)")
        axes = [np.linspace(0, 1, n) if n > 1 else np.array([params.params[i].to_unit(params.params[i].nominal)])
                for i, n in enumerate(levels)]
        Z = np.array(list(itertools.product(*axes)))
        return params.from_unit(Z)
    n = cfg.get("n_variants")
    if n is None or int(n) < 1:
        raise ModelError(f"sweep.n_variants = {n!r} must be >= 1")
    n = int(n)
    if kind == "lhs":
        Z = qmc.LatinHypercube(d=k, seed=seed).random(n)
    elif kind == "sobol":
        Z = qmc.Sobol(d=k, scramble=True, seed=seed).random(n)
    else:
        Z = np.random.default_rng(seed).random((n, k))
    return params.from_unit(Z)


def _table(path, params):
    if not path:
        raise ModelError("sweep.table: the table design needs a CSV path")
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as err:
        raise ModelError(f"sweep.table = {path!r} cannot be read: {err.strerror}") from None
    if not rows:
        raise ModelError(f"sweep.table = {path!r} has no rows")
    cols = set(rows[0])
    for name in params.names:
        if name not in cols:
            raise ModelError(f"sweep.table = {path!r} has no column {name!r}")
    for c in cols:
        if c not in params.names:
            raise ModelError(f"sweep.table = {path!r}: column {c!r} is not a sweep parameter")
    try:
        X = np.array([[float(r[n]) for n in params.names] for r in rows])
    except ValueError as err:
        raise ModelError(f"sweep.table = {path!r}: {err}") from None
    params.check_values(X, f"sweep.table = {path!r}")
    return X
