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

from kernels import lsrt2, metrics, statics
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


@functools.partial(jax.jit, static_argnames=("n_samples", "every", "relinearise_every", "solver"))
def lsrt2_run(model, exc, r_eq, t0, h, n_samples, every, relinearise_every, solver="block"):
    """LSRT2 from rest at the equilibrium r_eq; channels at every output sample."""
    system = model_system(model, exc, solver)
    n = r_eq.size
    out = lambda r, v, t: channels(model, r, v, r_eq)  # noqa: E731
    traj = lsrt2.simulate(system, r_eq.reshape(-1), jnp.zeros(n, r_eq.dtype), t0, h,
                          n_samples, every, relinearise_every, out)
    return traj.outputs


equilibrium = jax.jit(statics.static_equilibrium)


def sample_grid(t_start, t_end, dt, every):
    n_steps = int(round((t_end - t_start) / dt))
    if not math.isclose(n_steps * dt, t_end - t_start, rel_tol=0, abs_tol=1e-9):
        raise ModelError(f"integrator.dt = {dt} does not divide the load case duration "
                         f"{t_end - t_start} s")
    if every < 1 or n_steps % every:
        raise ModelError(f"output.every = {every} must be >= 1 and divide the "
                         f"{n_steps} steps of the run")
    return n_steps // every + 1
