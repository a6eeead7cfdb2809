"""Flexible-body preprocessing (sweep/axle/fe): beam-frame elements, FE
import, Craig-Bampton reduction to a floating-frame modal body, its cache.

Every check has an oracle of its own: analytic beam theory for the elements,
the full FE model (dense LAPACK solves and eigenproblems) for the reduction,
hand sums over the elements for mass and inertia, finite differences of the
deformed inertia for the first-order invariants.
"""
import numpy as np
import pytest
import scipy.io
import scipy.linalg
import scipy.sparse as sp

from sweep.axle.fe import (BeamFrame, FlexibleBodyError, Section, assemble, craig_bampton, load_matrix_market,
                            load_npz, modal_damping, reduce, reduce_cached)

STEEL = dict(E=2.1e11, G=8.1e10, rho=7850.0)
ARM = Section(A=6e-4, Iy=3.0e-7, Iz=5.0e-7, J=2.0e-7, **STEEL)
CROSS = Section(A=4e-4, Iy=2.5e-7, Iz=1.2e-7, J=1.0e-8, **STEEL)
F_CUTOFF = 2000.0      # Hz


def _skew(v):
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


def _rigid_map(p):
    """6x6: the DOF of a node at p for a unit translation / small rotation of the reference frame."""
    X = np.eye(6)
    X[:3, 3:] = -_skew(p)                               # omega x p
    return X


def _rigid_modes(nodes):
    return np.vstack([_rigid_map(p) for p in nodes])


def _local_axes(a, b, up):
    x = (b - a) / np.linalg.norm(b - a)
    y = up - (up @ x) * x
    y /= np.linalg.norm(y)
    return np.array([x, y, np.cross(x, y)])


def _dofs(nodes):
    return (6 * np.asarray(nodes)[:, None] + np.arange(6)).ravel()


def _eig_hz(K, M, keep):
    """Natural frequencies (Hz) of the full model restricted to the DOF ``keep``."""
    K, M = (A.toarray() if sp.issparse(A) else A for A in (K, M))
    w2 = scipy.linalg.eigh(K[np.ix_(keep, keep)], M[np.ix_(keep, keep)], eigvals_only=True)
    return np.sqrt(np.abs(w2)) / (2 * np.pi)


def _twist_beam_frame(per_segment=6):
    """A twist-beam-axle-like frame: two trailing arms (pivot -> cross-beam joint
    -> wheel) joined by a cross beam, slightly asymmetric, two sections.
    Returns the frame and its interface nodes (pivots and wheel centres)."""
    hard = {"PL": (0.0, 0.62, 0.0), "CL": (-0.18, 0.60, 0.01), "WL": (-0.45, 0.70, 0.03),
            "PR": (0.0, -0.62, 0.0), "CR": (-0.18, -0.60, 0.01), "WR": (-0.46, -0.70, 0.035)}
    names = list(hard)
    nodes, elements, sections = [np.array(hard[k]) for k in names], [], []
    for a, b, section in (("PL", "CL", ARM), ("CL", "WL", ARM), ("CL", "CR", CROSS), ("PR", "CR", ARM),
                          ("CR", "WR", ARM)):
        prev = names.index(a)
        for i in range(1, per_segment + 1):
            if i < per_segment:
                nodes.append(np.array(hard[a]) + (np.array(hard[b]) - np.array(hard[a])) * i / per_segment)
            nxt = names.index(b) if i == per_segment else len(nodes) - 1
            elements.append((prev, nxt))
            sections.append(section)
            prev = nxt
    frame = BeamFrame(np.array(nodes), np.array(elements), tuple(sections), orientation=(0.0, 0.0, 1.0))
    return frame, [names.index(k) for k in ("PL", "PR", "WL", "WR")]


@pytest.fixture(scope="module")
def axle():
    frame, iface = _twist_beam_frame()
    M, K = assemble(frame)
    body = reduce(M, K, frame.nodes, iface, f_cutoff_hz=F_CUTOFF)
    return frame, iface, M, K, body


# ---- beam elements ---------------------------------------------------------------------------

