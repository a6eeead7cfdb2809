"""LSRT2 (method.md eqs. 6-11): one-step map, order 2, stiff stability."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.linalg import expm

import kernels  # noqa: F401
from kernels import integrate
from kernels.lsrt2 import LSRT2
from kernels.dynamics import Linearisation

G = 1 - math.sqrt(2) / 2


def linear_system(Omega, C, B, u_fn):
    """d r/dt = v, d v/dt = -Omega r - C v + B u(t): one 'body' with K = I."""
    Omega, C, B = map(jnp.asarray, (Omega, C, B))
    eye = jnp.eye(6)[None]

    def q(r, v, u):
        return -Omega @ r - C @ v + B @ u

    def lin(r, v, u):
        return Linearisation(q(r, v, u), -Omega, -C, B, eye)

    return integrate.System(linearise=lin, q=q, rates=lambda r, v: v, u=u_fn,
                        du=lambda t: jax.jacfwd(u_fn)(jnp.asarray(t, jnp.float64)))


# one jitted function for the module (``LSRT2.simulate`` is a new bound
# method at every attribute access: a jit of it made per call compiled anew
# for every call)
_SIMULATE = jax.jit(LSRT2.simulate, static_argnums=(0, 5, 6, 7))


def run(system, y0, h, n, N=1):
    out = _SIMULATE(system, y0[:6], y0[6:], 0.0, h, n + 1, 1, N)
    return np.hstack([out.outputs["r"], out.outputs["v"]])


rng = np.random.default_rng(0)
A_ = rng.normal(size=(6, 6))
OMEGA = A_ @ A_.T + 6 * np.eye(6)          # s.p.d. stiffness (per unit mass)
CDAMP = 0.3 * np.eye(6) + 0.05 * OMEGA
BU = rng.normal(size=(6, 2))
Y0 = rng.normal(size=12)


def test_one_step_is_the_stability_function():
    """For a linear autonomous system one step is R(hJ) with
    R(z) = (1 + (sqrt2 - 1) z) / (1 - g z)^2 (method.md section 2)."""
    sysm = linear_system(OMEGA, CDAMP, BU, lambda t: jnp.zeros(2))
    J = np.block([[np.zeros((6, 6)), np.eye(6)], [-OMEGA, -CDAMP]])
    for h in (1e-3, 0.05, 0.5):
        Z = h * J
        Minv = np.linalg.inv(np.eye(12) - G * Z)
        R = Minv @ Minv @ (np.eye(12) + (math.sqrt(2) - 1) * Z)
        np.testing.assert_allclose(run(sysm, Y0, h, 1)[1], R @ Y0, rtol=1e-11, atol=1e-13)


def augmented(b):
    """The matrix of the linear problem with input u = a + b t augmented by
    u and a constant 1: z = (y, u, 1), z' = M z."""
    n = 12 + 2 + 1
    M = np.zeros((n, n))
    M[:6, 6:12] = np.eye(6)
    M[6:12, :6] = -OMEGA
    M[6:12, 6:12] = -CDAMP
    M[6:12, 12:14] = BU
    M[12:14, 14] = b
    return M


def _exact_ramp(t_end, a, b):
    """Exact solution with input u = a + b t via the augmented matrix exponential."""
    z0 = np.concatenate([Y0, a, [1.0]])
    return (expm(augmented(b) * t_end) @ z0)[:12]


@pytest.mark.parametrize("N", [1, 3])
def test_order_two_on_linear_problem_with_ramp_input(N):
    a, b = np.array([1.0, -2.0]), np.array([3.0, 0.5])
    sysm = linear_system(OMEGA, CDAMP, BU, lambda t: jnp.asarray(a) + jnp.asarray(b) * t)
    T = 1.2
    errs = []
    for h in (0.04, 0.02, 0.01, 0.005):
        n = int(round(T / h))
        errs.append(np.linalg.norm(run(sysm, Y0, h, n, N)[-1] - _exact_ramp(T, a, b)))
    orders = np.log2(np.array(errs[:-1]) / np.array(errs[1:]))
    assert np.all(np.abs(orders[1:] - 2.0) < 0.15), (errs, orders)


def test_stiff_linear_problem_is_stable_and_damps_stiff_modes():
    Omega = np.diag([1.0, 10.0, 1e4, 1e6, 1e9, 1e12])
    C = np.diag([0.2, 0.5, 100.0, 1e3, 1e5, 1e6])
    J = np.block([[np.zeros((6, 6)), np.eye(6)], [-Omega, -C]])
    lam = np.abs(np.linalg.eigvals(J))
    assert lam.max() / lam.min() >= 1e6
    sysm = linear_system(Omega, C, np.zeros((6, 2)), lambda t: jnp.zeros(2))
    y0 = np.ones(12)
    ys = run(sysm, y0, 1e-3, 2000)
    exact = expm(J * 2.0) @ y0
    # bounded (an explicit method overflows here within a few steps); the
    # first-step transient of the stiff velocities is of the size of the
    # exact one (|v| up to ~1e6 for the 1e12 mode), then decays
    assert np.all(np.isfinite(ys)) and np.abs(ys).max() < 1e4
    # slow modes accurate, stiff modes damped out (L-stability: R(-inf) = 0)
    np.testing.assert_allclose(ys[-1, [0, 1, 6, 7]], exact[[0, 1, 6, 7]], rtol=2e-3, atol=1e-5)
    stiff = [4, 5, 10, 11]          # |lambda| h >= 10
    assert np.abs(ys[20:, stiff]).max() < 1e-6
    np.testing.assert_allclose(ys[-1, [2, 3, 8, 9]], exact[[2, 3, 8, 9]], atol=1e-6)


