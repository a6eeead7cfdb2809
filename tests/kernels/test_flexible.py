"""Flexible bodies in the kernels (kernels.flexible): a Craig-Bampton beam on
bushings, checked against the full FE model it was reduced from (static
compliance, eigenfrequencies), against finite differences (the assembled
Jacobians at interface nodes), against scipy's Radau (the time loop), and
against the same part made rigid (the rigid limit)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
import scipy.linalg

from kernels import loads
from kernels.dynamics import linearise, q_fn
from kernels.model import ModelError, build_model
from sweep.axle.fe import BeamFrame, FlexibleBodyError, Section, assemble, reduce
from sweep.axle.fe.model_rows import body_tables

STEEL = dict(E=2.1e11, G=8.1e10, rho=7850.0)
# an open-ish cross member: low torsion constant, as a twist beam's
CROSS = Section(A=4e-4, Iy=2.5e-7, Iz=1.2e-7, J=1.0e-8, **STEEL)
N_NODES = 13
ORIGIN = np.array([0.0, 0.0, 0.3])
K_MOUNT = [2e5, 3e5, 4e5, 2e3, 3e3, 1e3]          # N/m, N m/rad
C_MOUNT = [2e2, 2e2, 2e2, 2.0, 2.0, 2.0]
K_HUB = [1e6, 1e6, 1e6, 1e4, 1e4, 1e4]
WHEEL_MASS, WHEEL_INERTIA = 10.0, [0.5, 0.8, 0.5]


def beam_fe(section=CROSS):
    nodes = np.stack([np.zeros(N_NODES), np.linspace(-0.6, 0.6, N_NODES), np.zeros(N_NODES)], 1)
    frame = BeamFrame(nodes=nodes, elements=np.array([[i, i + 1] for i in range(N_NODES - 1)]), sections=section)
    M, K = assemble(frame)
    return nodes, M.toarray(), K.toarray()


def beam_tables(section=CROSS, n_fixed=6, flexible=True, gravity=(0.0, 0.0, -9.81), zeta=0.02):
    """The beam (flexible or its rigid twin) hung at both ends on ground
    bushings, a wheel body on each end (stiff hub bushing)."""
    nodes, M, K = beam_fe(section)
    ends = [N_NODES - 1, 0]                        # left (y > 0), right
    rb = reduce(M, K, nodes, ends, n_modes=n_fixed)
    brow, mrows, frow = body_tables(rb, name="beam", index=1, flex_index=1, origin=ORIGIN,
                                    markers=[(11, "beam_left"), (12, "beam_right")], damping_ratio=zeta)
    wc = [ORIGIN + nodes[e] for e in ends]
    tables = {
        "name": "flexible_beam", "gravity": list(gravity),
        "bodies": [brow] + [{"index": 2 + s, "name": f"wheel_{side}", "mass": WHEEL_MASS,
                             "inertia": np.diag(WHEEL_INERTIA).tolist(), "position": wc[s].tolist()}
                            for s, side in enumerate(("left", "right"))],
        "markers": mrows
        + [{"index": 21 + s, "name": f"hub_{side}", "body": 2 + s, "position": wc[s].tolist()} for s, side in
           enumerate(("left", "right"))]
        + [{"index": 31 + s, "name": f"mount_{side}", "body": 0, "position": wc[s].tolist()} for s, side in
           enumerate(("left", "right"))],
        "bushings": [{"index": 1 + s, "name": f"hub_{side}", "marker_1": 11 + s, "marker_2": 21 + s,
                      "stiffness": K_HUB, "damping": C_MOUNT} for s, side in enumerate(("left", "right"))]
        + [{"index": 3 + s, "name": f"mount_{side}", "marker_1": 11 + s, "marker_2": 31 + s,
            "stiffness": K_MOUNT, "damping": C_MOUNT} for s, side in enumerate(("left", "right"))],
        "wheels": {"left": 2, "right": 3},
    }
    if flexible:
        tables["flexible_bodies"] = [frow]
    return tables, rb, (nodes, M, K, ends)


def full_fe_system(M, K, ends):
    """The oracle: the full FE beam, the two wheel bodies, the hub and mount
    bushings as linear springs (markers at the nodes, vehicle axes), in the
    DOF (FE nodes..., wheel left (6), wheel right (6)); small rotations."""
    N = K.shape[0]
    Kt = np.zeros((N + 12, N + 12))
    Mt = np.zeros((N + 12, N + 12))
    Kt[:N, :N], Mt[:N, :N] = K, M
    for s, node in enumerate(ends):
        nd, wd = 6 * node + np.arange(6), N + 6 * s + np.arange(6)
        Kh = np.diag(K_HUB)
        Kt[np.ix_(nd, nd)] += Kh + np.diag(K_MOUNT)
        Kt[np.ix_(wd, wd)] += Kh
        Kt[np.ix_(nd, wd)] -= Kh
        Kt[np.ix_(wd, nd)] -= Kh
        Mt[np.ix_(wd, wd)] = np.diag([WHEEL_MASS] * 3 + WHEEL_INERTIA)
    return Mt, Kt


def _stiffness(model, r=None):
    """dQ/dr of the kernels' model at rest (6 m, 6 m) [N/m ...] (G_r = M J_r)."""
    m = model.topology.n_bodies
    r = model.r_design if r is None else r
    lin = jax.jit(linearise)(model, r, jnp.zeros((m, 6)), jnp.zeros((2, 6)))
    Md = np.zeros((6 * m, 6 * m))
    for i in range(m):
        Md[6 * i:6 * i + 3, 6 * i:6 * i + 3] = np.eye(3) * float(model.mass[i])
        Md[6 * i + 3:6 * i + 6, 6 * i + 3:6 * i + 6] = np.asarray(model.inertia[i])
    return -Md @ np.asarray(lin.J_r), Md, lin


