"""The leaf-spring axle's wheel rate explained: why it is 118.8 N/mm at the
design load (7108 N) and 113.0 N/mm at 5 kN when the leaf's own rate (Chrono
UAZ bus, the five-link joints' calibration) is 102.6 kN/m per side.

The kernels' parallel-travel wheel rate (kernels.kc.kc_metrics) is measured
on variants of the model that switch off one contribution at a time (one
compiled program, the variants are run-time inputs), and set against

- the closed form of the five-link leaf with ideal ends: each half a chain
  of two joints (inner at 2a, outer at a from the end) in series,
  c = 2 / (4 a^2 / c_phi,in + a^2 / c_phi,out), which with the seed's
  c_phi = 3 a^2 c_V, 1.5 a^2 c_V is c_V exactly; the axle moves normal to
  the leaf, pitched alpha = 3.0 deg (wheel recession tan alpha), so the
  wheel rate is c / cos^2 alpha;
- hand estimates of the extras: the eye and shackle-pin torsion, the ends'
  links turning by 2 w / (3 a) (k_t (2 / 3a)^2 each); the leaf's tension H
  (the horizontal component of the inclined shackle's compression) on the
  bent chain (5 H / (9 a) per half);
- an independent planar model (numpy, from the YAML's data only: the
  bodies of one side in the x-z plane, the joints as pin springs with the
  pretension found from the design equilibrium, the geometric stiffness of
  the pin forces, nonlinear for the 5 kN state).

Measured (2026-12, this machine), kernels / planar model, N/mm:
  nominal, 7108 N                                  118.81 / 118.80
  eye, shackle, joint, bearing translations x1000  120.25 / 120.25  (series compliance -1.44)
  eye and shackle torsion (rz) 0                   110.07 / 110.09  (torsion +8.73; hand 8.89)
  preloads and gravity 0 (no load)                 110.50 / 110.50  (leaf tension +8.31; hand 8.57)
  all three off                                    102.91 / 102.91  (closed form 102.93)
  contributions summed: 102.91 + 8.73 + 8.31 - 1.44 = 118.51 (interaction +0.30)
  preloads and gravity x 5000/7108, design geometry 116.35 / 116.34  (tension prop. to load: -2.46)
  5 kN (ride position, wheel centre -18.2 mm)      112.96 / 112.95  (leaf off straight: -3.39)
The calibration is right (the all-off variant is c_V / cos^2 alpha within
0.02 %); the extra 16 % is the [added] rubber torsion of eye and shackle
pin and the geometric stiffness of the leaf's tension, less the series
compliance of the bushings. The load dependence: the tension scales with
the load, and off the straight design shape the leaf's chord changes with
deflection so the inclined shackle swings (0.9 rad/m at 5 kN against 0.07
at design) - in rebound the shackle end rises with the axle (softer), in
bump it drops (stiffer: 126.6 N/mm at 9216 N in the planar model).
"""
import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import kernels  # noqa: F401  (float64)
from kernels import kc
from kernels.model import build_model
from sweep.axle.builder import build_tables
from tests.conftest import load_model_cfg

pytestmark = pytest.mark.slow

NAME = "leaf_spring_axle"
C_V = 102643.886           # N/m per leaf, Chrono's UAZ rear leaf rate (docs/sources/leaf_spring_axle_data.md)
LOADED_RADIUS = 0.347      # m (benchmarks/kc_metrics.py; the wheel rate does not depend on it)
STIFF = 1000.0             # factor on the translational stiffnesses: "rigid" ends and joints
W_LOW = 5000.0             # N, the load cases' default wheel load
TOL_CLOSED_FORM = 0.001    # relative: all-off variant against the closed-form leaf rate
TOL_PLANAR = 0.1           # N/mm: every variant against the independent planar model
TOL_SUM = 0.5              # N/mm: the contributions, measured one at a time, summed against nominal
TOL_HAND = 0.05            # relative: torsion and tension against their hand estimates
G = 9.81


