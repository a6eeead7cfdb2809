"""State events (kernels.integrate "State events"; switching laws of
kernels.forces / kernels.model): root functions located by re-stepping,
switch, restart - checked against analytic solutions.

Oracles: a mass falling onto a linear stop with a clearance (free fall, then
a harmonic half-swing about the compressed equilibrium, lift-off, free
flight: closed form, contact at t_c = sqrt(2 d / g)); the Coulomb
oscillator (a spring-mass with dry friction from rest: half-swings about
+-F_c / k with the amplitude falling by 2 F_c / k each, stuck for good once
|k x| <= F_c at a reversal). The fast tier uses a one-coordinate analytic
system; the model-level rigs (one body, P2P stop / spring / damper with
friction, the same oracles) and the Radau reference are validations.
"""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import kernels  # noqa: F401
from kernels import build_model, forces, integrate, loads
from kernels.dynamics import Linearisation
from kernels.lsrt2 import LSRT2
from kernels.radau import RADAU
from kernels.ros34pw2 import ROS34PW2
from kernels.system import model_system

G, D, K, M = 9.81, 0.05, 1.0e4, 1.0     # gravity, clearance [m], stop rate [N/m], mass [kg]
T_CONTACT = math.sqrt(2 * D / G)


def bounce(t):
    """Height [m] of the mass dropped from rest at 0 onto the stop at -D."""
    vc = -G * T_CONTACT
    w = math.sqrt(K / M)
    A, B = M * G / K, vc / w
    Tc = (2 * math.pi + 2 * math.atan(B / A)) / w      # time in contact
    tt = t % (2 * T_CONTACT + Tc)
    if tt < T_CONTACT:
        return -0.5 * G * tt ** 2
    if tt < T_CONTACT + Tc:
        tau = tt - T_CONTACT
        return -D - A + A * math.cos(w * tau) + B * math.sin(w * tau)
    tau = tt - T_CONTACT - Tc
    return -D - vc * tau - 0.5 * G * tau ** 2


def rig(stop_law=None, friction=None, gravity=-G, k_spring=0.0, k_stop=K, clearance=D, mass=M):
    """One body guided vertically (a bushing free along z) above a ground
    marker 1 m below; P2P elements between them: a bump stop (linear curve
    ``k_stop`` N/m, ``clearance``, ``law``), a spring, a damper with
    ``friction`` only."""
    p2p = []
    if k_stop:
        stop = {"index": 1, "name": "bump_stop", "marker_1": 3, "marker_2": 2, "kind": "bump_stop",
                "clearance": clearance,
                "curve": {"x": [0.0, 1.0], "y": [0.0, k_stop], "interpolation": "linear"}}
        if stop_law:
            stop["law"] = stop_law
        p2p.append(stop)
    if k_spring:
        p2p.append({"index": 2, "name": "spring", "marker_1": 3, "marker_2": 2, "kind": "spring",
                    "stiffness": k_spring})
    if friction:
        p2p.append({"index": 3, "name": "damper", "marker_1": 3, "marker_2": 2, "kind": "damper",
                    "damping": 0.0, "friction": friction})
    return {"name": "rig", "gravity": [0, 0, gravity],
            "bodies": [{"index": 1, "name": "mass", "mass": mass, "inertia": np.eye(3).tolist(),
                        "position": [0, 0, 0]}],
            "markers": [{"index": 1, "name": "g0", "body": 0, "position": [0, 0, 0]},
                        {"index": 2, "name": "b0", "body": 1, "position": [0, 0, 0]},
                        {"index": 3, "name": "g1", "body": 0, "position": [0, 0, -1.0]}],
            "bushings": [{"index": 1, "name": "guide", "marker_1": 1, "marker_2": 2,
                          "stiffness": [1e6, 1e6, 0, 1e4, 1e4, 1e4], "damping": [0] * 6}],
            "p2p": p2p, "wheels": {"left": 1, "right": 1}}


