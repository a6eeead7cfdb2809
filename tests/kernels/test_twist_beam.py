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
from tests.conftest import load_model_cfg
from kernels import kc, metrics
from kernels.model import build_model
from sweep.axle.builder import build_tables
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