# ----------------------------------------------------------------------------- the independent planar model

def _xz(v):
    return np.array([v[0], v[2]], float)


def _rot(t):               # rotation about +y acting on (x, z)
    c, s = np.cos(t), np.sin(t)
    return np.array([[c, s], [-s, c]])


def _drot(t):
    c, s = np.cos(t), np.sin(t)
    return np.array([[-s, c], [-c, -s]])


class Planar:
    """One side of the axle in its x-z plane (parallel travel keeps the axle
    level): bodies 1 axle (half its mass, the clamped centre link), 2 wheel,
    3-6 the leaf links X-Q, Q-P, R-S, S-Y, 7 the shackle; 0 the frame. Each
    joint a pin spring (radial rate, pretension force lam) with a rotational
    spring (rate, pretension torque T) about the lateral axis. The
    pretension is the design state's: the design geometry in equilibrium
    under the design wheel load and gravity (21 equations for 16 pin forces
    and 5 torques: the eye and shackle pins carry none). Dead loads; the
    pin forces' geometric stiffness (lam . d2 pos / d theta2) included."""

    def __init__(self, cfg, series=1.0, torsion=1.0, preload=1.0, lock=kc.DEFAULT_BRAKE_LOCK):
        hp, bt = cfg["hardpoints"], cfg["bushing_types"]
        X, Y, Z, WC = (_xz(hp[k]) for k in ("X", "Y", "Z", "WC"))
        Q, P, R, S = (X + f * (Y - X) for f in (0.2, 0.4, 0.6, 0.8))
        self.leaf = (X, Y)
        k = lambda t, i: float(bt[t]["stiffness"][i])        # noqa: E731
        # (body i, body j, point, radial rate, rotational rate, pretension torque unknown)
        self.pins = [(1, 2, WC, k("wheel_bearing", 0) * series, k("wheel_bearing", 5) + lock, True),
                     (3, 0, X, k("eye_bushing", 0) * series, k("eye_bushing", 5) * torsion, False),
                     (3, 4, Q, k("leaf_joint_outer", 0) * series, k("leaf_joint_outer", 5), True),
                     (4, 1, P, k("leaf_joint_inner", 0) * series, k("leaf_joint_inner", 5), True),
                     (5, 1, R, k("leaf_joint_inner", 0) * series, k("leaf_joint_inner", 5), True),
                     (6, 5, S, k("leaf_joint_outer", 0) * series, k("leaf_joint_outer", 5), True),
                     (7, 6, Y, k("shackle_pin", 0) * series, k("shackle_pin", 5) * torsion, False),
                     (7, 0, Z, k("shackle_pin", 0) * series, k("shackle_pin", 5) * torsion, False)]
        self.ref = {1: WC, 2: WC, 3: X, 4: Q, 5: R, 6: S, 7: Y}
        ax, pb = cfg["shared"]["bodies"]["axle"], cfg["per_side"]["bodies"]
        self.mass = [(1, ax["mass"] / 2, _xz(ax["com"])), (2, pb["wheel"]["mass"], WC),
                     (3, pb["front_outer_leaf"]["mass"], (X + Q) / 2), (4, pb["front_inner_leaf"]["mass"], (Q + P) / 2),
                     (5, pb["rear_inner_leaf"]["mass"], (R + S) / 2), (6, pb["rear_outer_leaf"]["mass"], (S + Y) / 2),
                     (7, pb["shackle"]["mass"], (Y + Z) / 2)]
        self.n = 21
        self.grav = preload
        self.q0 = np.concatenate([np.r_[self.ref[b], 0.0] for b in range(1, 8)])
        self._pretension(cfg["alignment"]["wheel_load"] * preload)

    def _point(self, q, b, p):
        """Position of the design point p on body b, its Jacobian (2, n), d2/dtheta2."""
        J = np.zeros((2, self.n))
        if b == 0:
            return p, J, np.zeros(2)
        c, t = q[3 * b - 3:3 * b - 1], q[3 * b - 1]
        s = p - self.ref[b]
        J[:, 3 * b - 3:3 * b - 1] = np.eye(2)
        J[:, 3 * b - 1] = _drot(t) @ s
        return c + _rot(t) @ s, J, -_rot(t) @ s

    def _rel(self, i, j):
        e = np.zeros(self.n)
        for b, sgn in ((j, 1.0), (i, -1.0)):
            if b:
                e[3 * b - 1] += sgn
        return e

    def _external(self, q, W):
        f, K = np.zeros(self.n), np.zeros((self.n, self.n))
        for b, m, c in self.mass:
            F = np.array([0.0, -m * G * self.grav])
            _, J, h = self._point(q, b, c)
            f += J.T @ F
            K[3 * b - 1, 3 * b - 1] -= F @ h                  # load stiffness of a dead load
        f[4] += W                                           # wheel load, up, at the wheel centre
        return f, K

    def _pretension(self, W):
        cols = []
        for i, j, p, *_ in self.pins:
            Jg = self._point(self.q0, i, p)[1] - self._point(self.q0, j, p)[1]
            cols += list(Jg)
        cols += [self._rel(i, j) for i, j, p, kt, kr, torque in self.pins if torque]
        sol = np.linalg.solve(np.array(cols).T, self._external(self.q0, W)[0])
        self.lam = sol[:16].reshape(8, 2)
        self.T = np.zeros(8)
        self.T[[k for k, e in enumerate(self.pins) if e[5]]] = sol[16:]

    def residual_and_stiffness(self, q, W):
        g, K = np.zeros(self.n), np.zeros((self.n, self.n))
        for (i, j, p, kt, kr, _), lam, T in zip(self.pins, self.lam, self.T):
            pi, Ji, hi = self._point(q, i, p)
            pj, Jj, hj = self._point(q, j, p)
            force = kt * (pi - pj) + lam
            Jg = Ji - Jj
            g += Jg.T @ force
            K += kt * Jg.T @ Jg
            if i:
                K[3 * i - 1, 3 * i - 1] += force @ hi
            if j:
                K[3 * j - 1, 3 * j - 1] -= force @ hj
            e = self._rel(i, j)
            g += (kr * (e @ (q - self.q0)) + T) * e
            K += kr * np.outer(e, e)
        f, Kl = self._external(q, W)
        return g - f, K + Kl

    def wheel_rate(self, W):
        """Static state under the wheel load W [N] (Newton), then the vertical
        rate at the wheel centre with every other DOF free [N/mm]; the state."""
        q = self.q0.copy()
        for _ in range(50):
            r, K = self.residual_and_stiffness(q, W)
            dq = np.linalg.solve(K, -r)
            q += dq
            if np.max(np.abs(dq)) < 1e-12:
                break
        r, K = self.residual_and_stiffness(q, W)
        assert np.max(np.abs(r)) < 1e-6
        return 1.0 / np.linalg.inv(K)[4, 4] / 1000.0, q