def element_system(tables, switching=True):
    """The rig's P2P elements (built by the model builder from ``tables``,
    :func:`rig`) on one coordinate: x = r[0] the height of the mass [m]
    (element length L = 1 + x, dL/dt = v[0]), r[1] the time (v = 1). The
    element laws, root functions and switches are kernels.forces' own
    (``p2p_law``, ``p2p_root``, ``p2p_switch``, ``p2p_mode0``); z = (contact,
    slip, anchor, time of the last switch). ``switching=False``: the
    elements with their built state (a stop by the sign of its penetration,
    no friction force) and no events."""
    model = build_model(tables)
    prm = model.elements["p2p"]
    ev = np.array([e != "" for e in model.topology.p2p_events])
    is_contact = np.array([e == "contact" for e in model.topology.p2p_events])
    g = float(model.gravity[2])
    mass = float(model.mass[0])

    def with_state(z):
        return {**prm, "contact": z[0], "slip": z[1], "anchor": z[2]}

    def make(z):
        def q(r, v, u):
            T = jax.vmap(forces.p2p_law)(with_state(z), jnp.full(ev.size, 1.0 + r[0]), jnp.full(ev.size, v[0]))
            return jnp.zeros(6, r.dtype).at[0].set(g - jnp.sum(T) / mass)

        def lin(r, v, u):
            return Linearisation(q(r, v, u), jax.jacfwd(q, 0)(r, v, u), jax.jacfwd(q, 1)(r, v, u),
                                 jnp.zeros((6, 1)), jnp.eye(6)[None])
        return integrate.System(linearise=lin, q=q, rates=lambda r, v: v, u=lambda t: jnp.zeros(1),
                                du=lambda t: jnp.zeros(1))
    built = (model.elements["p2p"]["contact"], model.elements["p2p"]["slip"], model.elements["p2p"]["anchor"], jnp.zeros(()))
    if not switching or not ev.any():
        return make(built)

    def lengths(r, v):
        return jnp.full(ev.size, 1.0 + r[0]), jnp.full(ev.size, v[0])

    def roots(r, v, z, t=None):
        L, Ld = lengths(r, v)
        return jax.vmap(forces.p2p_root)(with_state(z), L, Ld, is_contact)[ev]

    def switch(r, v, z, fired, t=None):
        L, Ld = lengths(r, v)
        fire = jnp.zeros(ev.size, bool).at[np.nonzero(ev)[0]].set(fired)
        c, sl, an = jax.vmap(forces.p2p_switch)(with_state(z), L, Ld, is_contact, fire)
        return (c, sl, an, jnp.where(jnp.any(fired), r[1], z[3]))

    def state0(r, v, t=None):
        L, Ld = lengths(r, v)
        c, sl, an = jax.vmap(forces.p2p_mode0)(with_state(built), L, Ld, is_contact)
        return (jnp.where(ev, c, built[0]), jnp.where(ev, sl, built[1]), jnp.where(ev, an, built[2]),
                jnp.asarray(-1.0))
    return make(built)._replace(event_state0=state0, event_roots=roots, event_switch=switch, bind=make)


def drop_system(clearance=D, switching=True):
    """The mass dropped onto the rig's bump stop (linear curve, ``clearance``)."""
    return element_system(rig("switching", clearance=clearance), switching)


W_C, F_C, K_C, X0 = 10.0, 10.0, 100.0, 0.55      # rad/s, N, N/m, m (mass 1 kg)


def coulomb(t):
    """Coulomb oscillator from rest at X0: half-swings of pi / w about
    a sign(x) (a = F_c / k) until |k x| <= F_c at a reversal."""
    a, x = F_C / K_C, X0
    while abs(K_C * x) > F_C:
        centre = a * np.sign(x)
        if t < math.pi / W_C:
            return centre + (x - centre) * math.cos(W_C * t)
        x, t = 2 * centre - x, t - math.pi / W_C
    return x


R0 = jnp.zeros(6)
V0 = jnp.zeros(6).at[1].set(1.0)
N_STEPS = 2000     # one program per method: every step size runs the same number of steps


def bounce_errors(prog, coordinate=2):
    """Largest error of the rig's height (state ``coordinate``) against
    :func:`bounce` over 0-0.5 s for h = 1, 0.5, 0.25 ms; ``prog(h)`` runs
    N_STEPS steps of h (one compiled program for the three)."""
    errs = []
    for h in (1e-3, 5e-4, 2.5e-4):
        tr = prog(h)
        t = np.asarray(tr.t)
        keep = t <= 0.5 + 1e-12
        x = np.asarray(tr.outputs["r"][:, coordinate])[keep]
        errs.append(np.max(np.abs(x - np.array([bounce(tt) for tt in t[keep]]))))
    return errs


@pytest.fixture(scope="module")
def run():
    progs = {}

    def run(method, system, h):
        key = (method.name, system)
        if key not in progs:
            progs[key] = jax.jit(lambda hh: method.simulate(system, R0, V0, 0.0, hh, N_STEPS + 1))
        return progs[key](h)
    return run


SWITCHING = drop_system()


@pytest.mark.parametrize("method", [LSRT2, ROS34PW2], ids=lambda m: m.name)
def test_contact_time_is_located_to_1e_9_s(run, method):
    """The first contact of the dropped mass (t_c = sqrt(2 d / g), not on the
    step grid) is where the switch happened: the time recorded at the switch
    (state coordinate 1 = t) within 1e-9 s; with a step of 1 ms the free
    fall (a parabola) is exact for both methods, so the located time is
    limited only by the bracket (EVENT_TOL)."""
    tr = run(method, SWITCHING, 1e-3)
    # the record of the first switch: run only to just after it
    tr_first = jax.jit(lambda: method.simulate(SWITCHING, R0, V0, 0.0, 1e-3, 111))()
    assert int(tr_first.n_events) == 1
    assert abs(float(tr_first.event_state[3]) - T_CONTACT) < 1e-9
    assert not bool(tr.event_overflow)