@pytest.fixture(scope="module")
def beam():
    tables, rb, fe = beam_tables(gravity=(0.0, 0.0, 0.0))
    return build_model(tables), rb, fe


def test_layout_modal_slots_after_the_rigid_bodies(beam):
    model, rb, _ = beam
    topo = model.topology
    assert rb.n_modes == 12
    assert topo.body_names == ("beam", "wheel_left", "wheel_right", "beam.modes_0", "beam.modes_1")
    assert topo.modal_slots.tolist() == [3, 4]
    np.testing.assert_array_equal(np.asarray(model.mass[3:]), 1.0)
    np.testing.assert_allclose(np.asarray(model.flex["k"]).reshape(-1), (2 * np.pi * rb.frequencies_hz) ** 2)


def _wheel_compliance(model):
    """12 x 12 compliance of the wheel-centre translations and small rotations
    (vehicle axes) under wheel-centre forces and moments, from dQ/dr."""
    Kk, _, lin = _stiffness(model)
    m = model.topology.n_bodies
    ws = np.asarray(model.topology.wheel_slots)
    rows = np.concatenate([6 * w + np.arange(6) for w in ws])
    F = np.zeros((6 * m, 12))
    F[rows, np.arange(12)] = 1.0                   # body-frame moments = vehicle frame at design
    C = np.linalg.solve(Kk, F)[rows]               # translations, Euler-angle increments
    T = scipy.linalg.block_diag(*[scipy.linalg.block_diag(np.eye(3), np.linalg.inv(np.asarray(lin.K[w][3:, 3:])))
                                  for w in ws])
    return T @ C


def test_wheel_centre_compliance_equals_the_full_fe_model(beam):
    """Constraint modes make every interface load case exact: the 12 x 12
    compliance of the wheel centres (forces and moments) equals the full FE
    model's to round-off (static condensation)."""
    model, _, (nodes, M, K, ends) = beam
    C_kernels = _wheel_compliance(model)
    _, Kt = full_fe_system(M, K, ends)
    N = K.shape[0]
    Fo = np.zeros((N + 12, 12))
    Fo[N + np.arange(12), np.arange(12)] = 1.0
    C_fe = np.linalg.solve(Kt, Fo)[N:]
    np.testing.assert_allclose(C_kernels, C_fe, rtol=1e-9, atol=1e-9 * np.abs(C_fe).max())
    # and the beam matters: the same FE beam made 1e6 times stiffer gives
    # another compliance (so the match above is not the bushings' alone)
    _, K_stiff = full_fe_system(M, 1e6 * K, ends)
    C_stiff = np.linalg.solve(K_stiff, Fo)[N:]
    assert np.abs(C_stiff - C_fe).max() > 0.2 * np.abs(C_fe).max()


