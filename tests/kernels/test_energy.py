"""Energy conservation and dissipation of the double-wishbone axle.

Oracle: the mechanical energy written out in this file, independently of the
force code in kernels.forces -

- kinetic energy  T = sum 0.5 m |v|^2 + 0.5 w^T I w  (w in the body frame);
- gravity         -sum m g . p;
- dead wheel-centre forces (constant u): -sum F . p_wheel;
- bushings        V = sum_i k_scale_i (0.5 k_i e_i^2 + int_0^e_i curve_i) + preload_i e_i,
                  e = (d, theta) - offset, d = Rm1^T (pm2 - pm1),
                  theta = scipy Rotation.from_matrix(Rm1^T Rm2).as_rotvec();
- P2P elements    V = int_0^s push(sigma) d sigma, s = L_ref - L (numerical
                  Gauss quadrature of the push law, with the tabulated
                  characteristics evaluated here from their table data);
- dissipation     P = sum_bushings f_d . rho + sum_P2P T_d dL/dt, from the
                  damping laws written here (bushing rates rho_t = d(d)/dt,
                  rho_r = Rm1^T (omega_2 - omega_1); P2P tension T_d with the
                  compression/rebound blend), integrated as an extra state.

The motion (released from a static equilibrium under larger loads, so that
both stops of one side engage) is integrated by scipy's DOP853 at rtol 1e-8
on the project's equations of motion (q of kernels.dynamics, eq. 1).
Undamped: E(t) = E(0); damped: E(t) + D(t) = E(0); both relative to the
largest kinetic energy of the run.
Also: the linearisation of the undamped axle at its static equilibrium has
no unstable eigenvalue, and its wheel-centre compliance matrix (dead loads)
is symmetric - both properties of a conservative elastic law
(method.md section 1; kernels.forces.bushing_element).
"""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.spatial.transform import Rotation

import kernels  # noqa: F401  (float64)
from kernels.rotations import euler_to_matrix

pytestmark = pytest.mark.slow

FZ = 5000.0                  # N, constant upward wheel-centre force per side
GAUSS_X, GAUSS_W = np.polynomial.legendre.leggauss(4)   # exact for the cubic pieces
TOL_DRIFT = 1e-6             # |E(t) - E(0)| / max T: undamped
TOL_BALANCE = 1e-6           # |E(t) + D(t) - E(0)| / max T: damped


# ----------------------------------------------------------------------------- laws, written here

def table_value(tab, x):
    """Value of a padded cubic Hermite table (breaks, origin, coef) at x (numpy)."""
    j = int(np.sum(x >= tab["breaks"]))
    t = x - tab["origin"][j]
    c = tab["coef"][j]
    return c[0] + t * (c[1] + t * (c[2] + t * c[3]))


def quad(fn, breaks, a, b):
    """int_a^b fn by Gauss-Legendre on every piece between the table's breaks."""
    sign = 1.0
    if b < a:
        a, b, sign = b, a, -1.0
    cuts = [x for x in breaks if a < x < b and abs(x) < 1e20]
    pts = [a] + sorted(cuts) + [b]
    total = 0.0
    for lo, hi in zip(pts[:-1], pts[1:]):
        mid, half = 0.5 * (lo + hi), 0.5 * (hi - lo)
        total += half * sum(w * fn(mid + half * x) for x, w in zip(GAUSS_X, GAUSS_W))
    return sign * total


def np_model(model):
    """The model's numeric fields as numpy arrays (attribute access)."""
    import types
    fields = {f.name: getattr(model, f.name) for f in dataclasses.fields(model) if f.name != "topology"}
    return types.SimpleNamespace(**{k: jax.tree_util.tree_map(np.asarray, v) for k, v in fields.items()})


def body_frames(r):
    """Positions (m, 3) and rotation matrices (m, 3, 3) with the ground appended."""
    r = np.asarray(r)
    R = Rotation.from_euler("ZYX", r[:, 3:]).as_matrix()            # intrinsic z-y'-x''
    P = np.vstack([r[:, :3], np.zeros(3)])
    return P, np.concatenate([R, np.eye(3)[None]], 0)


def kinetic_energy(model, v):
    v = np.asarray(v)
    m, inertia = np.asarray(model.mass), np.asarray(model.inertia)
    w = v[:, 3:]
    return float(0.5 * np.sum(m * np.sum(v[:, :3] ** 2, 1)) + 0.5 * np.einsum("bi,bij,bj->", w, inertia, w))


