"""Helpers every job kind uses: the model from its config, the static
equilibrium (jitted once per model structure), the output sample grid.

The time-response single-variant path (``lsrt2_run``) and the channel table
are in :mod:`sweep.time_response`.
"""
from __future__ import annotations

import math

import jax

from kernels import statics
from kernels.model import Model, build_model
from sweep.model_builder import build_tables


class JobError(RuntimeError):
    """A job cannot run; the message says why (one line)."""


def model_from_config(model_cfg) -> Model:
    return build_model(build_tables(model_cfg))


equilibrium = jax.jit(statics.static_equilibrium)


def sample_grid(t_start, t_end, dt, every, every_key="output.every"):
    """Number of output samples of a run from t_start to t_end at step dt,
    writing every ``every``-th step; :class:`ConfigError` naming ``every_key``
    (``sweep.every`` when the sweep sets it) or ``integrator.dt`` otherwise."""
    from sweep.schema import ConfigError, duration, fmt
    span = t_end - t_start
    n_steps = int(round(span / dt))
    if n_steps < 1 or not math.isclose(n_steps * dt, span, rel_tol=0, abs_tol=1e-9):
        raise ConfigError(f"integrator.dt = {fmt(dt)}: does not divide the load case duration "
                          f"{duration(span)} s ({duration(t_start)} to {duration(t_end)} s)")
    if every < 1 or n_steps % every:
        raise ConfigError(f"{every_key} = {every}: must be >= 1 and divide the "
                          f"{n_steps} steps of the run")
    return n_steps // every + 1