def rigid_body_problem(T=0.4, rtol=1e-12):
    """A rigid body on a nonlinear bushing, large rotations (K(r) far from
    identity) and gyroscopic coupling: (system, y0, T, Radau reference at T,
    ``rtol``; atol 10x tighter; stored while it is this problem's solution:
    tests/radau_store.py). Shared with tests/kernels/test_methods.py."""
    from kernels import loads
    from kernels.model import build_model
    from kernels.system import model_system
    from tests.radau_store import radau_reference
    I = [[0.05, 0.0, 0.0], [0.0, 0.08, 0.0], [0.0, 0.0, 0.11]]
    cv = {"x": [-1.0, 0.0, 1.0], "y": [-120.0, 0.0, 60.0]}
    tables = {"name": "pendulum", "gravity": [0, 0, -9.81],
              "bodies": [{"index": 1, "name": "b", "mass": 2.0, "inertia": I, "position": [0.1, 0.0, -0.2]}],
              "markers": [{"index": 1, "name": "g", "body": 0, "position": [0, 0, 0]},
                          {"index": 2, "name": "b", "body": 1, "position": [0, 0, 0]}],
              "bushings": [{"index": 1, "name": "pivot", "marker_1": 2, "marker_2": 1,
                            "stiffness": [2e4, 2e4, 2e4, 0, 0, 0], "damping": [20, 20, 20, 0.05, 0.05, 0.05],
                            "stiffness_curves": {"rx": cv, "ry": cv, "rz": cv}}],
              "p2p": [], "wheels": {"left": 1, "right": 1}}
    model = build_model(tables)
    exc = loads.excitation(np.zeros((2, 6)))
    r0 = model.r_design.at[0, 3:].set(jnp.array([0.4, -0.3, 0.5]))
    v0 = jnp.array([[0.0, 0.1, 0.0, 3.0, -2.0, 4.0]])
    _, rr, vv = radau_reference(f"rigid_body_on_bushing_rtol{rtol:g}", model, exc, r0, v0, np.array([0.0, T]),
                                rtol=rtol, atol_coordinates=rtol / 10, atol_speeds=rtol)
    ref = np.concatenate([rr[-1].ravel(), vv[-1].ravel()])
    return model_system(model, exc), np.concatenate([np.ravel(r0), np.ravel(v0)]), T, ref


def test_order_two_on_nonlinear_rigid_body():
    """A rigid body on a nonlinear bushing, large rotations (K(r) far from
    identity) and gyroscopic coupling, against Radau at rtol 1e-9 (LSRT2's
    errors here are 3e-3 to 4e-2, so the reference is exact to them)."""
    sysm, y0, T, ref = rigid_body_problem(rtol=1e-9)
    errs = []
    n = int(round(T / 5e-4))            # one compilation (h is traced): every run takes n steps,
    for h in (2e-3, 1e-3, 5e-4):        # the state at T is sample T / h
        out = run(sysm, y0, h, n)
        errs.append(np.linalg.norm(out[int(round(T / h))] - ref))
    orders = np.log2(np.array(errs[:-1]) / np.array(errs[1:]))
    assert np.all(np.abs(orders - 2.0) < 0.2), (errs, orders)


def test_model_system_K_is_the_velocity_jacobian_of_the_rates():
    """The K blocks that the model system hands to eqs. (7), (8) and (11) (from
    its linearisation) are K(r) of eq. (1a): d(dr/dt)/dv of the system's own
    rates, at a rotated, moving state of a two-body model (per-body 6x6
    blocks, zero between bodies). The order tests cannot see a wrong K_lin
    there: it only changes the W-matrix of a W-method."""
    from kernels import loads
    from kernels.model import build_model
    from kernels.system import model_system
    from tests.conftest import single_mount_tables
    tables = single_mount_tables()
    tables["bodies"].append({**tables["bodies"][0], "index": 2, "name": "c", "position": [0.3, 0.1, 0.0]})
    tables["markers"].append({"index": 3, "name": "c", "body": 2, "position": [0.35, 0.0, 0.0]})
    tables["bushings"].append({**tables["bushings"][0], "index": 2, "name": "link", "marker_1": 3, "marker_2": 2})
    model = build_model(tables)
    sysm = model_system(model, loads.excitation(np.zeros((2, 6))))
    rng = np.random.default_rng(3)
    r = (model.r_design + jnp.asarray(np.hstack([rng.normal(0, 0.01, (2, 3)), rng.normal(0, 0.5, (2, 3))]))).reshape(-1)
    v = jnp.asarray(rng.normal(size=12))
    K = np.asarray(jax.jit(sysm.linearise)(r, v, jnp.zeros(12)).K)     # jitted: op by op it took 20 s
    dK = np.asarray(jax.jit(jax.jacfwd(sysm.rates, argnums=1))(r, v)).reshape(2, 6, 2, 6)
    for i in range(2):
        np.testing.assert_allclose(K[i], dK[i, :, i, :], rtol=1e-13, atol=1e-15)
        assert np.all(dK[i, :, 1 - i, :] == 0)
    assert np.abs(K[:, 3:, 3:] - np.eye(3)).max() > 0.1      # far from identity: the test sees the rotation