def potential_energy(model, r, u, parts=None):
    """Gravity + dead wheel loads + bushing and P2P potentials [J]; ``parts``
    (a dict) receives the potential of every P2P element by name."""
    md = np_model(model)
    bu, pp = md.elements["bushing"], md.elements["p2p"]
    topo = model.topology
    P, R = body_frames(r)
    V = -float(np.sum(md.mass[:, None] * md.gravity[None, :] * np.asarray(r)[:, :3]))
    for s, slot in enumerate(topo.wheel_slots):
        V -= float(np.dot(u[s, :3], P[slot]))
    # bushings
    for i, (b1, b2) in enumerate(np.asarray(topo.bushing_bodies)):
        pm1 = P[b1] + R[b1] @ bu["pos1"][i]
        pm2 = P[b2] + R[b2] @ bu["pos2"][i]
        Rm1, Rm2 = R[b1] @ bu["rot1"][i], R[b2] @ bu["rot2"][i]
        defl = np.concatenate([Rm1.T @ (pm2 - pm1), Rotation.from_matrix(Rm1.T @ Rm2).as_rotvec()])
        e = defl - bu["offset"][i]
        for j in range(6):
            tab = {k: bu["kc"][k][i, j] for k in ("breaks", "origin", "coef")}
            curve = quad(lambda x: table_value(tab, x), tab["breaks"], 0.0, e[j]) if np.any(tab["coef"]) else 0.0
            V += bu["k_scale"][i, j] * (0.5 * bu["k"][i, j] * e[j] ** 2 + curve) + bu["preload"][i, j] * e[j]
    # P2P: push(s) = push0 + k_scale (elastic(s) - push0), elastic = preload + k s + curve(s)
    for i, (b1, b2) in enumerate(np.asarray(topo.p2p_bodies)):
        pm1 = P[b1] + R[b1] @ pp["pos1"][i]
        pm2 = P[b2] + R[b2] @ pp["pos2"][i]
        s = pp["length"][i] - np.linalg.norm(pm2 - pm1)
        tab = {k: pp["kc"][k][i] for k in ("breaks", "origin", "coef")}

        def elastic(x, i=i, tab=tab):
            return pp["preload"][i] + pp["k"][i] * x + table_value(tab, x)
        push0 = elastic(0.0)
        Vi = quad(lambda x: push0 + pp["k_scale"][i] * (elastic(x) - push0), tab["breaks"], 0.0, s)
        V += Vi
        if parts is not None:
            parts[topo.p2p_names[i]] = Vi
    return V


def _jtable(tab, x):
    j = jnp.sum(x >= tab["breaks"])
    t = x - tab["origin"][j]
    c = tab["coef"][j]
    return c[0] + t * (c[1] + t * (c[2] + t * c[3]))


def dissipation_power(model, r, v):
    """Power dissipated by bushing and P2P damping [W] at state (r, v), jnp (jit-able)."""
    topo = model.topology
    Rb = euler_to_matrix(r[:, 3:])
    R = jnp.concatenate([Rb, jnp.eye(3, dtype=r.dtype)[None]], 0)
    P = jnp.concatenate([r[:, :3], jnp.zeros((1, 3), r.dtype)], 0)
    V = jnp.concatenate([v[:, :3], jnp.zeros((1, 3), r.dtype)], 0)
    W = jnp.concatenate([jnp.einsum("bij,bj->bi", Rb, v[:, 3:]), jnp.zeros((1, 3), r.dtype)], 0)  # vehicle frame

    def point(b, s):
        x = P[b] + jnp.einsum("bij,bj->bi", R[b], s)
        return x, V[b] + jnp.cross(W[b], x - P[b])
    bb = np.asarray(topo.bushing_bodies)
    pm1, vm1 = point(bb[:, 0], model.elements["bushing"]["pos1"])
    pm2, vm2 = point(bb[:, 1], model.elements["bushing"]["pos2"])
    Rm1 = jnp.einsum("bij,bjk->bik", R[bb[:, 0]], model.elements["bushing"]["rot1"])
    w1, w2 = W[bb[:, 0]], W[bb[:, 1]]
    rho_t = jnp.einsum("bji,bj->bi", Rm1, vm2 - vm1 - jnp.cross(w1, pm2 - pm1))
    rho_r = jnp.einsum("bji,bj->bi", Rm1, w2 - w1)
    rho = jnp.concatenate([rho_t, rho_r], 1)
    cc = model.elements["bushing"]["cc"]
    curve = jax.vmap(jax.vmap(_jtable, in_axes=({"breaks": 0, "origin": 0, "coef": 0}, 0)),
                     in_axes=({"breaks": 0, "origin": 0, "coef": 0}, 0))(cc, rho)
    fd = model.elements["bushing"]["c_scale"] * (model.elements["bushing"]["c"] * rho + curve)
    power = jnp.sum(fd * rho)
    pb = np.asarray(topo.p2p_bodies)
    if len(pb):
        q1, u1 = point(pb[:, 0], model.elements["p2p"]["pos1"])
        q2, u2 = point(pb[:, 1], model.elements["p2p"]["pos2"])
        L = jnp.linalg.norm(q2 - q1, axis=1)
        Ldot = jnp.sum((q2 - q1) * (u2 - u1), 1) / L
        damp = model.elements["p2p"]["c"] * Ldot + jax.vmap(_jtable)(model.elements["p2p"]["cc"], Ldot)
        wgt = 0.5 * (1.0 + jnp.tanh(Ldot / 1e-3))        # blend width 1 mm/s (tests/kernels/test_p2p_analytic.py)
        cs = model.elements["p2p"]["c_scale"]
        power = power + jnp.sum(damp * (cs[:, 0] + (cs[:, 1] - cs[:, 0]) * wgt) * Ldot)
    return power


