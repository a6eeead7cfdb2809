"""Frequency response of the axle linearised at a static state (method.md eqs. 1, 4-5).

At rest (v = 0) under the wheel-centre loads u, eq. (1) linearised in the
state (r, v) and the load u is

    d(dr)/dt = K(r) dv
    d(dv)/dt = J_r dr + J_v dv + J_u du

(``K v`` has no r-derivative at v = 0; the same linearisation as the
integrators' and the modes', :func:`kernels.dynamics.linearise`). For a
harmonic load du = U e^{i w t} the steady state is dv = V e^{i w t}, dr = K V
/ (i w) e^{i w t}, with

    (-w^2 I - i w J_v - J_r K) V = i w J_u U

one complex solve of the n velocity coordinates per angular frequency w
[rad/s] (half the size of the 2n-state form; w > 0). The outputs are linear
maps of (dr, dv) at the same state:

- ``wheel_centre``: wheel-centre displacement (x, y, z) per side [m per
  input unit]: the receptance;
- ``toe_camber``: toe and camber (DIN 70000 signs, left and right wheel)
  [rad per input unit]: the dynamic compliance steer and camber;
- ``bushing``: force and torque of chosen bushings on their first body,
  elastic and damping parts together [N, N m per input unit]: the
  transmissibility to the body mounts;
- ``p2p``: force of chosen point-to-point elements (springs, dampers,
  stops) on their first body, at its marker [N per input unit];
- ``body``: the state coordinates of chosen bodies (their slots): position
  x, y, z and the z-y'-x'' Euler angles (yaw, pitch, roll) [m, rad per input
  unit] - e.g. a sprung body's heave and
  roll (``kernels.statics``: the ride modes).

Inputs are the 12 entries of u (left fx, fy, fz, mx, my, mz, then right;
forces at the wheel centre, vehicle frame) selected by index. Pure JAX:
jit, vmap (over variants, over frequencies) and grad work; complex128 in
float64 runs.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from kernels import kc, metrics
from kernels.dynamics import dense_kinematic_matrix, linearise

#: The 12 entries of a wheel-load row pair u (2, 6) flattened, as input names.
INPUTS = tuple(f"{side}_{c}" for side in ("left", "right") for c in ("fx", "fy", "fz", "mx", "my", "mz"))


class FrequencyResponse(NamedTuple):
    wheel_centre: jax.Array     # (nf, 2, 3, n_in) complex: side, axis x/y/z [m / input unit]
    toe_camber: jax.Array       # (nf, 2, 2, n_in) complex: toe | camber, side [rad / input unit]
    bushing: jax.Array          # (nf, nb_out, 6, n_in) complex [N, N m / input unit]
    p2p: jax.Array              # (nf, np_out, 3, n_in) complex [N / input unit]
    body: jax.Array             # (nf, nbody_out, 6, n_in) complex: x, y, z, yaw, pitch, roll [m, rad / input unit]


def p2p_forces(model, r, v, rows):
    """Force (n, 3) [N] of the P2P elements ``rows`` on their first body,
    vehicle frame: T e, the tension along the line to the second marker."""
    from kernels import forces
    from kernels.dynamics import states_with_ground
    x = states_with_ground(r, v)
    b = model.topology.p2p_bodies[rows]
    prm = jax.tree_util.tree_map(lambda a: a[rows], model.elements["p2p"])

    def one(p, x1, x2):
        T, _, _, (_, _, e, *_rest) = forces.p2p_tension(p, x1, x2)
        return T * e
    return jax.vmap(one)(prm, x[b[:, 0]], x[b[:, 1]])


def frequency_response(model, r, u, omega, inputs, bushings=(), p2p=(), bodies=()):
    """Steady-state harmonic response at the static state r (m, 6) under u (2, 6).

    Args:
      omega: (nf,) angular frequencies [rad/s], > 0.
      inputs: indices into :data:`INPUTS` (static).
      bushings: indices of the bushings whose forces are output (static).
      p2p: indices of the P2P elements whose forces are output (static).
      bodies: state slots whose coordinates are output (static).
    Returns a :class:`FrequencyResponse`."""
    inputs = np.asarray(inputs, int)
    bushings = np.asarray(bushings, int)
    p2p = np.asarray(p2p, int)
    bodies = np.asarray(bodies, int)
    v0 = jnp.zeros_like(r)
    lin = linearise(model, r, v0, u)
    n = lin.J_r.shape[0]
    Kd = dense_kinematic_matrix(lin)
    JrK = lin.J_r @ Kd
    B = lin.J_u[:, inputs].astype(jnp.complex128)
    Y = kc.wheel_output_jacobian(model, r)[np.r_[0:3, 6:9]]           # (6, n)
    T = kc.toe_camber_jacobian(model, r).reshape(4, n)
    if len(bushings):
        Fr, Fv = jax.jacfwd(lambda rr, vv: metrics.bushing_forces(model, rr, vv)[bushings], argnums=(0, 1))(r, v0)
        Fr, Fv = Fr.reshape(-1, n), Fv.reshape(-1, n)
    if len(p2p):
        Pr, Pv = jax.jacfwd(lambda rr, vv: p2p_forces(model, rr, vv, p2p), argnums=(0, 1))(r, v0)
        Pr, Pv = Pr.reshape(-1, n), Pv.reshape(-1, n)
    eye = jnp.eye(n)

    def one(w):
        A = (-(w ** 2) * eye - JrK).astype(jnp.complex128) - 1j * w * lin.J_v
        dv = jnp.linalg.solve(A, 1j * w * B)                          # (n, n_in)
        dr = (Kd @ dv) / (1j * w)
        wc = (Y @ dr).reshape(2, 3, -1)
        tc = (T @ dr).reshape(2, 2, -1)
        bf = ((Fr @ dr + Fv @ dv).reshape(len(bushings), 6, -1) if len(bushings)
              else jnp.zeros((0, 6, len(inputs)), jnp.complex128))
        pf = ((Pr @ dr + Pv @ dv).reshape(len(p2p), 3, -1) if len(p2p)
              else jnp.zeros((0, 3, len(inputs)), jnp.complex128))
        bd = dr.reshape(-1, 6, dr.shape[-1])[bodies]
        return wc, tc, bf, pf, bd
    return FrequencyResponse(*jax.lax.map(one, jnp.asarray(omega, r.dtype)))


def static_compliance(model, r, u, inputs):
    """The w -> 0 limit of the wheel-centre receptance: at rest J_r dr + J_u du
    = 0, so dr = -J_r^-1 J_u du; (2, 3, n_in) real [m per input unit]."""
    inputs = np.asarray(inputs, int)
    lin = linearise(model, r, jnp.zeros_like(r), u)
    dr = -jnp.linalg.solve(lin.J_r, lin.J_u[:, inputs])
    Y = kc.wheel_output_jacobian(model, r)[np.r_[0:3, 6:9]]
    return (Y @ dr).reshape(2, 3, -1)
