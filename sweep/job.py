"""One job: build the model, find the static equilibrium, integrate, collect channels.

Host-side orchestration around the pure kernels; compiled functions are
cached per model topology and shape so a process reuses them.
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from kernels import integrate, metrics, statics
from kernels.methods import METHODS
from kernels.model import Model, ModelError, build_model
from kernels.system import model_system
from sweep.model_builder import build_tables


class JobError(RuntimeError):
    """A job cannot run; the message says why (one line)."""


def model_from_config(model_cfg) -> Model:
    return build_model(build_tables(model_cfg))


def make_channels(bushing_idx=None):
    """Result channels at one state: channels(model, r, v, r_eq) -> dict.

    ``bushing_idx`` selects the stored bushings (default: all)."""
    idx = None if bushing_idx is None else np.asarray(bushing_idx)

    def channels(m, r, v, r_eq):
        nb = m.topology.n_bodies
        r = r.reshape(nb, 6)
        v = v.reshape(nb, 6)
        toe, camber = metrics.toe_camber(m, r)
        forces = metrics.bushing_forces(m, r, v)
        return {
            "wheel_centre_displacement": metrics.wheel_centre_position(m, r)
            - metrics.wheel_centre_position(m, r_eq),
            "toe": toe, "camber": camber,
            "bushing_force": forces if idx is None else forces[idx],
        }
    return channels


channels = make_channels()


@functools.partial(jax.jit, static_argnames=("n_samples", "every", "relinearise_every", "solver", "method"))
def lsrt2_run(model, exc, r_eq, t0, h, n_samples, every, relinearise_every, solver="block", method="lsrt2"):
    """LSRT2 (or another method of :data:`kernels.methods.METHODS`) from rest at
    the equilibrium r_eq; channels at every output sample."""
    system = model_system(model, exc, solver)
    n = r_eq.size
    out = lambda r, v, t: channels(model, r, v, r_eq)  # noqa: E731
    traj = integrate.simulate(METHODS[method], system, r_eq.reshape(-1), jnp.zeros(n, r_eq.dtype), t0, h,
                              n_samples, every, relinearise_every, out)
    return traj.outputs


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