@pytest.mark.parametrize("timoshenko", [False, True])
def test_cantilever_tip_flexibility_matches_beam_theory(timoshenko):
    """Oblique cantilever of 3 elements, clamped at node 0: the tip flexibility
    (6x6, local axes) under tip forces, moments and torque equals the analytic
    one exactly (cubic / interdependent interpolation): P L^3 / 3EI (+ P L / G A_s
    for Timoshenko), P L^2 / 2EI, M L / EI, T L / GJ, P L / EA."""
    s = Section(E=7.0e10, G=2.6e10, A=3e-4, Iy=2e-8, Iz=5e-8, J=3e-8, rho=2700.0, Ay=2.2e-4, Az=1.9e-4)
    tip, up = np.array([0.4, 0.8, -0.2]), np.array([0.3, -0.2, 1.0])
    L = np.linalg.norm(tip)
    nodes = np.outer(np.linspace(0, 1, 4), tip)
    frame = BeamFrame(nodes, [[0, 1], [1, 2], [2, 3]], s, orientation=up, timoshenko=timoshenko)
    _, K = assemble(frame)
    free = np.arange(6, 24)
    flex = np.linalg.inv(K.toarray()[np.ix_(free, free)])[-6:, -6:]
    Q = np.kron(np.eye(2), _local_axes(nodes[0], tip, up))
    flex_local = Q @ flex @ Q.T
    EIy, EIz = s.E * s.Iy, s.E * s.Iz
    shear_y, shear_z = (L / (s.G * s.Ay), L / (s.G * s.Az)) if timoshenko else (0.0, 0.0)
    exact = np.zeros((6, 6))
    exact[0, 0] = L / (s.E * s.A)
    exact[3, 3] = L / (s.G * s.J)
    exact[1, 1], exact[5, 5], exact[1, 5] = L**3 / (3 * EIz) + shear_y, L / EIz, L**2 / (2 * EIz)
    exact[2, 2], exact[4, 4], exact[2, 4] = L**3 / (3 * EIy) + shear_z, L / EIy, -L**2 / (2 * EIy)
    exact = np.triu(exact) + np.triu(exact, 1).T
    np.testing.assert_allclose(flex_local, exact, rtol=1e-10, atol=1e-10 * np.abs(exact).max())


def test_cantilever_and_free_free_bending_frequencies_match_euler_bernoulli():
    """A slender straight beam of 20 elements: the bending frequencies in both
    planes, clamped at one end and free-free, within 1e-3 of
    (beta L)^2 / (2 pi) sqrt(EI / (rho A L^4))."""
    s = Section(E=2.1e11, G=8.1e10, A=1e-4, Iy=0.6e-9, Iz=1.0e-9, J=1.2e-9, rho=7850.0)
    L, n = 2.0, 20
    frame = BeamFrame(np.outer(np.linspace(0, L, n + 1), [1.0, 0, 0]), np.c_[np.arange(n), np.arange(1, n + 1)], s)
    M, K = assemble(frame)
    cases = {"clamped": (np.arange(6, 6 * (n + 1)), [1.87510407, 4.69409113], 0),
             "free-free": (np.arange(6 * (n + 1)), [4.73004074, 7.85320462], 6)}
    for name, (keep, beta_L, rigid) in cases.items():
        f_fe = _eig_hz(K, M, keep)[rigid:]
        assert rigid == 0 or _eig_hz(K, M, keep)[:rigid].max() < 1e-3 * f_fe[0], name
        for I in (s.Iy, s.Iz):
            for bl in beta_L:
                f = bl**2 / (2 * np.pi) * np.sqrt(s.E * I / (s.rho * s.A * L**4))
                assert np.abs(f_fe / f - 1).min() < 1e-3, (name, I, bl, f_fe[:6], f)
        expected_lowest = beta_L[0]**2 / (2 * np.pi) * np.sqrt(s.E * s.Iy / (s.rho * s.A * L**4))
        assert f_fe[0] == pytest.approx(expected_lowest, rel=1e-3), name


