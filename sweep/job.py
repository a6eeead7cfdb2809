"""One job: build the model, find the static equilibrium, integrate, collect channels.

Host-side orchestration around the pure kernels; compiled functions are
cached per model topology and shape so a process reuses them.
"""
from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from kernels import loads, lsrt2, metrics, statics
from kernels.model import Model, ModelError, build_model
from kernels.system import model_system
from sweep.loadcase import build_excitation
from sweep.model_builder import build_tables


class JobError(RuntimeError):
    """A job cannot run; the message says why (one line)."""


def model_from_config(model_cfg) -> Model:
    return build_model(build_tables(model_cfg))


def channels(model, r, v, r_eq):
    """Result channels at one state (flat or (m, 6) r, v)."""
    m = model.topology.n_bodies
    r = r.reshape(m, 6)
    v = v.reshape(m, 6)
    toe, camber = metrics.toe_camber(model, r)
    return {
        "wheel_centre_displacement": metrics.wheel_centre_position(model, r)
        - metrics.wheel_centre_position(model, r_eq),
        "toe": toe,
        "camber": camber,
        "bushing_force": metrics.bushing_forces(model, r, v),
        "finite": jnp.all(jnp.isfinite(r)) & jnp.all(jnp.isfinite(v)),
    }


@functools.partial(jax.jit, static_argnames=("n_samples", "every", "relinearise_every"))
def lsrt2_run(model, exc, r_eq, t0, h, n_samples, every, relinearise_every):
    """LSRT2 from rest at the equilibrium r_eq; channels at every output sample."""
    system = model_system(model, exc)
    n = r_eq.size
    out = lambda r, v, t: channels(model, r, v, r_eq)  # noqa: E731
    traj = lsrt2.simulate(system, r_eq.reshape(-1), jnp.zeros(n, r_eq.dtype), t0, h,
                          n_samples, every, relinearise_every, out)
    return traj.outputs


equilibrium = jax.jit(statics.static_equilibrium)


@dataclass
class RunResult:
    time: np.ndarray
    channels: dict
    r_eq: np.ndarray
    timings: dict = field(default_factory=dict)
    equilibrium: dict = field(default_factory=dict)
    model: Model | None = None


def sample_grid(t_start, t_end, dt, every):
    n_steps = int(round((t_end - t_start) / dt))
    if not math.isclose(n_steps * dt, t_end - t_start, rel_tol=0, abs_tol=1e-9):
        raise ModelError(f"integrator.dt = {dt} does not divide the load case duration "
                         f"{t_end - t_start} s")
    if every < 1 or n_steps % every:
        raise ModelError(f"output.every = {every} must be >= 1 and divide the "
                         f"{n_steps} steps of the run")
    return n_steps // every + 1


def run(cfg) -> RunResult:
    """Run one job from a resolved config (model, loadcase, integrator, output)."""
    model = model_from_config(cfg["model"])
    exc, t0, t1 = build_excitation(cfg["loadcase"])
    integ = cfg["integrator"]
    name = integ["name"]
    if name not in ("lsrt2", "radau"):
        raise ModelError(f"integrator.name = {name!r} is not one of lsrt2, radau")
    dt = float(integ["dt"])
    if not dt > 0:
        raise ModelError(f"integrator.dt = {dt} must be positive")
    every = int(cfg["output"].get("every", 1))
    n_samples = sample_grid(t0, t1, dt, every)

    timings = {}
    tic = time.perf_counter()
    eq = equilibrium(model, loads.u_at(exc, t0))
    eq = jax.device_get(eq)
    timings["equilibrium_s"] = time.perf_counter() - tic
    if not eq.converged:
        raise JobError(f"static equilibrium did not converge for model {model.topology.name!r} "
                       f"under the loads at t_start = {t0} s: residual {eq.residual:.3g} N after "
                       f"{eq.iterations} Newton iterations")
    r_eq = jnp.asarray(eq.r)
    times = t0 + np.arange(n_samples) * every * dt

    if name == "lsrt2":
        N = int(integ.get("relinearise_every", 1))
        if N < 1:
            raise ModelError(f"integrator.relinearise_every = {N} must be >= 1")
        args = (model, exc, r_eq, t0, dt)
        kw = dict(n_samples=n_samples, every=every, relinearise_every=N)
        tic = time.perf_counter()
        compiled = lsrt2_run.lower(*args, **kw).compile()
        timings["compile_s"] = time.perf_counter() - tic
        tic = time.perf_counter()
        out = jax.block_until_ready(compiled(*args))
        timings["run_s"] = time.perf_counter() - tic
        out = jax.device_get(out)
    else:
        from sweep.reference import radau
        tic = time.perf_counter()
        t, r, v = radau(model, exc, r_eq, jnp.zeros_like(r_eq), times,
                        rtol=float(integ.get("rtol", 1e-8)),
                        atol_coordinates=float(integ.get("atol_coordinates", 1e-10)),
                        atol_speeds=float(integ.get("atol_speeds", 1e-8)))
        timings["run_s"] = time.perf_counter() - tic
        timings["compile_s"] = 0.0
        ch = jax.jit(jax.vmap(lambda rr, vv: channels(model, rr, vv, r_eq)))
        out = jax.device_get(ch(jnp.asarray(r), jnp.asarray(v)))
    timings["simulated_s"] = t1 - t0
    timings["real_time_factor"] = timings["run_s"] / (t1 - t0)
    return RunResult(times, out, np.asarray(r_eq), timings,
                     {"iterations": int(eq.iterations), "residual_N": float(eq.residual)}, model)
