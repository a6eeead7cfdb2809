"""The twist-beam axle (configs/model/twist_beam.yaml) as a chassis engineer
checks it: the mechanism (one freedom, parallel travel, with the cross
member rigid; roll only by its elasticity), the design state (ride height
under the design load, stops clear, static alignment), and what the
flexible cross member does (it carries roll, not parallel travel)."""
import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import kernels  # noqa: F401  (float64)
from conftest import load_model_cfg
from kernels import kc, metrics
from kernels.model import build_model
from sweep.model_builder import build_tables
from tests.kernels.test_axle_kinematics import _stop_clearances, carrier_freedoms

DEG = 180.0 / np.pi


@pytest.fixture(scope="module")
def cfg():
    return load_model_cfg("twist_beam")


@pytest.fixture(scope="module")
def model(cfg):
    return build_model(build_tables(cfg))


def test_layout_and_modes(model):
    topo = model.topology
    assert topo.body_names[:5] == ("arm_left", "wheel_left", "arm_right", "wheel_right", "cross_member")
    assert len(topo.modal_slots) == 2                         # 12 elastic modes
    f = np.sqrt(np.asarray(model.flex["k"]).reshape(-1)) / (2 * np.pi)
    # the free-free cross member: first elastic mode in the range of the seed's axle body (66-90 Hz)
    assert 50.0 < f[0] < 100.0, f[:3]


def test_one_mechanism_freedom_with_the_cross_member_rigid(cfg):
    """Joints as ideal constraints (the tables; the cross member as a rigid
    body): the pivots are spherical joints, so the arms, welded to the cross
    member, turn together about the line through both pivots - one freedom
    (parallel travel); each wheel adds its spin. Without the cross member
    each arm would have three."""
    tables = build_tables(cfg)
    for side in ("left", "right"):
        assert carrier_freedoms(tables, f"arm_{side}") == 1, side
        assert carrier_freedoms(tables, f"wheel_{side}") == 2, side
    loose = copy.deepcopy(tables)
    loose["bushings"] = [b for b in loose["bushings"] if not b["name"].startswith("weld")]
    assert carrier_freedoms(loose, "arm_left") == 3


@pytest.mark.slow
def test_design_state_ride_height_stops_and_alignment(cfg, model):
    al = cfg["alignment"]
    # the wheel centres held at design height need the design wheel load
    # (1e-3: 3 N, 0.1 mm at the 30 N/mm wheel rate), so the static state
    # under that load is the design position
    eq = jax.jit(kc.design_position)(model)
    assert bool(eq.converged)
    np.testing.assert_allclose(np.asarray(eq.fz), al["wheel_load"], rtol=1e-3)
    wc = np.asarray(metrics.wheel_centre_position(model, eq.r))
    np.testing.assert_allclose(wc[:, 2], np.asarray(kc.design_heights(model)), atol=1e-9)
    clear = _stop_clearances(model, eq.r)
    assert len(clear) == 4
    for k, v in clear.items():
        assert v >= 0.020, (k, v)
    toe, camber = (np.asarray(a) * DEG for a in metrics.toe_camber(model, eq.r))
    np.testing.assert_allclose(toe, 0.10, atol=0.005)
    np.testing.assert_allclose(camber, -1.20, atol=0.005)


@pytest.mark.slow
def test_cross_member_carries_roll_not_parallel_travel(model):
    """Scaling the cross member's stiffness (E and G together, the modal
    stiffness) changes the roll wheel rate in proportion and leaves the
    parallel wheel rate all but unchanged: in parallel travel the beam turns
    as a whole about the pivot line, in opposite travel it twists."""
    from sweep.params import build_parameters
    ps = build_parameters({"beam": {"target": "flexible.stiffness", "elements": "cross_member",
                                    "bounds": [0.1, 10.0]}}, model)

    @jax.jit
    def rates(theta):
        mdl = ps.apply(model, theta)
        k = kc.kc_metrics(mdl, kc.design_position(mdl), with_geometry=False)
        return jnp.stack([k["wheel_rate"][0], k["roll_wheel_rate"][0]])
    r = np.array([np.asarray(rates(jnp.array([s]))) for s in (0.5, 1.0, 2.0)])   # N/m
    parallel, roll = r[:, 0], r[:, 1]
    assert np.ptp(parallel) < 0.01 * parallel[1]
    d1, d2 = roll[1] - roll[0], roll[2] - roll[1]
    assert d1 > 1.0                                          # N/mm per halving: the beam is engaged
    np.testing.assert_allclose(d2, 2 * d1, rtol=0.05)        # linear in the stiffness factor