def _hand_mass_properties(frame):
    """Mass, first moment and inertia tensor at the origin summed over the
    elements: slender rods plus the sections' rotary inertia."""
    m, first, J = 0.0, np.zeros(3), np.zeros((3, 3))
    for k, (a, b) in enumerate(frame.elements):
        s, pa, pb = frame.section(k), frame.nodes[a], frame.nodes[b]
        L, c, Q = np.linalg.norm(pb - pa), 0.5 * (pa + pb), _local_axes(pa, pb, np.array([0.0, 0.0, 1.0]))
        me, t = s.rho * s.A * L, Q[0]
        m, first = m + me, first + me * c
        J += me * ((c @ c) * np.eye(3) - np.outer(c, c)) + me * L**2 / 12 * (np.eye(3) - np.outer(t, t))
        J += s.rho * L * Q.T @ np.diag([s.Iy + s.Iz, s.Iy, s.Iz]) @ Q
    return m, first, J


def test_frame_mass_and_inertia_from_the_mass_matrix_match_hand_sums(axle):
    frame, _, M, _, _ = axle
    m, first, J = _hand_mass_properties(frame)
    R = _rigid_modes(frame.nodes)
    rigid = R.T @ (M @ R)
    np.testing.assert_allclose(rigid[:3, :3], m * np.eye(3), rtol=1e-12, atol=1e-12 * m)
    np.testing.assert_allclose(rigid[:3, 3:], -m * _skew(first / m), atol=1e-12 * m)
    np.testing.assert_allclose(rigid[3:, 3:], J, rtol=1e-12, atol=1e-12 * np.abs(J).max())


# ---- reduction ---------------------------------------------------------------------------------

def test_interface_loads_give_the_full_models_static_deflection(axle):
    """One interface node clamped, forces and moments at the others: the
    reduced body (rigid motion + elastic modes, clamp by constraint) deflects
    the interface nodes exactly as the full FE model."""
    frame, iface, M, K, body = axle
    rng = np.random.default_rng(3)
    loads = rng.normal(size=(3, 6)) * [1e3, 1e3, 1e3, 1e2, 1e2, 1e2]
    free = np.setdiff1d(np.arange(K.shape[0]), _dofs(iface[:1]))
    F = np.zeros(K.shape[0])
    F[_dofs(iface[1:])] = loads.ravel()
    Kf = K.toarray()[np.ix_(free, free)]                        # condition ~4e9: refine in long double
    u = np.zeros_like(F)
    u[free] = np.linalg.solve(Kf, F[free])
    for _ in range(2):
        residual = F[free].astype(np.longdouble) - Kf.astype(np.longdouble) @ u[free].astype(np.longdouble)
        u[free] += np.linalg.solve(Kf, residual.astype(float))

    R_b = np.vstack([_rigid_map(p) for p in body.interface_positions])
    Phi_b = np.concatenate([body.interface_translation, body.interface_rotation], axis=1).reshape(-1, body.n_modes)
    G = Phi_b - R_b @ np.linalg.solve(R_b[:6], Phi_b[:6])      # clamp node 0: z = -R_0^-1 Phi_0 q
    q = np.linalg.solve(body.modal_stiffness, G[6:].T @ loads.ravel())
    u_b = u[_dofs(iface)]
    # the reduced side is not refined: its modes come from a float64 eigen solve of a
    # stiffness of condition ~4e9, so 1e-10 is at round-off (1.4e-10 seen on one CPU);
    # a wrong mode, constraint or rigid map is an error of order one
    assert np.abs(G @ q - u_b).max() < 1e-8 * np.abs(u_b).max()


