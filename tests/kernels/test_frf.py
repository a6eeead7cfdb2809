"""kernels.frf against an independent oracle: the closed-form receptance and
mount force of a two-mass oscillator built from the model tables (numpy's
complex solve of the 2x2 dynamic stiffness). On a real axle (the toy): the
low-frequency limit against finite differences of the static equilibrium
and a stepped-sine run of the nonlinear equations, tests/kernels/test_frf_axle.py."""
import jax
import jax.numpy as jnp
import numpy as np

import kernels  # noqa: F401  (float64)
from kernels import frf, statics
from kernels.model import build_model

K1, C1, K2, C2 = 4.0e4, 60.0, 2.5e5, 150.0      # N/m, N s/m
M1, M2 = 30.0, 5.0                               # kg


def two_mass_tables():
    """Per side a body (30 kg) on a bushing to ground and a 'wheel' (5 kg) on a
    bushing to that body, the right chain the mirror of the left; markers at
    the centres of mass, so every direction is its own two-mass chain.
    Rotations stiff, translations as the constants above."""
    eye = [[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]]
    bodies, markers, bushings = [], [], []
    for s, y in ((0, 0.6), (1, -0.6)):
        b, w = 2 * s + 1, 2 * s + 2
        bodies += [{"index": b, "name": f"body_{s}", "mass": M1, "inertia": eye, "position": [0.0, y, 0.0]},
                   {"index": w, "name": f"wheel_{s}", "mass": M2, "inertia": [[0.2, 0, 0], [0, 0.2, 0], [0, 0, 0.2]],
                    "position": [0.0, y, 0.5]}]
        m = 4 * s
        markers += [{"index": m + 1, "name": f"g_{s}", "body": 0, "position": [0.0, y, 0.0]},
                    {"index": m + 2, "name": f"b1_{s}", "body": b, "position": [0.0, y, 0.0]},
                    {"index": m + 3, "name": f"b2_{s}", "body": b, "position": [0.0, y, 0.5]},
                    {"index": m + 4, "name": f"w_{s}", "body": w, "position": [0.0, y, 0.5]}]
        for i, (name, m1, m2, k, c) in enumerate((("mount", m + 2, m + 1, K1, C1), ("spring", m + 4, m + 3, K2, C2))):
            bushings.append({"index": 2 * s + i + 1, "name": f"{name}_{s}", "marker_1": m1, "marker_2": m2,
                             "stiffness": [k, k, k, 1e4, 1e4, 1e4], "damping": [c, c, c, 1.0, 1.0, 1.0]})
    return {"name": "two_mass", "gravity": [0.0, 0.0, -9.81], "bodies": bodies, "markers": markers,
            "bushings": bushings, "p2p": [], "wheels": {"left": 2, "right": 4}}


def closed_form(w):
    """Receptance x2/F2 and mount force F_mount/F2 of the two-mass chain (numpy)."""
    D = np.array([[K1 + K2 - M1 * w ** 2 + 1j * w * (C1 + C2), -(K2 + 1j * w * C2)],
                  [-(K2 + 1j * w * C2), K2 - M2 * w ** 2 + 1j * w * C2]])
    x = np.linalg.solve(D, [0.0, 1.0])
    return x[1], -(K1 + 1j * w * C1) * x[0]          # the mount's force on body 1


def test_two_mass_oscillator_equals_the_closed_form():
    model = build_model(two_mass_tables())
    u = jnp.zeros((2, 6))
    st = statics.static_equilibrium(model, u)
    assert bool(st.converged)
    f = np.geomspace(0.5, 100.0, 40)
    w = 2 * np.pi * f
    inputs = [frf.INPUTS.index("left_fz"), frf.INPUTS.index("right_fz")]
    res = jax.jit(lambda r, w: frf.frequency_response(model, r, u, w, inputs, bushings=[0, 2]))(st.r, w)
    expected = np.array([closed_form(x) for x in w])
    for side in (0, 1):                               # vertical: its own two-mass chain per side
        got = np.asarray(res.wheel_centre[:, side, 2, side])
        np.testing.assert_allclose(got, expected[:, 0], rtol=1e-7, atol=0)
        mount = np.asarray(res.bushing[:, side, 2, side])
        np.testing.assert_allclose(mount, expected[:, 1], rtol=1e-7, atol=0)
        # the other side does not answer
        assert np.max(np.abs(np.asarray(res.wheel_centre[:, 1 - side, 2, side]))) < 1e-15
    # the response has its two resonances inside the band (it is not a flat line)
    mag = np.abs(expected[:, 0])
    assert mag.max() > 5 * mag[0] and np.ptp(np.angle(expected[:, 0])) > 2.5


# ----- a sprung body (model.sprung_body): two quarter cars, exactly

