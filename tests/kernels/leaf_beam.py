"""Independent oracle of the leaf-spring axle: each leaf an Euler-Bernoulli
beam of 20 elements (the Adams way of seed 004), written here with numpy
from the model YAML's data alone - no kernels code.

The axle as the beam model sees it, linearised at the design state:
- the axle a rigid body (6 DOF at its centre of mass c); the leaf's centre
  part P-R clamped to it (beam nodes P and R slaved to the axle);
- per leaf two free parts X-P and R-Y of 10 3-D frame elements each (axial
  EA, torsion GJ, bending about the leaf's lateral axis EI_v and about its
  vertical axis EI_l), with the geometric stiffness of the axial force N
  each part carries at the design state (P-delta; the moments' second-order
  terms are left out);
- the front eye bushing a 6-direction spring to the frame at X, the shackle
  a rigid body on two 6-direction pin springs (Y to the leaf, Z to the
  frame), with the geometric stiffness of its tension (the pendulum);
- the beam's rigidities from the same published rates as the five-link
  joints: the clamped leaf is two cantilevers of length 2a, so its vertical
  rate is c_V = 3 EI_v / (4 a^3) (lateral likewise with c_L), GJ = c_t a;
- the design state: the leaf straight at the design load (as the five-link
  leaf), its reactions from the planar equilibrium of leaf and shackle under
  the sprung load F0 = W - (wheel + half the axle) g along the axle's
  vertical line x = 0 (the leaf links' own 7 kg per side are not in the
  beam model).

:func:`axle_stiffness` returns the axle's 6x6 stiffness (rows: force and
moment on the axle [N, N m]; columns: translation and small rotation of the
axle at c [m, rad], vehicle axes) with every other DOF condensed out.
"""
from __future__ import annotations

import numpy as np

E_STEEL = 2.1e11       # Pa
N_ELEMENTS = 10        # per free part of a leaf: 20 per leaf


def _skew(v):
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


def _point(hp, spec, sign=1.0):
    """A hardpoint of the YAML (left side), mirrored for sign = -1."""
    if isinstance(spec, str):
        spec = hp[spec]
    if isinstance(spec, dict):
        a, b = (_point(hp, s) for s in spec["along"])
        p = a + float(spec["fraction"]) * (b - a)
    else:
        p = np.asarray(spec, float)
    return p * np.array([1.0, sign, 1.0])


def _frame(axis, x_hint):
    z = np.asarray(axis, float) / np.linalg.norm(axis)
    x = np.asarray(x_hint, float)
    x = x - (x @ z) * z
    x /= np.linalg.norm(x)
    return np.column_stack([x, np.cross(z, x), z])


def _spring6(k6, R):
    """6x6 stiffness of a bushing with diagonal rates k6 in the frame R (columns)."""
    K = np.zeros((6, 6))
    K[:3, :3] = R @ np.diag(k6[:3]) @ R.T
    K[3:, 3:] = R @ np.diag(k6[3:]) @ R.T
    return K


def beam_element(L, EA, GJ, EI_y, EI_z, N):
    """12x12 local stiffness (elastic + geometric, axial force N tension +)
    of a 3-D Euler-Bernoulli frame element; local x along the element,
    bending in x-y uses EI_z, in x-z uses EI_y (Przemieniecki)."""
    k = np.zeros((12, 12))
    k[np.ix_([0, 6], [0, 6])] = EA / L * np.array([[1, -1], [-1, 1]])
    k[np.ix_([3, 9], [3, 9])] = GJ / L * np.array([[1, -1], [-1, 1]])
    bz = np.array([[12, 6 * L, -12, 6 * L], [6 * L, 4 * L * L, -6 * L, 2 * L * L],
                   [-12, -6 * L, 12, -6 * L], [6 * L, 2 * L * L, -6 * L, 4 * L * L]])
    gz = np.array([[6 / 5, L / 10, -6 / 5, L / 10], [L / 10, 2 * L * L / 15, -L / 10, -L * L / 30],
                   [-6 / 5, -L / 10, 6 / 5, -L / 10], [L / 10, -L * L / 30, -L / 10, 2 * L * L / 15]])
    flip = np.diag([1.0, -1.0, 1.0, -1.0])       # x-z plane: rotation about y is -dw/dx
    iz, iy = [1, 5, 7, 11], [2, 4, 8, 10]
    k[np.ix_(iz, iz)] += EI_z / L ** 3 * bz + N / L * gz
    k[np.ix_(iy, iy)] += EI_y / L ** 3 * flip @ bz @ flip + N / L * flip @ gz @ flip
    return k