def test_reduced_frequencies_match_the_full_model(axle):
    """Free-free, one interface node clamped and all interface nodes clamped:
    the reduced body's natural frequencies within 1 % of the full model's up
    to half the cutoff (all clamped: the kept fixed-interface modes, exact)."""
    frame, iface, M, K, body = axle
    N, n = K.shape[0], body.n_modes
    Mg = body.mass_matrix()
    Kg = scipy.linalg.block_diag(np.zeros((6, 6)), body.modal_stiffness)
    R_b = np.vstack([_rigid_map(p) for p in body.interface_positions])
    Phi_b = np.concatenate([body.interface_translation, body.interface_rotation], axis=1).reshape(-1, n)
    one_clamped = np.vstack([-np.linalg.solve(R_b[:6], Phi_b[:6]), np.eye(n)])
    all_clamped = scipy.linalg.null_space(np.hstack([R_b, Phi_b]))

    full_free = _eig_hz(K, M, np.arange(N))
    assert full_free[:6].max() < 1e-3 * full_free[6]               # the 6 rigid-body modes
    cases = {"free-free": (full_free[6:], body.frequencies_hz),
             "one clamped": (_eig_hz(K, M, np.setdiff1d(np.arange(N), _dofs(iface[:1]))),
                             _eig_hz(one_clamped.T @ Kg @ one_clamped, one_clamped.T @ Mg @ one_clamped, np.arange(n))),
             "all clamped": (_eig_hz(K, M, np.setdiff1d(np.arange(N), _dofs(iface))),
                             _eig_hz(all_clamped.T @ Kg @ all_clamped, all_clamped.T @ Mg @ all_clamped,
                                     np.arange(all_clamped.shape[1])))}
    for name, (full, reduced) in cases.items():
        below = full < (F_CUTOFF if name == "all clamped" else F_CUTOFF / 2)
        assert below.sum() >= 4, name
        error = reduced[:below.sum()] / full[below] - 1
        assert np.all(error > -1e-9) and error.max() < (1e-8 if name == "all clamped" else 1e-2), (name, error)
    np.testing.assert_allclose(body.fixed_interface_frequencies_hz, cases["all clamped"][0][:len(
        body.fixed_interface_frequencies_hz)], rtol=1e-9)


def test_elastic_modes_are_mass_orthonormal_and_free_of_rigid_motion(axle):
    frame, _, M, K, body = axle
    Phi, R = body.mode_shapes, _rigid_modes(frame.nodes)
    np.testing.assert_allclose(Phi.T @ (M @ Phi), np.eye(body.n_modes), atol=1e-10)
    w2 = (2 * np.pi * body.frequencies_hz) ** 2
    np.testing.assert_allclose(Phi.T @ (K @ Phi), np.diag(w2), atol=1e-9 * w2.max())
    rigid_norm = np.sqrt(np.diag(R.T @ (M @ R)))
    cosine = (R.T @ (M @ Phi)) / rigid_norm[:, None]     # the modes have unit M-norm
    assert np.abs(cosine).max() < 1e-10
    assert np.abs(body.translational_coupling).max() < 1e-10 * np.sqrt(float(body.mass))
    assert np.abs(body.rotational_coupling).max() < 1e-10 * np.sqrt(np.abs(body.inertia).max())
    assert body.n_modes == 6 * 4 + len(body.fixed_interface_frequencies_hz) - 6


def test_inertia_invariants_match_hand_sums_and_deformed_inertia(axle):
    """m, centre of mass and inertia tensor against the element sums; the
    first-order invariants I5 and I8 against central differences of the
    rotational coupling and of the inertia tensor computed from the FE mass
    matrix at displaced node positions (exact: both are polynomial in q)."""
    frame, _, M, _, body = axle
    m, first, J = _hand_mass_properties(frame)
    assert float(body.mass) == pytest.approx(m, rel=1e-12)
    np.testing.assert_allclose(body.centre_of_mass, first / m, atol=1e-12)
    np.testing.assert_allclose(body.inertia, J, rtol=1e-12, atol=1e-12 * np.abs(J).max())
    np.testing.assert_allclose(body.mass_matrix()[:6, :6], (lambda R: R.T @ (M @ R))(_rigid_modes(frame.nodes)),
                               atol=1e-11 * np.abs(J).max())

    def rotation_modes(q):
        moved = frame.nodes + (body.mode_shapes @ q).reshape(-1, 6)[:, :3]
        return _rigid_modes(moved)[:, 3:]

    h = 1e-2
    for j in (0, 3, body.n_modes - 1):
        dq = np.zeros(body.n_modes)
        dq[j] = h
        Rp, Rm = rotation_modes(dq), rotation_modes(-dq)
        dJ = (Rp.T @ (M @ Rp) - Rm.T @ (M @ Rm)) / (2 * h)
        np.testing.assert_allclose(body.inertia_gradient[j] + body.inertia_gradient[j].T, dJ,
                                   atol=1e-9 * np.abs(dJ).max())
        dCr = (Rp - Rm).T @ (M @ body.mode_shapes) / (2 * h)
        np.testing.assert_allclose(body.rotational_coupling_gradient[j], dCr, atol=1e-9 * np.abs(dCr).max())


