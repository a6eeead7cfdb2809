"""Frequency and time domain agree on the double wishbone with tyres: the
PSD of the wheel centre's vertical motion over a rough road equals
|H(f)|^2 times the road's PSD (tests/kernels/test_road.py, :func:`psd_ratio`;
the anti-roll bar couples the sides, so the cross terms count). The toy
axle's form and the published damper's miss: tests/validation/test_road_full.py."""
import numpy as np
import pytest

from tests.kernels.test_road import assert_agrees, psd_ratio

pytestmark = pytest.mark.slow


def linear_damper(cfg):
    """The linear variant of the double wishbone: its damper's published
    curve (compression 3460, rebound 2115 N s/m near rest: a bilinear law,
    nonlinear at any amplitude) replaced by the mean of the two slopes."""
    damper = cfg["per_side"]["p2p"]["damper"]
    damper.pop("curve")
    damper["damping"] = 2800.0


def test_double_wishbone_rough_road_psd_equals_frf_squared_times_road_psd():
    """Its linear variant (:func:`linear_damper`) on a class A road, 10 s,
    1-30 Hz (:func:`assert_agrees`)."""
    assert_agrees(psd_ratio("double_wishbone", T=10.0, road_class="A", edit=linear_damper))


def test_a_wheel_off_the_road_against_radau():
    """Lift-off and landing as state events (kernels.system: the tyre's
    contact force as the root): the toy axle on a class E road at 30 m/s
    leaves the road for about 7 % of a second; LSRT2 at 1 ms and 0.25 ms
    against scipy's Radau with the same events (rtol 1e-8): the wheel
    centre's height within 1e-3 and 1e-4 of its range, converging with
    order 2 through the events (the error falls >= 10x for 4x smaller
    steps)."""
    from kernels import loads, road
    from kernels.response import Options, Problem, equilibrium, solve
    from sweep.axle.builder import load_model_file, model_from_config
    cfg = load_model_file("configs/model/toy_trailing_arm.yaml")
    k, c = 250e3, 100.0
    cfg["tyres"] = {"rate": k, "damping": c}
    model = model_from_config(cfg)
    T = 1.0
    prof = road.profile(road.CLASSES["E"], 30.0, 0.5, 30.0, 1.0 / T, seed=2)
    u0 = np.zeros((2, 6))
    u0[:, 2] = 5000.0
    exc = loads.with_harmonics(loads.excitation(u0), *road.wheel_force_harmonics(prof, k, c))
    z = {}
    for name, dt in (("lsrt2", 1e-3), ("lsrt2", 2.5e-4), ("radau", 1e-3)):
        p = Problem(model, exc, 0.0, dt)
        out = solve(p, Options(n_samples=int(round(T / dt)) + 1, method=name), equilibrium(p).r)
        z[(name, dt)] = np.asarray(out["wheel_centre_displacement"])[::int(round(1e-3 / dt)), 0, 2]
        if (name, dt) == ("lsrt2", 1e-3):
            t = np.arange(len(z[(name, dt)])) * dt
            tyre = list(model.topology.bushing_names).index("tyre_left")
            on_road = (5000.0 + k * prof.height(t)[:, 0] + c * prof.rate(t)[:, 0]
                       - np.asarray(out["bushing_force"])[:, tyre, 2])
    assert 0.02 < np.mean(on_road < 0) < 0.3                     # the wheel leaves the road
    ref = z[("radau", 1e-3)]
    span = np.ptp(ref)
    e1, e2 = (np.abs(z[("lsrt2", dt)] - ref).max() for dt in (1e-3, 2.5e-4))
    assert e1 < 1e-3 * span and e2 < 1e-4 * span and e1 / e2 > 10, (e1, e2, span)


def test_sprung_body_rests_in_the_static_state_of_the_held_axle():
    """The toy axle under 5 kN per wheel with tyres and a sprung body: its
    static state is the plain axle's (to 1e-6 m, rad: the guide's held rate
    is finite), and from it, at rest, every generalised force vanishes (the
    guide carries the held force as a constant) - a run starts in
    equilibrium - while the guide is free in heave and roll."""
    import jax.numpy as jnp
    from kernels import dynamics, statics
    from kernels.names import SPRUNG_BODY_FREE
    from sweep.axle.builder import load_model_file, model_from_config
    cfg = load_model_file("configs/model/toy_trailing_arm.yaml")
    plain = model_from_config(cfg)
    cfg.update(tyres={"rate": 250e3, "damping": 100.0}, sprung_body={"mass_per_wheel": 420.0})
    sprung = model_from_config(cfg)
    u = jnp.zeros((2, 6)).at[:, 2].set(5000.0)
    r0 = statics.equilibrium(plain, u).r
    st = statics.equilibrium(sprung, u)
    assert bool(st.converged)
    n = plain.topology.n_bodies
    np.testing.assert_allclose(st.r[:n], r0, atol=1e-6)
    rest = statics.at_rest(sprung, st.r)
    q = dynamics.q_fn(rest, st.r, jnp.zeros_like(st.r), u)
    assert float(jnp.max(jnp.abs(q))) < 1e-6
    g = statics.guide_row(sprung.topology)
    free = list(SPRUNG_BODY_FREE)
    np.testing.assert_array_equal(np.asarray(rest.elements["bushing"]["k"][g, free]), 0.0)
    assert abs(float(rest.elements["bushing"]["preload"][g, 2])) > 100.0       # the body's weight differs from the springs' force
    # the body mounts are the toy's bushings to the chassis, now on the body
    from sweep.kinds.rough_road import body_mounts
    assert body_mounts(sprung.topology) == body_mounts(plain.topology)
