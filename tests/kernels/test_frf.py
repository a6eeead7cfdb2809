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