def test_modal_damping_gives_the_requested_damping_ratios(axle):
    body = axle[-1]
    zeta = np.linspace(0.01, 0.05, body.n_modes)
    D = modal_damping(body, zeta)
    n = body.n_modes
    A = np.block([[np.zeros((n, n)), np.eye(n)], [-body.modal_stiffness, -D]])
    lam = np.linalg.eigvals(A)
    lam = lam[lam.imag > 0]
    found = -lam.real / np.abs(lam)
    np.testing.assert_allclose(np.sort(found), np.sort(zeta), rtol=1e-8)
    np.testing.assert_allclose(np.sort(np.abs(lam)) / (2 * np.pi), body.frequencies_hz, rtol=1e-8)


def test_sparse_eigensolver_path_matches_the_dense_one(axle, monkeypatch):
    frame, iface, M, K, body = axle
    monkeypatch.setattr(craig_bampton, "DENSE_EIGEN_LIMIT", 0)
    for kwargs in ({"f_cutoff_hz": F_CUTOFF}, {"n_modes": len(body.fixed_interface_frequencies_hz)}):
        sparse_body = reduce(M, K, frame.nodes, iface, **kwargs)
        np.testing.assert_allclose(sparse_body.fixed_interface_frequencies_hz, body.fixed_interface_frequencies_hz,
                                   rtol=1e-9)
        np.testing.assert_allclose(sparse_body.frequencies_hz, body.frequencies_hz, rtol=1e-9)


# ---- inputs ------------------------------------------------------------------------------------

def test_bad_inputs_name_the_field_and_value(axle):
    frame, iface, M, K, _ = axle
    nodes = np.array([[0.0, 0, 0], [1.0, 0, 0], [1.0, 1.0, 0]])
    with pytest.raises(FlexibleBodyError, match=r"elements\[1\] = \[1, 7\]: node 7 does not exist"):
        BeamFrame(nodes, [[0, 1], [1, 7]], ARM)
    with pytest.raises(FlexibleBodyError, match=r"sections\[1\]\.E = -210000000000\.0"):
        BeamFrame(nodes, [[0, 1], [1, 2]], (ARM, Section(A=1e-4, Iy=1e-9, Iz=1e-9, J=1e-9, **dict(STEEL, E=-2.1e11))))
    with pytest.raises(FlexibleBodyError, match=r"elements\[0\] = \[2, 2\]: zero length"):
        BeamFrame(nodes, [[2, 2]], ARM)
    with pytest.raises(FlexibleBodyError, match=r"orientation = \[2\.0, 0\.0, 0\.0\] is parallel to the axis of "
                                                r"element 0"):
        BeamFrame(nodes, [[0, 1]], ARM, orientation=[2.0, 0.0, 0.0])
    with pytest.raises(FlexibleBodyError, match=r"interface_nodes\[1\] = 99: no such node"):
        reduce(M, K, frame.nodes, [0, 99], n_modes=2)
    with pytest.raises(FlexibleBodyError, match=r"give exactly one"):
        reduce(M, K, frame.nodes, iface, n_modes=2, f_cutoff_hz=100.0)
    bad = K.tolil()
    bad[3, 40] += 1e3
    with pytest.raises(FlexibleBodyError, match=r"K is not symmetric: \|K\[3, 40\] - K\[40, 3\]\| = 1e\+03"):
        reduce(M, bad, frame.nodes, iface, n_modes=2)
    with pytest.raises(FlexibleBodyError, match=r"M: has 186 rows but nodes has 30 rows"):
        reduce(M, K, frame.nodes[:-1], iface, n_modes=2)
    grounded = K + sp.diags(np.r_[1e6, np.zeros(K.shape[0] - 1)])
    with pytest.raises(FlexibleBodyError, match=r"K: rigid-body motion x is not free of elastic forces"):
        reduce(M, grounded, frame.nodes, iface, n_modes=2)