def test_jacobians_at_interface_nodes_match_finite_differences(beam):
    """The block-assembled J_r, J_v (frame and modal slots, elements at
    interface nodes through the virtual rigid state) against central
    differences of q at a deformed, moving state."""
    model, _, _ = beam
    m = model.topology.n_bodies
    rng = np.random.default_rng(3)
    r = np.asarray(model.r_design) + np.hstack([rng.normal(0, 2e-3, (m, 3)), rng.normal(0, 1e-2, (m, 3))])
    v = np.hstack([rng.normal(0, 0.05, (m, 3)), rng.normal(0, 0.5, (m, 3))])
    u = jnp.asarray(rng.normal(0, 100.0, (2, 6)))
    lin = jax.jit(linearise)(model, jnp.asarray(r), jnp.asarray(v), u)
    f = jax.jit(lambda rr, vv: q_fn(model, rr.reshape(m, 6), vv.reshape(m, 6), u).reshape(-1))
    eps = 1e-6
    for which, J in (("r", lin.J_r), ("v", lin.J_v)):
        fd = np.zeros((6 * m, 6 * m))
        for j in range(6 * m):
            d = np.zeros(6 * m)
            d[j] = eps
            if which == "r":
                fd[:, j] = (f(r.reshape(-1) + d, v.reshape(-1)) - f(r.reshape(-1) - d, v.reshape(-1))) / (2 * eps)
            else:
                fd[:, j] = (f(r.reshape(-1), v.reshape(-1) + d) - f(r.reshape(-1), v.reshape(-1) - d)) / (2 * eps)
        np.testing.assert_allclose(np.asarray(J), fd, rtol=1e-5, atol=1e-6 * np.abs(fd).max(), err_msg=which)
    np.testing.assert_allclose(np.asarray(lin.q), np.asarray(f(r.reshape(-1), v.reshape(-1))), rtol=1e-13, atol=1e-9)


def test_batched_interface_jacobians_equal_the_single_ones():
    """The twist beam's interface-element Jacobians vmapped over variants (the
    job's chunk runner) equal the single variant's: XLA's CPU compiler once
    fused the chain rule of kernels.flexible.interface_element wrongly under
    vmap (dG off by ~1e9; its fusion barrier), and every twist-beam
    equilibrium in a job failed while the same solve unbatched converged."""
    from kernels import flexible
    from kernels.dynamics import states_with_ground
    from sweep.axle.builder import model_from_config
    from tests.jobs import cfg_of
    model = model_from_config(cfg_of("model=twist_beam").model)
    topo = model.topology

    def jacobians(r):
        x = states_with_ground(r, jnp.zeros_like(r))
        return [dG for g in topo.element_groups for _, dG, _ in flexible.group_jacobians(model, g, x)]
    single = jax.jit(jacobians)(model.r_design)
    batched = jax.jit(jax.vmap(jacobians))(model.r_design[None])
    assert single
    for a, b in zip(single, batched):
        a = np.asarray(a)
        np.testing.assert_allclose(np.asarray(b)[0], a, rtol=1e-9, atol=1e-9 * np.abs(a).max())


def test_bad_flexible_body_rows_name_field_and_value():
    tables, _, _ = beam_tables()
    bad = [("frequencies", lambda fb: fb.update(frequencies=fb["frequencies"][:5]), "positive multiple of 6"),
           ("frequencies", lambda fb: fb["frequencies"].__setitem__(0, -1.0), "every frequency must be > 0"),
           ("damping_ratio", lambda fb: fb.update(damping_ratio=[0.1, 0.2]), "damping_ratio"),
           ("interfaces", lambda fb: fb["interfaces"][0].update(marker=21), "is not a marker on body 1"),
           ("translation", lambda fb: fb["interfaces"][0].update(translation=[[0.0] * 12] * 2), "shape (2, 12)"),
           ("interfaces", lambda fb: fb["interfaces"].pop(), "is not one of flexible_bodies[0] 'beam'.interfaces"),
           ("body", lambda fb: fb.update(body=2), "wheel body")]
    import copy
    for field, edit, message in bad:
        t = copy.deepcopy(tables)
        edit(t["flexible_bodies"][0])
        with pytest.raises(ModelError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
            build_model(t)


def test_mode_count_must_fill_whole_slots():
    nodes, M, K = beam_fe()
    rb = reduce(M, K, nodes, [0, N_NODES - 1], n_modes=4)
    with pytest.raises(FlexibleBodyError, match="by 2"):
        body_tables(rb, name="beam", index=1, flex_index=1, origin=ORIGIN, markers=[(11, "a"), (12, "b")])