# ----------------------------------------------------------------------------- the kernels' variants

@pytest.fixture(scope="module")
def measured():
    cfg = load_model_cfg(NAME)
    tables = build_tables(cfg)
    model = kc.lock_brakes(build_model(tables), kc.DEFAULT_BRAKE_LOCK)
    names = [b["name"] for b in tables["bushings"]]
    rows = lambda *keys: np.array([i for i, n in enumerate(names) if n.startswith(keys)])  # noqa: E731
    ends, joints, bearings = rows("front_eye", "shackle_"), rows("leaf_joint"), rows("wheel_bearing")
    assert len(ends) == 6 and len(joints) == 8 and len(bearings) == 2
    W = float(cfg["alignment"]["wheel_load"])

    @jax.jit
    def rate(m, load):
        # the static state under ``load`` at both wheel centres, then K&C there
        # (at the design load this is the design position); residual tol 1e-4 N:
        # the 1e10 N/m variants' round-off is above the default 1e-6
        eq = kc.ride_position(m, load, tol=1e-4)
        met = kc.kc_metrics(m, eq, loaded_radius=LOADED_RADIUS, with_geometry=False)
        wc = eq.r[m.topology.wheel_slots, 2] - kc.design_heights(m)
        return met["wheel_rate"], eq.converged, wc

    k = model.elements["bushing"]["k"]
    series = k.at[np.ix_(np.r_[ends, joints, bearings], [0, 1, 2])].multiply(STIFF)
    no_torsion = k.at[ends, 5].set(0.0)
    def unloaded(m):
        m = m.replace_elements(bushing={"preload": jnp.zeros_like(m.elements["bushing"]["preload"])})
        return dataclasses.replace(m, gravity=jnp.zeros_like(m.gravity))
    s = W_LOW / W
    rep = dataclasses.replace
    variants = {
        "nominal": (model, W),
        "series_stiff": (model.replace_elements(bushing={"k": series}), W),
        "torsion_off": (model.replace_elements(bushing={"k": no_torsion}), W),
        "preload_off": (unloaded(model), 0.0),
        "all_off": (unloaded(model.replace_elements(bushing={"k": series.at[ends, 5].set(0.0)})), 0.0),
        "scaled_5kN": (rep(model.replace_elements(bushing={"preload": s * model.elements["bushing"]["preload"]}), gravity=s * model.gravity), W_LOW),
        "ride_5kN": (model, W_LOW),
    }
    out, t0 = {}, time.perf_counter()
    for name, (m, load) in variants.items():
        r, ok, wc = jax.device_get(rate(m, load))
        assert bool(ok), name
        assert r[0] == pytest.approx(r[1], rel=1e-9), name          # both sides alike
        out[name] = float(r[0])
        out[name + "_travel"] = float(wc[0]) * 1000.0
    print(f"\nkernels: {len(variants)} variants, one program, {time.perf_counter() - t0:.1f} s")
    return cfg, out