MS, MU, KS, CS, KT, CT = 400.0, 35.0, 3.0e4, 1.5e3, 2.5e5, 100.0   # kg, kg, N/m, N s/m, N/m, N s/m
HALF_TRACK = 0.75                                                   # m


def quarter_car_config():
    """A model file: per side a wheel (35 kg, its rotation inertia
    negligible) on a vertical spring-damper to the chassis at the wheel
    centre, stiff in the other directions; tyres; the chassis side on a
    sprung body of 400 kg per wheel. No gravity, no loads: the state at rest
    is the design state, so the linearisation has no preload terms."""
    stiff, turn = 1.0e8, 1.0e4
    return {"name": "quarter_cars", "gravity": [0.0, 0.0, 0.0],
            "hardpoints": {"WC": [0.0, HALF_TRACK, 0.3]},
            "per_side": {"bodies": {"wheel": {"mass": MU, "com": "WC", "inertia": [1e-4, 1e-4, 1e-4]}},
                         "bushings": {"suspension": {"bodies": ["chassis", "wheel"], "at": "WC",
                                                     "stiffness": [stiff, stiff, KS, turn, turn, turn],
                                                     "damping": [0.0, 0.0, CS, 0.0, 0.0, 0.0]}}},
            "wheels": {"left": "wheel_left", "right": "wheel_right"},
            "tyres": {"rate": KT, "damping": CT}, "sprung_body": {"mass_per_wheel": MS}}


def quarter_car(w, road=True):
    """(sprung, unsprung) displacement of a quarter car per unit road height
    (``road``) or per unit force on the wheel (numpy solve of the 2x2)."""
    D = np.array([[KS - MS * w ** 2 + 1j * w * CS, -(KS + 1j * w * CS)],
                  [-(KS + 1j * w * CS), KS + KT - MU * w ** 2 + 1j * w * (CS + CT)]])
    return np.linalg.solve(D, [0.0, (KT + 1j * w * CT) if road else 1.0])


def test_sprung_body_is_two_quarter_cars():
    """The sprung body (mass 2 m, roll inertia 2 m s^2 on a guide free in
    heave and roll) is a mass m per wheel on a vertical guide: a unit road
    height under the left tyre moves the left wheel as the quarter car's
    unsprung mass and the body in heave by half, in roll by 1 / (2 s) of the
    quarter car's sprung mass; the right wheel does not answer. Through
    kernels.frf on the at-rest model (the road input: the wheel's fz times
    the tyre's dynamic rate, as the frf kind applies it)."""
    from sweep.axle.builder import build_tables
    from kernels.model import build_model
    model = build_model(build_tables(quarter_car_config(), source="test"))
    topo = model.topology
    u = jnp.zeros((2, 6))
    st = statics.equilibrium(model, u)
    assert bool(st.converged)
    rest = statics.at_rest(model, st.r)
    body = statics.mount_slot(topo)
    assert topo.body_names[body] == "sprung_body"
    f = np.geomspace(0.3, 60.0, 50)
    w = 2 * np.pi * f
    left_fz = [frf.INPUTS.index("left_fz")]
    response = jax.jit(lambda m: frf.frequency_response(m, st.r, u, w, left_fz, bodies=[body]))
    res = response(rest)
    dyn = KT + 1j * w * CT                                       # road -> wheel force
    expected = np.array([quarter_car(x) for x in w])             # (nf, 2): sprung, unsprung
    np.testing.assert_allclose(np.asarray(res.wheel_centre[:, 0, 2, 0]) * dyn, expected[:, 1], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(res.body[:, 0, 2, 0]) * dyn, expected[:, 0] / 2, rtol=1e-6)
    # roll: the z-y'-x'' angle x'' (coordinate 5); the wheels' own rotation
    # inertia (2e-4 kg m^2, on stiff rotation springs) rolls with the body: 1e-5
    np.testing.assert_allclose(np.asarray(res.body[:, 0, 5, 0]) * dyn, expected[:, 0] / (2 * HALF_TRACK),
                               rtol=1e-5)
    assert np.max(np.abs(np.asarray(res.wheel_centre[:, 1, 2, 0]))) < 1e-9 * np.max(np.abs(expected[:, 1]))
    # the body mode is inside the band: the sprung mass's transmissibility peaks near 1.3 Hz above 1
    mag = np.abs(expected[:, 0])
    assert 0.9 < f[np.argmax(mag)] < 1.6 and mag.max() > 1.5
    # held, as built (the static problems, K&C, modes): the body moves only
    # as far as the guide's held rate lets it, about 1 / (1e10 N/m) per N
    held = response(model)
    assert np.max(np.abs(np.asarray(held.body[:, 0, 2, 0]))) < 1e-4 * np.max(np.abs(np.asarray(res.body[:, 0, 2, 0])))