# ----------------------------------------------------------------------------- fixtures

def _undamped(model):
    return model.replace_elements(bushing={"c_scale": jnp.zeros_like(model.elements["bushing"]["c_scale"])},
                                  p2p={"c_scale": jnp.zeros_like(model.elements["p2p"]["c_scale"])})


def _loads():
    """The constant (dead) wheel-centre loads of the runs [N]: Fz = 5 kN per side."""
    u = np.zeros((2, 6))
    u[:, 2] = FZ
    return u


def _preloads():
    """Loads of the starting equilibrium: left wheel pushed up onto its bump stop
    (16 kN) and pulled forward, right wheel nearly unloaded and pushed back.
    Released under :func:`_loads` the left wheel swings down into its rebound
    stop: springs, both stops, every bushing and gravity exchange energy."""
    u = np.zeros((2, 6))
    u[0, :3] = [500.0, 0.0, 16000.0]
    u[1, :3] = [-300.0, 0.0, 300.0]
    return u


def _start(model):
    from kernels.statics import equilibrium
    eq = equilibrium(model, jnp.asarray(_preloads()))
    assert bool(eq.converged)
    return np.asarray(eq.r)


@pytest.fixture(scope="module")
def undamped(dw_model):
    from kernels.statics import equilibrium
    model = _undamped(dw_model)
    eq = equilibrium(model, jnp.asarray(_loads()))
    assert bool(eq.converged)
    return model, np.asarray(eq.r), _start(model)


@pytest.fixture(scope="module")
def damped(dw_model):
    return dw_model, _start(dw_model)


_RHS = {}


def rhs_function(model, u):
    """Compiled y -> dy/dt for y = (r, v, D): dr/dt = K(r) v, dv/dt = q(r, v, u)
    of kernels.dynamics (eq. 1), dD/dt = the dissipated power of
    :func:`dissipation_power`; one compilation per model object and loads."""
    from kernels.dynamics import q_fn
    from kernels.rotations import coordinate_rates
    key = (id(model), np.asarray(u).tobytes())
    if key not in _RHS:
        m = model.topology.n_bodies
        n = 6 * m
        uu = jnp.asarray(u)

        @jax.jit
        def f(y):
            r, v = y[:n].reshape(m, 6), y[n:2 * n].reshape(m, 6)
            return jnp.concatenate([coordinate_rates(r, v).reshape(-1), q_fn(model, r, v, uu).reshape(-1),
                                    dissipation_power(model, r, v)[None]])
        _RHS[key] = (model, f)          # keeps the model alive, so its id stays unique
    return _RHS[key][1]


def jacobian_function(model, u):
    """(r, v) -> [[d(K v)/dr, K], [J_r, J_v]] (kernels.radau, the kernels' linearisation)."""
    from kernels import loads
    from kernels.radau import make_rhs
    jac = make_rhs(model, loads.excitation(u, []))[1]
    return lambda y: np.asarray(jac(0.0, jnp.asarray(y)))


