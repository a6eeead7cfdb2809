"""Modal analysis of the axle linearised at a static state (method.md eqs. 1, 4-5).

At rest (v = 0) the linearisation of eq. (1) in the state (r, v) is

    d/dt (dr, dv) = A (dr, dv),   A = [[0, K(r)], [J_r, J_v]]

(``K v`` has no r-derivative at v = 0). Its eigenvalues lambda come as
complex-conjugate pairs for the oscillatory modes and as real values for the
overdamped ones. Per oscillatory mode (Im lambda > 0) this module gives

- the undamped natural frequency f = |lambda| / (2 pi) [Hz] and the damping
  ratio zeta = -Re(lambda) / |lambda| [-] (the usual definitions for a
  mode with characteristic polynomial s^2 + 2 zeta w s + w^2),
- participation: the share of each body in the mode's kinetic energy
  (0.5 m |dv_t|^2 + 0.5 dw^H I dw, from the velocity part of the
  eigenvector) and the share of each bushing in its elastic energy
  (0.5 sum_j k_j |d deflection_j|^2 with the tangent rates of the
  characteristics at the state, from the coordinate part).

Everything is pure JAX (``jnp.linalg.eig``: nonsymmetric eigenproblem; XLA
implements it on CPU - on GPU the sweep job runs this stage on the host
CPU, see sweep/modes.py) and vmaps over variants; the mode count per
variant is fixed (``n_modes`` lowest by frequency, NaN where a variant has
fewer oscillatory modes).
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp

from kernels import forces
from kernels.dynamics import _states_with_ground, linearise


class Modes(NamedTuple):
    frequency: jax.Array          # (n_modes,) Hz, undamped natural frequency |lambda| / 2 pi
    damping_ratio: jax.Array      # (n_modes,) -, -Re(lambda) / |lambda|
    eigenvalue: jax.Array         # (n_modes,) complex, 1/s
    body_energy: jax.Array        # (n_modes, m) kinetic-energy share per body, rows sum to 1
    bushing_energy: jax.Array     # (n_modes, nb) elastic-energy share per bushing, rows sum to 1
    n_overdamped: jax.Array       # () number of real eigenvalues (overdamped / static modes)


def state_matrix(model, r, u):
    """A = [[0, K], [J_r, J_v]] (2n, 2n) of eq. (1) linearised at rest at r (m, 6) under u (2, 6)."""
    lin = linearise(model, r, jnp.zeros_like(r), u)
    n = lin.J_r.shape[0]
    m = lin.K.shape[0]
    Kd = jnp.zeros((n, n), r.dtype)
    idx = jnp.arange(m)
    Kd = Kd.reshape(m, 6, m, 6).at[idx, :, idx, :].set(lin.K).reshape(n, n)
    top = jnp.concatenate([jnp.zeros((n, n), r.dtype), Kd], axis=1)
    bottom = jnp.concatenate([lin.J_r, lin.J_v], axis=1)
    return jnp.concatenate([top, bottom], axis=0)


def _bushing_deflection_map(model, r):
    """Linear map dr (m, 6) -> bushing deflection increments (nb, 6) and the
    tangent elastic rates (nb, 6) of the characteristics at r."""
    topo = model.topology
    prm = forces.bushing_params(model)
    bodies = topo.bushing_bodies
    v0 = jnp.zeros_like(r)

    def defl(rr):
        x = _states_with_ground(rr, v0)
        return jax.vmap(lambda p, a, b: forces.bushing_deflection(p, a, b)[0])(
            prm, x[bodies[:, 0]], x[bodies[:, 1]])
    d0 = defl(r)

    def rates(p, d):
        zero = jnp.zeros_like(d)
        return jax.jvp(lambda dd: forces.bushing_local_forces(p, dd, zero)[0], (d,), (jnp.ones_like(d),))[1]
    kd = jax.vmap(rates)(prm, d0)
    return (lambda dr: jax.jvp(defl, (r,), (dr,))[1]), kd


def modes(model, r, u, n_modes=40):
    """Lowest ``n_modes`` oscillatory modes of the axle at rest at r under u (:class:`Modes`)."""
    m = model.topology.n_bodies
    n = 6 * m
    A = state_matrix(model, r, u)
    lam, X = jnp.linalg.eig(A)
    osc = jnp.imag(lam) > 1e-9 * jnp.maximum(jnp.abs(lam), 1.0)
    key = jnp.where(osc, jnp.abs(lam), jnp.inf)
    order = jnp.argsort(key)[:n_modes]
    lam_s, X_s = lam[order], X[:, order]
    valid = jnp.isfinite(key[order])
    w = jnp.abs(lam_s)
    nan = jnp.nan
    frequency = jnp.where(valid, w / (2 * jnp.pi), nan)
    zeta = jnp.where(valid, -jnp.real(lam_s) / w, nan)
    # kinetic energy per body from the velocity part of each eigenvector
    xv = X_s[n:].T.reshape(n_modes, m, 6)
    vt, om = xv[..., :3], xv[..., 3:]
    t_trans = model.mass[None, :] * jnp.sum(jnp.abs(vt) ** 2, axis=-1)
    t_rot = jnp.real(jnp.einsum("kbi,bij,kbj->kb", jnp.conj(om), model.inertia.astype(om.dtype), om))
    T = 0.5 * (t_trans + t_rot)
    body_energy = T / jnp.sum(T, axis=1, keepdims=True)
    # elastic energy per bushing from the coordinate part
    dmap, kd = _bushing_deflection_map(model, r)
    xr = X_s[:n].T.reshape(n_modes, m, 6)
    dre = jax.vmap(dmap)(jnp.real(xr))
    dim = jax.vmap(dmap)(jnp.imag(xr))
    V = 0.5 * jnp.sum(kd[None] * (dre ** 2 + dim ** 2), axis=-1)
    bushing_energy = V / jnp.sum(V, axis=1, keepdims=True)
    mask = valid[:, None]
    return Modes(frequency=frequency, damping_ratio=zeta,
                 eigenvalue=jnp.where(valid, lam_s, nan),
                 body_energy=jnp.where(mask, body_energy, nan),
                 bushing_energy=jnp.where(mask, bushing_energy, nan),
                 n_overdamped=jnp.sum(jnp.abs(jnp.imag(lam)) <= 1e-9 * jnp.maximum(jnp.abs(lam), 1.0)))
