"""Force elements against analytic forces and finite differences."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import kernels  # noqa: F401
from kernels import forces
from kernels.model import build_model
from kernels.rotations import euler_to_matrix


def two_body_tables(bushing=None, p2p=None):
    """Body 1 at the origin bushed to body 2 at (0.5, 0, 0); markers at (0.2, 0.1, 0)."""
    I = np.diag([0.2, 0.3, 0.4]).tolist()
    R = np.array([[0, 0, 1], [1, 0, 0], [0, 1, 0.0]])  # marker axes: x->y, y->z, z->x
    tables = {
        "name": "toy", "gravity": [0, 0, 0],
        "bodies": [{"index": 1, "name": "a", "mass": 2.0, "inertia": I, "position": [0, 0, 0]},
                   {"index": 2, "name": "b", "mass": 3.0, "inertia": I, "position": [0.5, 0, 0],
                    "euler": [0.1, -0.2, 0.3]}],
        "markers": [{"index": 1, "name": "m1", "body": 1, "position": [0.2, 0.1, 0], "orientation": R.tolist()},
                    {"index": 2, "name": "m2", "body": 2, "position": [0.2, 0.1, 0], "orientation": R.tolist()},
                    {"index": 3, "name": "m3", "body": 2, "position": [0.6, 0.3, -0.1]}],
        "bushings": [], "p2p": [],
        "wheels": {"left": 1, "right": 2},
    }
    if bushing:
        tables["bushings"] = [{"index": 1, "name": "bu", "marker_1": 1, "marker_2": 2, **bushing}]
    if p2p:
        tables["p2p"] = [{"index": 1, "name": "pp", "marker_1": 1, "marker_2": 3, **p2p}]
    return tables


K6 = [1e5, 2e5, 3e5, 100.0, 200.0, 300.0]
C6 = [10.0, 20.0, 30.0, 1.0, 2.0, 3.0]


def states(model, dx=np.zeros(6), v2=np.zeros(6)):
    x1 = jnp.concatenate([model.r_design[0], jnp.zeros(6)])
    x2 = jnp.concatenate([model.r_design[1] + jnp.asarray(dx), jnp.asarray(v2)])
    return x1, x2


def bu_prm(model):
    return jax.tree_util.tree_map(lambda a: a[0], model.elements["bushing"])


def test_bushing_linear_force_in_marker_frame():
    model = build_model(two_body_tables({"stiffness": K6, "damping": C6}))
    prm = bu_prm(model)
    # translate body 2 by 1 mm along the marker's local x (= vehicle y)
    x1, x2 = states(model, dx=np.array([0, 1e-3, 0, 0, 0, 0]))
    f = forces.bushing_output(prm, x1, x2)
    np.testing.assert_allclose(f[:3], [0, K6[0] * 1e-3, 0], atol=1e-9)
    np.testing.assert_allclose(f[3:], 0, atol=1e-9)
    # velocity along local z (= vehicle x): damping force on body 1 along +x
    x1, x2 = states(model, v2=np.array([0.1, 0, 0, 0, 0, 0]))
    np.testing.assert_allclose(forces.bushing_output(prm, x1, x2)[:3], [C6[2] * 0.1, 0, 0], atol=1e-9)


def test_bushing_small_rotation_torque():
    model = build_model(two_body_tables({"stiffness": K6, "damping": [0] * 6}))
    prm = bu_prm(model)
    # rotate body 2 about the vehicle x axis (= marker z) by 1e-4 rad about the marker point:
    # build the perturbed pose exactly from R_new = Rx(eps) R2
    eps = 1e-4
    R2 = euler_to_matrix(model.r_design[1, 3:])
    Rx = jnp.array([[1, 0, 0], [0, np.cos(eps), -np.sin(eps)], [0, np.sin(eps), np.cos(eps)]])
    from kernels.rotations import matrix_to_euler
    a_new = matrix_to_euler(Rx @ R2)
    pm = jnp.array([0.2, 0.1, 0.0])
    p_new = pm + Rx @ (model.r_design[1, :3] - pm)
    dx = jnp.concatenate([p_new - model.r_design[1, :3], a_new - model.r_design[1, 3:]])
    x1, x2 = states(model, dx=np.asarray(dx))
    f = forces.bushing_output(prm, x1, x2)
    np.testing.assert_allclose(f[3:], [K6[5] * eps, 0, 0], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(f[:3], 0, atol=1e-6)


@pytest.mark.parametrize("kind", ["bushing", "p2p"])
def test_element_forces_balance_linear_and_angular_momentum(kind):
    bushing = {"stiffness": K6, "damping": C6, "preload": [5, 0, 0, 0, 1, 0]} if kind == "bushing" else None
    p2p = {"kind": "spring", "stiffness": 2e4, "preload": 300.0} if kind == "p2p" else None
    model = build_model(two_body_tables(bushing, p2p))
    fn = forces.bushing_element if kind == "bushing" else forces.p2p_element
    prm = jax.tree_util.tree_map(lambda a: a[0], model.elements[kind])
    x1, x2 = states(model, dx=np.array([1e-3, -2e-3, 3e-3, 0.01, -0.02, 0.015]), v2=np.array([0.1, 0.2, -0.1, 1, -2, 0.5]))
    g1, g2 = fn(prm, x1, x2)
    np.testing.assert_allclose(g1[:3] + g2[:3], 0, atol=1e-9)
    mom = 0
    for x, g in ((x1, g1), (x2, g2)):
        R = euler_to_matrix(x[3:6])
        mom = mom + jnp.cross(x[:3], g[:3]) + R @ g[3:]
    np.testing.assert_allclose(mom, 0, atol=1e-8 * float(jnp.abs(g1).max()))


def test_p2p_laws():
    L0 = float(np.linalg.norm(np.subtract([0.6, 0.3, -0.1], [0.2, 0.1, 0.0])))
    e = np.subtract([0.6, 0.3, -0.1], [0.2, 0.1, 0.0]) / L0

    def tension(p2p, ds):  # ds: shortening of the element along its line [m]
        model = build_model(two_body_tables(p2p=p2p))
        prm = jax.tree_util.tree_map(lambda a: a[0], model.elements["p2p"])
        x1, x2 = states(model, dx=np.concatenate([-ds * e, np.zeros(3)]))
        return float(forces.p2p_tension(prm, x1, x2)[0])

    spring = {"kind": "spring", "stiffness": 2e4, "preload": 300.0}
    np.testing.assert_allclose(tension(spring, 0.0), -300, rtol=1e-9)     # the preload alone at design
    np.testing.assert_allclose(tension(spring, 0.01), -(300 + 200), rtol=1e-9)
    curve = {"x": [0, 0.002, 0.01, 0.02], "y": [0, 200, 1000, 2500]}
    bump = {"kind": "bump_stop", "clearance": 0.02, "curve": curve}
    assert tension(bump, 0.019) == 0.0
    np.testing.assert_allclose(tension(bump, 0.03), -1000, rtol=1e-9)  # 10 mm past clearance
    np.testing.assert_allclose(tension(bump, 0.04), -2500, rtol=1e-9)
    reb = {"kind": "rebound_stop", "clearance": 0.01, "curve": curve}
    assert tension(reb, -0.009) == 0.0 and tension(reb, 0.05) == 0.0
    np.testing.assert_allclose(tension(reb, -0.02), 1000, rtol=1e-9)


@pytest.mark.parametrize("kind", ["bushing", "p2p"])
def test_element_jacobian_matches_finite_differences(kind):
    """Element-local Jacobians (jacfwd) against central differences."""
    curves_ = {"x": {"x": [-0.01, 0, 0.01, 0.02], "y": [-2000, 0, 1500, 5000]}}
    bushing = {"stiffness": K6, "damping": C6, "stiffness_curves": curves_,
               "damping_curves": {"rz": {"x": [-1, 0, 1], "y": [-5, 0, 2]}}} if kind == "bushing" else None
    p2p = {"kind": "damper", "curve": {"x": [-1, 0, 0.5, 1], "y": [-900, 0, 300, 500]}} if kind == "p2p" else None
    model = build_model(two_body_tables(bushing, p2p))
    fn = forces.bushing_element if kind == "bushing" else forces.p2p_element
    prm = jax.tree_util.tree_map(lambda a: a[0], model.elements[kind])
    x1, x2 = states(model, dx=np.array([2e-3, -1e-3, 4e-3, 0.02, 0.01, -0.03]), v2=np.array([0.1, -0.2, 0.3, 0.5, -1, 0.7]))
    J = jax.jacfwd(lambda a, b: jnp.concatenate(fn(prm, a, b)), argnums=(0, 1))(x1, x2)
    for arg, Jarg in ((0, J[0]), (1, J[1])):
        for k in range(12):
            h = 1e-6 if k < 6 else 1e-5
            dx = jnp.zeros(12).at[k].set(h)
            xs = [x1, x2]
            plus = list(xs); plus[arg] = xs[arg] + dx
            minus = list(xs); minus[arg] = xs[arg] - dx
            fd = (jnp.concatenate(fn(prm, *plus)) - jnp.concatenate(fn(prm, *minus))) / (2 * h)
            scale = float(jnp.abs(Jarg).max())
            np.testing.assert_allclose(Jarg[:, k], fd, atol=2e-6 * scale)


# ----------------------------------------------------------------------------- conservative bushing law

def _bushing_potential_np(prm, x1, x2):
    """Potential of a linear bushing with preload, written here: sum_i k_i e_i^2 / 2
    + preload_i e_i, e = (d, theta) - offset, d = Rm1^T (pm2 - pm1), theta the
    rotation vector of Rm1^T Rm2 (scipy); k_scale = 1."""
    from scipy.spatial.transform import Rotation
    prm = jax.tree_util.tree_map(np.asarray, prm)
    x1, x2 = np.asarray(x1), np.asarray(x2)
    R1 = Rotation.from_euler("ZYX", x1[3:6]).as_matrix()
    R2 = Rotation.from_euler("ZYX", x2[3:6]).as_matrix()
    pm1, pm2 = x1[:3] + R1 @ prm["pos1"], x2[:3] + R2 @ prm["pos2"]
    Rm1, Rm2 = R1 @ prm["rot1"], R2 @ prm["rot2"]
    e = np.concatenate([Rm1.T @ (pm2 - pm1), Rotation.from_matrix(Rm1.T @ Rm2).as_rotvec()]) - prm["offset"]
    return float(np.sum(0.5 * prm["k"] * e ** 2 + prm["preload"] * e))


def _generalised_speeds_power(g1, g2, x1, x2):
    """Power of the generalised forces: F . v + M_body . omega_body, both bodies."""
    return float(jnp.dot(g1, x1[6:]) + jnp.dot(g2, x2[6:]))


def _coordinate_rates(x):
    from kernels.rotations import euler_rate_matrix
    return jnp.concatenate([x[6:9], euler_rate_matrix(x[3:6]) @ x[9:12]])


BUSHING_LARGE = {"stiffness": K6, "damping": [0] * 6, "preload": [10, -20, 30, 1, -2, 3],
                 "offset": [1e-3, 0, -2e-3, 0.01, 0, 0.02]}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bushing_elastic_forces_are_the_gradient_of_its_potential(seed):
    """Power of the elastic + preload loads = -dV/dt along any motion, at large
    relative rotations (0.5 rad) and separated markers (method.md section 1:
    the torque Jl^-T(theta) f_r and the force at marker 2's position). The old
    law (k theta torque, reaction at marker 1) fails this by ~1e-2."""
    model = build_model(two_body_tables(BUSHING_LARGE))
    prm = bu_prm(model)
    rng = np.random.default_rng(seed)
    x1, x2 = states(model, dx=rng.normal(0, [0.02] * 3 + [0.3] * 3), v2=rng.normal(0, [0.2] * 3 + [1.0] * 3))
    x1 = x1.at[3:6].set(jnp.asarray(rng.normal(0, 0.2, 3))).at[6:].set(jnp.asarray(rng.normal(0, 0.5, 6)))
    g1, g2 = forces.bushing_element(prm, x1, x2)
    power = _generalised_speeds_power(g1, g2, x1, x2)
    h = 1e-6
    V = lambda s: _bushing_potential_np(prm, x1.at[:6].add(s * _coordinate_rates(x1)),  # noqa: E731
                                        x2.at[:6].add(s * _coordinate_rates(x2)))
    dVdt = (V(h) - V(-h)) / (2 * h)
    scale = float(jnp.abs(g1[:3]).max() * 0.2 + jnp.abs(g1[3:]).max())
    assert abs(power + dVdt) < 1e-7 * scale, (power, -dVdt)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bushing_damping_dissipates_exactly(seed):
    """Damping only (k = 0): power of the loads = -(c_t |rho_t|^2 + c_r |rho_r|^2) <= 0,
    rho_t = d(d)/dt by central differences of the deflection d (written here),
    rho_r = Rm1^T (omega_2 - omega_1); also with the bodies moving rigidly together
    (no relative motion) the damping loads vanish."""
    from scipy.spatial.transform import Rotation
    model = build_model(two_body_tables({"stiffness": [0] * 6, "damping": C6}))
    prm = bu_prm(model)
    P = jax.tree_util.tree_map(np.asarray, prm)
    rng = np.random.default_rng(seed)
    x1, x2 = states(model, dx=rng.normal(0, [0.02] * 3 + [0.3] * 3), v2=rng.normal(0, [0.2] * 3 + [1.0] * 3))
    x1 = x1.at[6:].set(jnp.asarray(rng.normal(0, 0.5, 6)))

    def d_of(s):
        y1 = np.asarray(x1.at[:6].add(s * _coordinate_rates(x1)))
        y2 = np.asarray(x2.at[:6].add(s * _coordinate_rates(x2)))
        R1 = Rotation.from_euler("ZYX", y1[3:6]).as_matrix()
        R2 = Rotation.from_euler("ZYX", y2[3:6]).as_matrix()
        return (R1 @ P["rot1"]).T @ (y2[:3] + R2 @ P["pos2"] - y1[:3] - R1 @ P["pos1"])
    h = 1e-6
    rho_t = (d_of(h) - d_of(-h)) / (2 * h)
    R1 = Rotation.from_euler("ZYX", np.asarray(x1[3:6])).as_matrix()
    R2 = Rotation.from_euler("ZYX", np.asarray(x2[3:6])).as_matrix()
    rho_r = (R1 @ P["rot1"]).T @ (R2 @ np.asarray(x2[9:]) - R1 @ np.asarray(x1[9:]))
    g1, g2 = forces.bushing_element(prm, x1, x2)
    power = _generalised_speeds_power(g1, g2, x1, x2)
    expected = -float(np.sum(np.asarray(C6[:3]) * rho_t ** 2) + np.sum(np.asarray(C6[3:]) * rho_r ** 2))
    assert expected < 0
    np.testing.assert_allclose(power, expected, rtol=1e-7)
    # rigid motion of the pair (same angular velocity, velocities of one rigid body): no damping load
    w = jnp.asarray(rng.normal(0, 1.0, 3))                      # vehicle frame
    v1 = jnp.asarray(rng.normal(0, 0.2, 3))
    R2j = euler_to_matrix(x2[3:6])
    x1r = x1.at[6:9].set(v1).at[9:].set(euler_to_matrix(x1[3:6]).T @ w)
    x2r = x2.at[6:9].set(v1 + jnp.cross(w, x2[:3] - x1[:3])).at[9:].set(R2j.T @ w)
    g1, g2 = forces.bushing_element(prm, x1r, x2r)
    assert float(jnp.abs(jnp.concatenate([g1, g2])).max()) < 1e-12


def test_left_jacobian_inverse_transpose():
    """Jl^-T(theta) f against the derivative of the rotation-vector map, by central
    differences of scipy's rotation vector (delta theta = Jl^-1 eta for a left
    increment exp(eta) R): <f, Jl^-1 eta> = <Jl^-T f, eta>; small-angle branch,
    its switch (theta^2 = 1e-2) and float32."""
    from scipy.spatial.transform import Rotation
    from kernels.rotations import left_jacobian_inv_T_apply
    rng = np.random.default_rng(5)
    f = rng.normal(size=3)
    for angle in (0.0, 1e-9, 1e-4, 0.05, 0.0999, 0.1001, 0.5, 1.5, 3.0):
        axis = rng.normal(size=3)
        theta = axis / np.linalg.norm(axis) * angle
        R = Rotation.from_rotvec(theta)
        Jl_inv = np.zeros((3, 3))
        for k in range(3):
            eta = np.zeros(3)
            eta[k] = 1e-6
            Jl_inv[:, k] = ((Rotation.from_rotvec(eta) * R).as_rotvec()
                            - (Rotation.from_rotvec(-eta) * R).as_rotvec()) / 2e-6
        got = np.asarray(left_jacobian_inv_T_apply(jnp.asarray(theta), jnp.asarray(f)))
        np.testing.assert_allclose(got, Jl_inv.T @ f, atol=1e-8)
        got32 = left_jacobian_inv_T_apply(jnp.asarray(theta, jnp.float32), jnp.asarray(f, jnp.float32))
        assert got32.dtype == jnp.float32
        np.testing.assert_allclose(np.asarray(got32), Jl_inv.T @ f, atol=2e-6)
    # finite derivatives at theta = 0 (autodiff of the element at the design position)
    J = jax.jacfwd(lambda t: left_jacobian_inv_T_apply(t, jnp.asarray(f)))(jnp.zeros(3))
    np.testing.assert_allclose(np.asarray(J), -0.5 * np.array([[0, -f[2], f[1]], [f[2], 0, -f[0]], [-f[1], f[0], 0]]),
                               atol=1e-15)


def test_bushing_output_torque_about_marker_1():
    """bushing_output: force on body 1 and the torque about marker 1 - the torque
    of the loads on body 1 reduced to pm1 (generalised torque minus (pm1 - p1) x F)."""
    model = build_model(two_body_tables(BUSHING_LARGE))
    prm = bu_prm(model)
    x1, x2 = states(model, dx=np.array([0.02, -0.01, 0.03, 0.2, -0.1, 0.3]))
    out = np.asarray(forces.bushing_output(prm, x1, x2))
    g1, _ = forces.bushing_element(prm, x1, x2)
    R1 = np.asarray(euler_to_matrix(x1[3:6]))
    pm1 = np.asarray(x1[:3]) + R1 @ np.asarray(prm["pos1"])
    np.testing.assert_allclose(out[:3], np.asarray(g1[:3]), rtol=1e-14)
    np.testing.assert_allclose(out[3:], R1 @ np.asarray(g1[3:]) - np.cross(pm1 - np.asarray(x1[:3]), out[:3]),
                               atol=1e-10 * np.abs(out).max())