def integrate(model, r0, u, t_end, n_out, method="DOP853", rtol=1e-8):
    """scipy's solve_ivp on y = (r, v, D) of :func:`rhs_function` from rest at r0.
    DOP853 (explicit, order 8; its step is held by the stiffest undamped mode,
    ~70 us) for the undamped axle; Radau (with the Jacobian of
    kernels.radau, a zero row for D) for the damped one, whose damped stiff
    modes would hold an explicit step far shorter. Returns t, r, v, D at
    n_out samples."""
    m = model.topology.n_bodies
    n = 6 * m
    f = rhs_function(model, u)
    kw = {}
    if method == "Radau":
        jac = jacobian_function(model, u)

        def jn(t_, y):
            J = np.zeros((2 * n + 1, 2 * n + 1))
            J[:-1, :-1] = jac(y[:-1])
            return J
        kw["jac"] = jn
    y0 = np.concatenate([np.asarray(r0).ravel(), np.zeros(n), [0.0]])
    atol = np.concatenate([np.full(n, 1e-2 * rtol), np.full(n, rtol), [1e-2 * rtol]])
    t = np.linspace(0.0, t_end, n_out)
    with np.errstate(over="ignore", invalid="ignore"):   # rejected trial steps of the explicit method
        sol = solve_ivp(lambda t_, y: np.asarray(f(jnp.asarray(y))), (0.0, t_end), y0, method=method,
                        t_eval=t, rtol=rtol, atol=atol, **kw)
    assert sol.success, sol.message
    y = sol.y.T
    return t, y[:, :n].reshape(-1, m, 6), y[:, n:2 * n].reshape(-1, m, 6), y[:, -1]


def mass_matrix(model):
    """Block-diagonal diag(m I, I_body) per body (n, n)."""
    m = model.topology.n_bodies
    M = np.zeros((6 * m, 6 * m))
    for b in range(m):
        M[6 * b:6 * b + 3, 6 * b:6 * b + 3] = np.eye(3) * float(model.mass[b])
        M[6 * b + 3:6 * b + 6, 6 * b + 3:6 * b + 6] = np.asarray(model.inertia[b])
    return M


# ----------------------------------------------------------------------------- tests

def test_energy_oracle_forces_are_its_gradient(undamped):
    """The potential written here is the one the project's forces derive from:
    power of all generalised forces = -dV/dt along a random motion (central
    differences of V), at a state with the left bump stop engaged. Guards the
    oracle itself (and the force law)."""
    from kernels.rotations import coordinate_rates
    model, _, r0 = undamped
    rng = np.random.default_rng(3)
    r = r0 + np.hstack([rng.normal(0, 1e-3, (len(r0), 3)), rng.normal(0, 0.01, (len(r0), 3))])
    v = np.hstack([rng.normal(0, 0.1, (len(r0), 3)), rng.normal(0, 1.0, (len(r0), 3))])
    u = _loads()
    parts = {}
    potential_energy(model, r, u, parts)
    assert parts["bump_stop_left"] > 0.0
    # generalised forces at rest (the undamped model): Q = M q(r, 0, u)
    n = r.size
    qdot = np.asarray(rhs_function(model, u)(jnp.asarray(np.concatenate([r.ravel(), np.zeros(n), [0.0]]))))
    Q = (mass_matrix(model) @ qdot[n:2 * n]).reshape(r.shape)
    power = float(np.sum(Q * v))
    rdot = np.asarray(coordinate_rates(jnp.asarray(r), jnp.asarray(v)))
    h = 1e-6
    dVdt = (potential_energy(model, r + h * rdot, u) - potential_energy(model, r - h * rdot, u)) / (2 * h)
    scale = np.sum(np.abs(Q * v))
    print(f"power of the forces {power:.6e} W, -dV/dt {-dVdt:.6e} W")
    assert abs(power + dVdt) <= 1e-6 * scale, (power, -dVdt)


def _run(model, r0, t_end, n_out, method="DOP853"):
    u = _loads()
    t, r, v, D = integrate(model, r0, u, t_end, n_out, method)
    parts = [{} for _ in t]
    E = np.array([kinetic_energy(model, v[k]) + potential_energy(model, r[k], u, parts[k]) for k in range(len(t))])
    T = np.array([kinetic_energy(model, v[k]) for k in range(len(t))])
    for name in ("bump_stop_left", "rebound_stop_left"):       # both stops take part
        assert max(p[name] for p in parts) > 1.0, name        # J
    return t, E, D, T.max()


def test_undamped_axle_conserves_energy_short(undamped):
    model, _, r0 = undamped
    t, E, D, Tmax = _run(model, r0, 0.1, 21)
    drift = np.abs(E - E[0]).max() / Tmax
    print(f"undamped 0.1 s: largest kinetic energy {Tmax:.2f} J, max |E - E0| / T_max = {drift:.2e}")
    assert np.all(D == 0.0)
    assert drift < TOL_DRIFT