@pytest.fixture(scope="module")
def planar(measured):
    cfg, _ = measured
    W = float(cfg["alignment"]["wheel_load"])
    s = W_LOW / W
    return {"nominal": Planar(cfg).wheel_rate(W)[0],
            "series_stiff": Planar(cfg, series=STIFF).wheel_rate(W)[0],
            "torsion_off": Planar(cfg, torsion=0.0).wheel_rate(W)[0],
            "preload_off": Planar(cfg, preload=0.0).wheel_rate(0.0)[0],
            "all_off": Planar(cfg, series=STIFF, torsion=0.0, preload=0.0).wheel_rate(0.0)[0],
            "scaled_5kN": Planar(cfg, preload=s).wheel_rate(W_LOW)[0],
            "ride_5kN": Planar(cfg).wheel_rate(W_LOW)[0]}


def _closed_form(cfg):
    """The five-link leaf with ideal ends, no preload [N/mm]: two halves in
    parallel, each two joints in series (the moment of the end reaction R at
    the inner joint 2a R, at the outer a R), times 1 / cos^2 alpha (the axle
    moves normal to the leaf line)."""
    bt, hp = cfg["bushing_types"], cfg["hardpoints"]
    X, Y = np.array(hp["X"]), np.array(hp["Y"])
    a = np.linalg.norm(Y - X) / 5
    c_in, c_out = bt["leaf_joint_inner"]["stiffness"][5], bt["leaf_joint_outer"]["stiffness"][5]
    c_leaf = 2.0 / ((2 * a) ** 2 / c_in + a ** 2 / c_out)
    alpha = np.arcsin((X[2] - Y[2]) / np.linalg.norm(Y - X))
    return c_leaf, c_leaf / np.cos(alpha) ** 2 / 1000.0, a, alpha