@pytest.mark.parametrize("method, ratio", [(LSRT2, 3.5), (ROS34PW2, 6.5)], ids=["lsrt2", "ros34pw2"])
def test_order_is_kept_through_contact_and_lift_off(run, method, ratio):
    """Over two bounces (4 events, none on the step grid) the largest error
    against the closed form falls by >= 2^p - 0.5 per halving of the step
    (LSRT2 p = 2, ROS34PW2 p = 3): no step straddles the kink of the stop
    law. The same law evaluated by sign (no events) loses it (measured:
    ratios 14 then 1.2 for LSRT2, 2.3 for ROS34PW2)."""
    errs = bounce_errors(lambda h: run(method, SWITCHING, h), coordinate=0)
    assert errs[0] / errs[1] >= ratio and errs[1] / errs[2] >= ratio, errs
    smooth = drop_system(switching=False)
    e_smooth = bounce_errors(lambda h: run(method, smooth, h), coordinate=0)
    assert min(e_smooth[0] / e_smooth[1], e_smooth[1] / e_smooth[2]) < ratio or e_smooth[2] > 5 * errs[2], e_smooth


def test_lanes_with_and_without_events_are_independent():
    """Under vmap a variant's result does not depend on whether its
    neighbours have events in the same steps (the location loop runs for the
    batch; lanes without an event keep their own step): three drop heights,
    one too high to reach the stop within the run, each lane equal to its
    single run."""
    heights = jnp.asarray([0.0, 0.03, 1.0])

    def one(x0):
        return LSRT2.simulate(SWITCHING, R0.at[0].set(x0), V0, 0.0, 1e-3, 301)
    batch = jax.jit(jax.vmap(one))(heights)
    single = jax.jit(one)
    for i in range(3):
        s = single(heights[i])
        np.testing.assert_allclose(np.asarray(batch.outputs["r"][i]), np.asarray(s.outputs["r"]),
                                   rtol=0, atol=1e-13)
        assert int(batch.n_events[i]) == int(s.n_events)
    assert int(batch.n_events[2]) == 0 and int(batch.n_events[0]) > 0 and int(batch.n_events[1]) > 0


def friction_system(stiffness=1e8, damping=2e4, law="switching"):
    return element_system(rig(k_stop=0, gravity=0.0, k_spring=K_C, friction={
        "force": F_C, "stiffness": stiffness, "damping": damping, "law": law}))


def test_coulomb_friction_stick_slip_on_one_coordinate():
    """The damper's switching friction law (kernels.forces) on the spring-mass
    from rest at X0 against the Coulomb oscillator: 6 events (start to
    slide, two reversals - stick, slide back - and the final stick), stuck
    at 0.05 m for good, within 5e-5 m of the closed form throughout (the
    elastic stick of 1e8 N/m lags each reversal: 2.2e-5 m measured)."""
    system = friction_system()
    r0 = R0.at[0].set(X0)
    tr = jax.jit(lambda: LSRT2.simulate(system, r0, V0, 0.0, 1e-3, 1501))()
    t, x = np.asarray(tr.t), np.asarray(tr.outputs["r"][:, 0])
    assert int(tr.n_events) == 6
    assert np.max(np.abs(x - np.array([coulomb(tt) for tt in t]))) < 5e-5
    assert abs(x[-1] - 0.05) < 1e-6 and float(tr.event_state[1][2]) == 0.0     # stuck at the end
    # the regularised law: no events, the same slides within its viscous band
    reg = friction_system(law="regularised")
    assert reg.event_roots is None
    tr = jax.jit(lambda: LSRT2.simulate(reg, r0, V0, 0.0, 1e-3, 1001))()
    x = np.asarray(tr.outputs["r"][:900, 0])
    assert np.max(np.abs(x - np.array([coulomb(tt) for tt in np.asarray(tr.t)[:900]]))) < 5e-3


def test_a_chattering_root_flags_the_variant():
    """A switch that does not restore the mode (the root stays positive)
    would locate forever: after EVENT_MAX_ITER iterations in one step the
    variant gets a NaN state and ``event_overflow`` (a sweep flags it)."""
    broken = SWITCHING._replace(event_switch=lambda r, v, z, fired, t: z)   # the mode never changes
    tr = jax.jit(lambda: LSRT2.simulate(broken, R0, V0, 0.0, 1e-3, 151))()
    assert bool(tr.event_overflow)
    assert not np.all(np.isfinite(np.asarray(tr.outputs["r"])))
    ok = jax.jit(lambda: LSRT2.simulate(SWITCHING, R0, V0, 0.0, 1e-3, 151))()
    assert not bool(ok.event_overflow) and np.all(np.isfinite(np.asarray(ok.outputs["r"])))


