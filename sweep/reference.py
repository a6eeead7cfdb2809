"""Reference solution: scipy's Radau IIA (variable step, implicit, order 5).

Runs the same model with ``scipy.integrate.solve_ivp(method="Radau")`` at
tight tolerances with the Jacobian assembled by the kernels
([[d(K v)/dr, K], [J_r, J_v]], exact including the dK/dr term), sampled on
the integrator's output times. The integration is split at the switching
times of the excitation so that steps never straddle a discontinuity.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from scipy.integrate import solve_ivp

from kernels import loads
from kernels.dynamics import linearise, q_fn
from kernels.rotations import coordinate_rates


@jax.jit
def _rhs(model, exc, t, y):
    m = model.topology.n_bodies
    n = 6 * m
    r, v = y[:n].reshape(m, 6), y[n:].reshape(m, 6)
    u = loads.u_at(exc, t)
    return jnp.concatenate([coordinate_rates(r, v).reshape(-1), q_fn(model, r, v, u).reshape(-1)])


@jax.jit
def _jac(model, exc, t, y):
    m = model.topology.n_bodies
    n = 6 * m
    r, v = y[:n].reshape(m, 6), y[n:].reshape(m, 6)
    lin = linearise(model, r, v, loads.u_at(exc, t))
    dKv = jax.jacfwd(lambda rr: coordinate_rates(rr.reshape(m, 6), v).reshape(-1))(y[:n])
    K = jax.scipy.linalg.block_diag(*[lin.K[i] for i in range(m)])
    return jnp.block([[dKv, K], [lin.J_r, lin.J_v]])


def make_rhs(model, exc):
    """f(t, y) and its exact Jacobian for y = (r, v) flat; compiled once per model structure."""
    return (lambda t, y: _rhs(model, exc, t, y)), (lambda t, y: _jac(model, exc, t, y))


def radau(model, exc, r0, v0, t_eval, rtol=1e-8, atol_coordinates=1e-10, atol_speeds=1e-8):
    """Integrate with Radau; returns (t, r (nt, m, 6), v (nt, m, 6)).

    Absolute tolerances: coordinates [m, rad] and speeds [m/s, rad/s]. The
    speeds cannot be asked for much tighter: the round-off of the stiff
    elements' forces (1e8 N/m ball joints on 0.3 kg parts) alone makes
    accelerations of ~1e-8 m/s^2 noise, and a tighter speed tolerance only
    forces ever smaller steps without changing the coordinates.
    """
    m = model.topology.n_bodies
    f, jac = make_rhs(model, exc)
    fn = lambda t, y: np.asarray(f(t, jnp.asarray(y)))  # noqa: E731
    jn = lambda t, y: np.asarray(jac(t, jnp.asarray(y)))  # noqa: E731
    t_eval = np.asarray(t_eval, float)
    t0, t1 = float(t_eval[0]), float(t_eval[-1])
    cuts = [t for t in loads.switch_times(exc) if t0 < t < t1]
    bounds = [t0] + cuts + [t1]
    y = np.concatenate([np.asarray(r0).reshape(-1), np.asarray(v0).reshape(-1)])
    n = 6 * m
    atol = np.concatenate([np.full(n, atol_coordinates), np.full(n, atol_speeds)])
    ys = np.full((len(t_eval), y.size), np.nan)
    for a, b in zip(bounds[:-1], bounds[1:]):
        last = b == t1
        sel = (t_eval >= a - 1e-12) & ((t_eval <= b + 1e-12) if last else (t_eval < b - loads.STEP_TOL))
        ts = t_eval[sel]
        # also stop exactly at b to hand the state over to the next segment
        ts_b = ts if (len(ts) and ts[-1] == b) else np.append(ts, b)
        sol = solve_ivp(fn, (a, b), y, method="Radau", t_eval=ts_b, rtol=rtol,
                        atol=atol, jac=jn)
        if not sol.success:
            raise RuntimeError(f"Radau reference failed on [{a}, {b}]: {sol.message}")
        ys[sel] = sol.y.T[:len(ts)]
        y = sol.y[:, -1]
    return t_eval, ys[:, :n].reshape(-1, m, 6), ys[:, n:].reshape(-1, m, 6)