def test_the_decomposition_of_the_wheel_rate(measured, planar):
    cfg, m = measured
    c_leaf, closed, a, alpha = _closed_form(cfg)
    bt = cfg["bushing_types"]
    d_series = m["nominal"] - m["series_stiff"]
    d_torsion = m["nominal"] - m["torsion_off"]
    d_preload = m["nominal"] - m["preload_off"]
    total = m["all_off"] + d_series + d_torsion + d_preload
    # hand estimates: the end links turn by 2 w / (3 a) against the eye and the
    # lower shackle pin; the leaf's tension H on each half: 5 H / (9 a)
    hand_torsion = (bt["eye_bushing"]["stiffness"][5] + bt["shackle_pin"]["stiffness"][5]) * (2 / (3 * a)) ** 2 / 1000
    H = float(cfg["per_side"]["bushings"]["front_eye"]["preload"][0])          # eye, fore-aft [N]
    hand_tension = 2 * 5 * H / (9 * a) / 1000
    print(f"leaf pitch {np.degrees(alpha):.2f} deg, link a = {a:.4f} m")
    print(f"five-link leaf, ideal ends (closed form): {c_leaf / 1000:.3f} N/mm, wheel rate {closed:.3f} N/mm")
    print(f"{'variant':14s} {'kernels':>9s} {'planar':>9s}  N/mm")
    for name in planar:
        print(f"{name:14s} {m[name]:9.3f} {planar[name]:9.3f}")
    print(f"contributions: leaf {m['all_off']:.2f} + eye/shackle torsion {d_torsion:+.2f} (hand {hand_torsion:.2f})"
          f" + tension (preload) {d_preload:+.2f} (hand {hand_tension:.2f}) + series compliance {d_series:+.2f}"
          f" = {total:.2f}; nominal {m['nominal']:.2f}")
    # the calibration: the joints' rates give the leaf Chrono's rate
    assert c_leaf == pytest.approx(C_V, rel=1e-5)        # |X - Y| = 5 a within 2e-6
    # the variant with every extra off IS the leaf
    assert m["all_off"] == pytest.approx(closed, rel=TOL_CLOSED_FORM)
    # the contributions add up
    assert abs(total - m["nominal"]) < TOL_SUM
    # each contribution has the size its mechanism gives
    assert d_torsion == pytest.approx(hand_torsion, rel=TOL_HAND)
    assert d_preload == pytest.approx(hand_tension, rel=TOL_HAND)
    assert -2.0 < d_series < 0.0
    # every variant against the independent planar model
    for name, value in planar.items():
        assert abs(m[name] - value) < TOL_PLANAR, (name, m[name], value)


def test_the_load_dependence_of_the_wheel_rate(measured, planar):
    """7108 N -> 5 kN: the leaf's tension (its geometric stiffness) scales
    with the load; the rest is the geometry (the axle 18 mm lower, the leaf
    no longer straight, the shackle swinging)."""
    cfg, m = measured
    W = float(cfg["alignment"]["wheel_load"])
    d_load = m["nominal"] - m["ride_5kN"]
    d_tension = m["nominal"] - m["scaled_5kN"]
    d_geometry = m["scaled_5kN"] - m["ride_5kN"]
    print(f"5 kN: {m['ride_5kN']:.2f} N/mm at {m['ride_5kN_travel']:+.1f} mm; the drop {d_load:.2f} = tension "
          f"{d_tension:.2f} + geometry {d_geometry:.2f} N/mm")
    assert m["nominal"] == pytest.approx(118.8, abs=0.5) and m["ride_5kN"] == pytest.approx(113.0, abs=0.5)
    assert m["scaled_5kN_travel"] == pytest.approx(0.0, abs=1e-6)
    assert m["ride_5kN_travel"] == pytest.approx(-18.2, abs=0.5)
    # the tension's share is proportional to the load at the design geometry
    d_preload = m["nominal"] - m["preload_off"]
    assert d_tension == pytest.approx(d_preload * (1 - W_LOW / W), rel=0.01)
    # the geometry's share: the planar model's nonlinear state agrees
    assert d_geometry == pytest.approx(planar["scaled_5kN"] - planar["ride_5kN"], abs=TOL_PLANAR)
    assert d_geometry > 2.0