# --------------------------------------------------------------------------- model-level rigs

NO_LOAD = loads.excitation(np.zeros((2, 6)))


def test_zero_friction_force_has_no_law():
    """kernels.forces with F_c = 0 (switching law): no tension in any mode
    (stuck with a loaded stick spring included) and a root function that
    never fires (was |stick| - 0 >= 0: fired at once, chattered)."""
    from kernels import forces
    prm = {"friction": jnp.asarray(0.0), "friction_k": jnp.asarray(1e6), "friction_c": jnp.asarray(2e3),
           "friction_v": jnp.asarray(0.0), "anchor": jnp.asarray(0.5), "contact": jnp.asarray(-1.0),
           "engage": jnp.asarray(0.0), "engage_sign": jnp.asarray(0.0)}
    for slip in (0.0, 1.0, -1.0):
        p = dict(prm, slip=jnp.asarray(slip))
        for L, Ldot in ((0.5, 0.0), (0.501, 0.0), (0.499, -0.2), (0.5, 0.3)):
            assert float(forces.friction_tension(p, L, Ldot)) == 0.0
            assert float(forces.p2p_root(p, L, Ldot, False)) < 0.0
    # with F_c > 0 the same stuck state does fire once its stick carries F_c
    p = dict(prm, slip=jnp.asarray(0.0), friction=jnp.asarray(100.0))
    assert float(forces.p2p_root(p, 0.5002, 0.0, False)) > 0.0 > float(forces.p2p_root(p, 0.50005, 0.0, False))


def test_switching_law_options_are_validated():
    """Bad switching-law input names the field and value."""
    with pytest.raises(kernels.ModelError, match=r"p2p\[0\] 'bump_stop'.law = 'sticky'"):
        build_model(rig("sticky"))
    bad = rig(k_stop=0, friction={"force": -1.0})
    with pytest.raises(kernels.ModelError, match=r"friction.force = -1.0 must be >= 0"):
        build_model(bad)
    bad = rig(k_stop=0, friction={"force": 1.0, "stiction": 2.0})
    with pytest.raises(kernels.ModelError, match="unknown key 'stiction'"):
        build_model(bad)
    bad = rig(k_stop=0, friction={"force": 1.0, "law": "viscous"})
    with pytest.raises(kernels.ModelError, match="friction.law = 'viscous'"):
        build_model(bad)
    bad = rig(k_stop=0, friction={"force": 1.0})
    bad["p2p"][0]["kind"] = "spring"
    with pytest.raises(kernels.ModelError, match="only a damper has friction"):
        build_model(bad)


# --------------------------------------------------------------------------- bushing play

def test_bushing_play_is_a_dead_band_with_roots_at_its_edges():
    """kernels.forces: a bushing direction with play p sees no elastic
    deflection within +-p (built state: by the sign of e, the smooth law;
    switching modes: 0 free, +-1 engaged and continued linearly through
    the band edge); its root functions cross zero at the band edges and
    the switch engages on the side of e, or frees."""
    e = jnp.array([0.5, -0.5, 2.0, -2.0, 1.0, 0.3])
    play = jnp.array([1.0, 1.0, 1.0, 1.0, 1.0, 0.0])      # rz: no play
    auto = {"play": play, "play_mode": jnp.full(6, forces.PLAY_AUTO)}
    np.testing.assert_allclose(forces.play_deflection(auto, e), [0.0, 0.0, 1.0, -1.0, 0.0, 0.3])
    modes = jnp.array([0.0, 1.0, 1.0, -1.0, -1.0, 0.0])
    sw = {"play": play, "play_mode": modes}
    np.testing.assert_allclose(forces.play_deflection(sw, e), [0.0, -1.5, 1.0, -1.0, 2.0, 0.3])
    phi = np.asarray(forces.bushing_play_root(sw, e))
    # free inside the band (< 0); engaged +1 at -0.5: the mode no longer fits (> 0);
    # engaged on the right side (< 0); -1 at 1.0 crossed back (> 0); no play: -1
    np.testing.assert_allclose(phi, [-0.5, 1.5, -1.0, -1.0, 2.0, -1.0])
    fired = jnp.asarray(phi > 0)
    np.testing.assert_allclose(forces.bushing_play_switch(sw, e, fired), [0.0, 0.0, 1.0, -1.0, 0.0, 0.0])
    np.testing.assert_allclose(forces.bushing_play_mode0(sw, e), [0.0, 0.0, 1.0, -1.0, 0.0, 1.0])


