"""An added element group with state events of its own
(``kernels.forces.Events``): a gap spring - a linear spring along the line
between its markers that pushes only once the gap is closed, switching
contact as a state event - written here, outside ``kernels/``, with its
table, structure and switching law declared on its ``ElementGroup``.

Oracles: the mass dropped onto it is the closed-form bounce of
``tests/kernels/test_state_events.py`` (free fall, contact at
t_c = sqrt(2 d / g), a harmonic half-swing, lift-off); and the same drop
onto the built-in P2P bump stop with the switching law and the same linear
rate (the same physics through another law's code) agrees to round-off.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import kernels  # noqa: F401  (float64)
from kernels import build_model, forces
from kernels.lsrt2 import LSRT2
from kernels.rotations import mtv
from kernels.system import model_system
from tests.kernels.test_state_events import D, K, NO_LOAD, T_CONTACT, bounce, rig

# the slow tier: one compile of a registered group's event location (14 s on a slow
# day); the built-in state events' closed forms stay in the fast tier (test_state_events)
pytestmark = pytest.mark.slow


def _ends(prm, x1, x2):
    pm1, _, p1, R1, _ = forces.marker_kinematics(x1, prm["pos1"])
    pm2, _, p2, R2, _ = forces.marker_kinematics(x2, prm["pos2"])
    return pm1, p1, R1, pm2, p2, R2


def _penetration(prm, x1, x2):
    pm1, _, _, pm2, _, _ = _ends(prm, x1, x2)
    return prm["length"] - prm["gap"] - jnp.linalg.norm(pm2 - pm1)     # closure beyond the gap [m]


def gap_element(prm, x1, x2):
    """Push k * penetration along the line (bodies apart) in contact, none
    free: the law of the mode ``contact`` (continued through engagement)."""
    pm1, p1, R1, pm2, p2, R2 = _ends(prm, x1, x2)
    d = pm2 - pm1
    e = d / jnp.linalg.norm(d)
    push = prm["k"] * jnp.where(prm["contact"] > 0.5, _penetration(prm, x1, x2), 0.0)
    F1, F2 = -push * e, push * e
    return (jnp.concatenate([F1, mtv(R1, jnp.cross(pm1 - p1, F1))]),
            jnp.concatenate([F2, mtv(R2, jnp.cross(pm2 - p2, F2))]))


def gap_build(rows, ends):
    n = len(rows)
    return {"pos1": ends["pos1"], "pos2": ends["pos2"],
            "length": np.linalg.norm(ends["point2"] - ends["point1"], axis=1),
            "gap": np.array([float(e["gap"]) for e in rows]), "k": np.array([float(e["stiffness"]) for e in rows]),
            "contact": np.zeros(n)}


GAP_EVENTS = forces.Events(
    ("contact",), 1,
    mode0=lambda prm, x1, x2, _f: {"contact": jnp.where(_penetration(prm, x1, x2) > 0, 1.0, 0.0)},
    root=lambda prm, x1, x2, _f: jnp.where(prm["contact"] > 0.5, -1.0, 1.0)[None] * _penetration(prm, x1, x2),
    switch=lambda prm, x1, x2, _f, fired: {"contact": jnp.where(fired[0], 1.0 - prm["contact"], prm["contact"])})

GAP_SPRING = forces.ElementGroup(
    "test_gap_spring", "test_gap_springs", gap_element, build=gap_build, min_length=1e-6,
    describe=lambda rows: {"events": tuple(True for _ in rows)}, events=GAP_EVENTS)


def gap_rig():
    """The drop rig of test_state_events with the gap spring instead of the bump stop."""
    tables = rig(k_stop=0)
    tables["test_gap_springs"] = [{"index": 1, "name": "gap", "marker_1": 3, "marker_2": 2,
                                   "gap": D, "stiffness": K}]
    tables["element_groups"] = (GAP_SPRING,)
    return tables


def _drop(model, n=301):
    system = model_system(model, NO_LOAD)
    assert system.event_roots is not None
    r0 = model.r_design.reshape(-1)
    return jax.jit(lambda: LSRT2.simulate(system, r0, jnp.zeros(6), 0.0, 1e-3, n))()


@pytest.fixture(scope="module")
def gap_model():
    return build_model(gap_rig())


def test_a_registered_group_locates_its_own_events(gap_model):
    """The gap spring's contact and lift-off are located like the built-in
    stops' (2 events in 0.3 s: contact at t_c, lift-off; the next contact is at 0.34 s),
    the height follows the closed form, and the discrete state at the end
    is the group's own entry of z; the built-in switching stop of the same
    rate gives the same drop to round-off."""
    assert gap_model.topology.group_static["test_gap_spring"] == {"events": (True,)}
    tr = _drop(gap_model)
    t, z = np.asarray(tr.t), np.asarray(tr.outputs["r"][:, 2])
    assert int(tr.n_events) == 2 and not bool(tr.event_overflow)
    assert np.max(np.abs(z - np.array([bounce(tt) for tt in t]))) < 3e-5     # 1.3e-5 m measured (h = 1 ms)
    first = int(np.argmax(z < -D))
    assert t[first - 1] < T_CONTACT <= t[first]
    assert float(tr.event_state["test_gap_spring"]["contact"][0]) == 0.0      # in flight at 0.3 s
    stop = _drop(build_model(rig("switching")))
    np.testing.assert_allclose(z, np.asarray(stop.outputs["r"][:, 2]), rtol=0, atol=1e-12)
    assert int(stop.n_events) == 2


def test_without_its_events_the_group_is_a_plain_law(gap_model):
    """``state_events=False`` leaves the group's switching out (the built
    mode, free: the mass falls through the gap), as for the built-in laws."""
    system = model_system(gap_model, NO_LOAD, state_events=False)
    assert system.event_roots is None