def test_damped_axle_energy_balance(damped):
    """E(t) - E(0) = -(energy dissipated by the damping laws written here)."""
    model, r0 = damped
    t, E, D, Tmax = _run(model, r0, 0.1, 21, "Radau")
    balance = np.abs(E + D - E[0]).max() / Tmax
    print(f"damped 0.1 s: dissipated {D[-1]:.3f} J (largest kinetic energy {Tmax:.2f} J); "
          f"max |E + D - E0| / T_max = {balance:.2e}")
    assert D[-1] > 0.05 * Tmax and np.all(np.diff(D) >= -1e-9)   # real damping, never negative
    assert balance < TOL_BALANCE


@pytest.fixture(scope="module")
def undamped_linearisation(undamped):
    """State matrix [[0, K], [J_r, J_v]] at rest at the equilibrium (d(K v)/dr = 0 at v = 0)."""
    model, r_eq, _ = undamped
    A = jacobian_function(model, _loads())(np.concatenate([r_eq.ravel(), np.zeros(r_eq.size)]))
    return model, r_eq, A


def test_undamped_linearisation_has_no_unstable_eigenvalue(undamped_linearisation):
    model, r_eq, A = undamped_linearisation
    n = r_eq.size
    lam = np.linalg.eigvals(A)
    scale = np.abs(lam).max()
    print(f"undamped: max Re(lambda) = {lam.real.max():.2e} 1/s, max |lambda| = {scale:.2e} 1/s")
    assert np.all(A[:n, :n] == 0.0) and np.all(A[n:, n:] == 0.0)     # at rest; really undamped (J_v = 0)
    assert lam.real.max() <= 1e-9 * scale


def test_wheel_centre_compliance_is_symmetric(undamped_linearisation):
    """Dead loads at the equilibrium: C = Y (-dQ/dr)^-1 Y_u with Y the wheel-centre
    position and small vehicle-frame rotation per coordinate and Y_u the
    generalised forces of unit wheel-centre forces/torques: symmetric (Maxwell-
    Betti) for a conservative system; also the stiffness in Euler coordinates."""
    model, r_eq, A = undamped_linearisation
    m = model.topology.n_bodies
    n = 6 * m
    J_r = A[n:, :n]
    M = mass_matrix(model)
    B = np.zeros((n, n))          # d(translation, small body rotation)/d(coordinates)
    Y = np.zeros((12, n))
    Yu = np.zeros((n, 12))
    R = Rotation.from_euler("ZYX", r_eq[:, 3:]).as_matrix()
    for b in range(m):
        sl = slice(6 * b, 6 * b + 6)
        # body-frame rotation increment per Euler-angle increment, by differences of R
        E = np.zeros((3, 3))
        for k in range(3):
            da = np.zeros(3)
            da[k] = 1e-7
            Rp = Rotation.from_euler("ZYX", r_eq[b, 3:] + da).as_matrix()
            Rm = Rotation.from_euler("ZYX", r_eq[b, 3:] - da).as_matrix()
            S = R[b].T @ (Rp - Rm) / 2e-7
            E[:, k] = [S[2, 1], S[0, 2], S[1, 0]]
        B[sl, sl] = np.block([[np.eye(3), np.zeros((3, 3))], [np.zeros((3, 3)), E]])
    for s, w in enumerate(np.asarray(model.topology.wheel_slots)):
        sl = slice(6 * w, 6 * w + 6)
        Y[6 * s:6 * s + 6, sl] = np.block([[np.eye(3), np.zeros((3, 3))], [np.zeros((3, 3)), R[w] @ B[sl, sl][3:, 3:]]])
        Yu[sl, 6 * s:6 * s + 6] = np.block([[np.eye(3), np.zeros((3, 3))], [np.zeros((3, 3)), R[w].T]])
    G_r = M @ J_r                   # dQ/dr (forces F, body-frame torques)
    Kq = -B.T @ G_r                                 # stiffness in the coordinates (Q = 0 at equilibrium)
    asym_K = np.abs(Kq - Kq.T).max() / np.abs(Kq).max()
    C = Y @ np.linalg.solve(-G_r, Yu)
    asym_C = max(np.abs(C[a:a + 6, a:a + 6] - C[a:a + 6, a:a + 6].T).max() / np.abs(C[a:a + 6, a:a + 6]).max()
                 for a in (0, 6))
    print(f"stiffness asymmetry {asym_K:.2e}, wheel-centre compliance asymmetry {asym_C:.2e}")
    assert asym_K < 1e-10
    assert asym_C < 1e-8
    assert np.abs(C - C.T).max() / np.abs(C).max() < 1e-8