def _assert_same_body(a, b):
    np.testing.assert_allclose(a.frequencies_hz, b.frequencies_hz, rtol=1e-10)
    for name in ("mass", "first_moment", "inertia", "interface_translation", "interface_rotation",
                 "inertia_gradient", "mode_shapes"):
        x, y = getattr(a, name), getattr(b, name)
        np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-9 * np.abs(y).max(), err_msg=name)


def test_fe_export_files_round_trip_to_the_same_body(axle, tmp_path):
    frame, iface, M, K, body = axle
    Mc, Kc = M.tocsr(), K.tocsr()
    np.savez(tmp_path / "dense.npz", M=M.toarray(), K=K.toarray(), nodes=frame.nodes)
    np.savez(tmp_path / "csr.npz", nodes=frame.nodes, **{f"{n}_{p}": getattr(A, p) for n, A in (("M", Mc), ("K", Kc))
                                                          for p in ("data", "indices", "indptr")})
    scipy.io.mmwrite(tmp_path / "M.mtx", Mc)
    scipy.io.mmwrite(tmp_path / "K.mtx", Kc)
    np.savetxt(tmp_path / "nodes.csv", frame.nodes, delimiter=",", header="x,y,z", comments="", fmt="%.17g")
    np.save(tmp_path / "nodes.npy", frame.nodes)
    models = [load_npz(tmp_path / "dense.npz"), load_npz(tmp_path / "csr.npz", check_definite=True),
              load_matrix_market(tmp_path / "M.mtx", tmp_path / "K.mtx", tmp_path / "nodes.csv"),
              load_matrix_market(tmp_path / "M.mtx", tmp_path / "K.mtx", tmp_path / "nodes.npy")]
    for model in models:
        _assert_same_body(reduce(model.M, model.K, model.nodes, iface, f_cutoff_hz=F_CUTOFF), body)
    np.savez(tmp_path / "no_k.npz", M=M.toarray(), nodes=frame.nodes)
    with pytest.raises(FlexibleBodyError, match=r"no_k\.npz: has no 'K' \(dense\) nor 'K_data'"):
        load_npz(tmp_path / "no_k.npz")


# ---- cache -------------------------------------------------------------------------------------

def test_cache_is_read_back_and_a_damaged_file_is_recomputed(axle, tmp_path, monkeypatch):
    frame, iface, M, K, body = axle
    args = (M, K, frame.nodes, iface)
    first = reduce_cached(*args, f_cutoff_hz=F_CUTOFF, cache_dir=tmp_path)
    (path,) = tmp_path.glob("craig_bampton-*.npz")
    _assert_same_body(first, body)
    real_reduce = craig_bampton.reduce

    def refuse(*a, **k):
        raise AssertionError("reduced again although cached")
    monkeypatch.setattr(craig_bampton, "reduce", refuse)
    again = reduce_cached(*args, f_cutoff_hz=F_CUTOFF, cache_dir=tmp_path)
    for name, value in first.arrays().items():
        assert np.array_equal(getattr(again, name), value), name

    calls = []
    monkeypatch.setattr(craig_bampton, "reduce", lambda *a, **k: calls.append(1) or real_reduce(*a, **k))
    path.write_bytes(b"PK\x03\x04 not a zip file")
    _assert_same_body(reduce_cached(*args, f_cutoff_hz=F_CUTOFF, cache_dir=tmp_path), body)
    with np.load(path) as data:                          # rewritten, now with one number changed
        arrays = dict(data)
    arrays["inertia"] = arrays["inertia"] * (1 + 1e-15)
    np.savez(path, **arrays)
    _assert_same_body(reduce_cached(*args, f_cutoff_hz=F_CUTOFF, cache_dir=tmp_path), body)
    assert len(calls) == 2
    reduce_cached(*args, n_modes=3, cache_dir=tmp_path)
    assert len(list(tmp_path.glob("craig_bampton-*.npz"))) == 2 and len(calls) == 3