def rigid_geometric(forces):
    """Geometric stiffness [N m/rad] of a rigid body's small rotation under
    forces fixed in space, [(F, r)] with r from the body's reference point:
    the second-order term of -F . (theta x (theta x r)) / 2."""
    K = np.zeros((3, 3))
    for F, r in forces:
        K += (F @ r) * np.eye(3) - 0.5 * (np.outer(F, r) + np.outer(r, F))
    return K


def _rates(cfg, name):
    t = cfg["per_side"]["bushings"][name]
    k = cfg["bushing_types"][t["type"]]["stiffness"] if "type" in t else t["stiffness"]
    return np.asarray(t.get("stiffness", k), float)


def leaf_data(cfg):
    """The leaf's rates as the beam sees them: (c_V, c_L, GJ, a) from the
    five-link joint rates of the YAML (c_phi at P = 3 a^2 c_V, c_psi at P =
    3 a^2 c_L, c_t = GJ / a)."""
    hp = cfg["hardpoints"]
    X, Y = _point(hp, "X"), _point(hp, "Y")
    a = np.linalg.norm(Y - X) / 5
    kP = _rates(cfg, "leaf_joint_P")
    return kP[5] / (3 * a * a), kP[4] / (3 * a * a), kP[3] * a, a


def axle_stiffness(cfg, n_elements=N_ELEMENTS):
    hp = cfg["hardpoints"]
    g = -float(cfg["gravity"][2])
    W = float(cfg["alignment"]["wheel_load"])
    axle = cfg["shared"]["bodies"]["axle"]
    c = np.asarray(axle["com"], float)
    m_axle = float(axle["mass"])
    m_wheel = float(cfg["per_side"]["bodies"]["wheel"]["mass"])
    c_V, c_L, GJ, a = leaf_data(cfg)
    EI_v, EI_l = 4 * a ** 3 * c_V / 3, 4 * a ** 3 * c_L / 3
    h = (12 * EI_v / (E_STEEL * 0.09)) ** (1 / 3)      # the equivalent single leaf, 0.09 m wide
    EA = E_STEEL * 0.09 * h
    k_eye, k_pin = _rates(cfg, "front_eye"), _rates(cfg, "shackle_lower")
    k_pin_up = _rates(cfg, "shackle_upper")

    # DOFs: axle 6, then per side the free beam nodes and the shackle
    blocks = {"axle": 0}
    n = 6
    sides = {"left": 1.0, "right": -1.0}
    geo = {}
    for s, sign in sides.items():
        X, Y, Z = (_point(hp, k, sign) for k in ("X", "Y", "Z"))
        P = X + 0.4 * (Y - X)
        R = X + 0.6 * (Y - X)
        front = [X + t * (P - X) for t in np.linspace(0, 1, n_elements + 1)]
        rear = [R + t * (Y - R) for t in np.linspace(0, 1, n_elements + 1)]
        nodes = {}
        for i, p in enumerate(front[:-1]):
            nodes[("f", i)] = p
        for i, p in enumerate(rear[1:], start=1):
            nodes[("r", i)] = p
        for key in nodes:
            blocks[(s, key)] = n
            n += 6
        blocks[(s, "shackle")] = n
        n += 6
        geo[s] = dict(X=X, Y=Y, Z=Z, P=P, R=R, front=front, rear=rear, nodes=nodes, M=(Y + Z) / 2)
    K = np.zeros((n, n))

    def dof(entity, point=None, ref=None):
        """(indices, G): the 6 displacements (translation at `point`, rotation)
        of a point of `entity` = G @ q[indices]."""
        i = blocks[entity]
        G = np.eye(6)
        if point is not None:
            G[:3, 3:] = -_skew(point - ref)
        return np.arange(i, i + 6), G

    def node_dof(s, key, p):
        if key == ("f", n_elements) or key == ("r", 0):      # P or R: on the clamp
            return dof("axle", p, c)
        return dof((s, key))

    def add(parts, Ke):
        """K += B^T Ke B for the stacked 6-blocks `parts` [(indices, G)]."""
        idx = np.concatenate([ix for ix, _ in parts])
        B = np.zeros((6 * len(parts), len(idx)))
        for j, (_, G) in enumerate(parts):
            B[6 * j:6 * j + 6, 6 * j:6 * j + 6] = G
        K[np.ix_(idx, idx)] += B.T @ Ke @ B

    def add_spring(p1, p2, Kb):
        """A spring between two points' 6 displacements: energy (d2 - d1)^T Kb (d2 - d1) / 2."""
        add([p1, p2], np.block([[Kb, -Kb], [-Kb, Kb]]))

    axle_forces = []
    for s, sign in sides.items():
        d = geo[s]
        X, Y, Z, P, R, M = d["X"], d["Y"], d["Z"], d["P"], d["R"], d["M"]
        # design-state reactions of the leaf: F0 up along x = 0 (the axle's vertical
        # line), the eye force (Fx, Fz) at X, the shackle tension T along Y -> Z
        F0 = W - m_wheel * g - m_axle * g / 2
        u = (Z - Y) / np.linalg.norm(Z - Y)
        A = np.array([[1.0, 0.0, u[0]], [0.0, 1.0, u[2]],
                      [X[2], -X[0], Y[2] * u[0] - Y[0] * u[2]]])
        Fx, Fz, T = np.linalg.solve(A, [0.0, -F0, 0.0])
        F_eye = np.array([Fx, 0.0, Fz])          # frame on leaf at X
        F_sh = T * u                              # shackle on leaf at Y
        geo[s].update(F_eye=F_eye, F_sh=F_sh)
        e1 = (Y - X) / np.linalg.norm(Y - X)
        N_front, N_rear = -F_eye @ e1, F_sh @ e1  # axial force (tension +) of the parts
        # beam elements
        lat = np.array([0.0, 1.0, 0.0])
        Lam = np.vstack([e1, lat, np.cross(e1, lat)])
        T12 = np.kron(np.eye(4), Lam)
        for part, pts, N in (("f", d["front"], N_front), ("r", d["rear"], N_rear)):
            for i in range(n_elements):
                L = np.linalg.norm(pts[i + 1] - pts[i])
                ke = beam_element(L, EA, GJ, EI_v, EI_l, N)
                # local y is the lateral axis: bending in x-y (lateral) uses EI_l as
                # "EI_z", bending in x-z (vertical) EI_v as "EI_y"
                add([node_dof(s, (part, i), pts[i]), node_dof(s, (part, i + 1), pts[i + 1])],
                    T12.T @ ke @ T12)
        # front eye: frame to the leaf's first node (the bushing's frame of the YAML)
        Re = _frame([0.0, sign, 0.0], [1.0, 0.0, 0.0])
        add([node_dof(s, ("f", 0), X)], _spring6(k_eye, Re))
        # shackle: rigid body on two pins
        Rp = _frame([0.0, sign, 0.0], [1.0, 0.0, 0.0])
        add_spring(dof((s, "shackle"), Y, M), node_dof(s, ("r", n_elements), Y), _spring6(k_pin, Rp))
        add([dof((s, "shackle"), Z, M)], _spring6(k_pin_up, Rp))
        # the shackle's pendulum stiffness: leaf on shackle -F_sh at Y, frame +F_sh at Z
        i = blocks[(s, "shackle")] + 3
        K[i:i + 3, i:i + 3] += rigid_geometric([(-F_sh, Y - M), (F_sh, Z - M)])
        # forces on the axle at design: the leaf at P (F_eye) and R (F_sh), the wheel
        WC = _point(hp, "WC", sign)
        axle_forces += [(F_eye, P - c), (F_sh, R - c), (np.array([0.0, 0.0, W - m_wheel * g]), WC - c)]
    K[3:6, 3:6] += rigid_geometric(axle_forces + [(np.array([0.0, 0.0, -m_axle * g]), np.zeros(3))])

    o = np.arange(6, n)
    Kaa, Kao, Koa, Koo = K[:6, :6], K[:6, o], K[o][:, :6], K[np.ix_(o, o)]
    return Kaa - Kao @ np.linalg.solve(Koo, Koa), geo
