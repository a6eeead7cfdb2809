"""The MacPherson strut front axle (configs/model/macpherson.yaml), the checks
that need no equilibrium: counts and topology, kinematic determinacy of each
wheel carrier (the rank of an ideal-joint constraint Jacobian assembled from
the plain tables, tests/kernels/test_axle_kinematics.py), and the strut's
sliding joint doing what it claims - free travel along the strut axis,
guidance across it and in tilt - with the forces predicted here from the
guides' rates and positions by numpy and scipy's rotations.

The design state, the K&C figures against published ranges and the
kinematics against a rigid-joint loop closure need the equilibrium solver:
tests/kernels/test_macpherson_axle.py (slow tier)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import kernels  # noqa: F401  (float64)
from kernels import metrics
from kernels.model import build_model
from sweep.axle.builder import build_tables
from tests.conftest import load_model_cfg
from tests.kernels.test_axle_kinematics import carrier_freedoms
from tests.kernels.test_multilink import _bodies_of


@pytest.fixture(scope="module")
def tables():
    return build_tables(load_model_cfg("macpherson"))


@pytest.fixture(scope="module")
def model(tables):
    return build_model(tables)


def test_counts_and_topology(model):
    topo = model.topology
    assert (topo.n_bodies, topo.n_dof) == (14, 84)
    assert (len(topo.bushing_names), len(topo.p2p_names)) == (29, 8)
    for s in ("left", "right"):
        # the strut: the piston rod hangs in the top mount and slides in the
        # tube, which is part of the wheel carrier (clamped to the knuckle)
        assert _bodies_of(topo, f"top_mount_{s}") == (f"piston_rod_{s}", "chassis")
        for guide in ("piston_guide", "rod_guide"):
            assert _bodies_of(topo, f"{guide}_{s}") == (f"piston_rod_{s}", f"wheel_carrier_{s}")
        # spring, damper and both stops act between rod and carrier
        for p in ("main_spring", "damper", "bump_stop", "rebound_stop"):
            i = topo.p2p_names.index(f"{p}_{s}")
            assert [topo.body_names[b] for b in topo.p2p_bodies[i]] == [f"piston_rod_{s}", f"wheel_carrier_{s}"]
        # the carrier is guided by the lower arm's ball joint, the strut and the tie rod only
        on_carrier = {n[: -len(s) - 1] for n in topo.bushing_names
                      if f"wheel_carrier_{s}" in _bodies_of(topo, n)}
        assert on_carrier == {"wheel_bearing_outer", "wheel_bearing_inner", "lower_ball_joint",
                              "piston_guide", "rod_guide", "tie_rod_outer", "drop_link_upper"}
    on_body = {b for n in topo.bushing_names if "chassis" in _bodies_of(topo, n)
               for b in _bodies_of(topo, n)} - {"chassis"}
    assert on_body == {f"{b}_{s}" for b in ("lower_arm", "tie_rod", "piston_rod", "anti_roll_bar_half")
                       for s in ("left", "right")}


def test_each_carrier_has_one_freedom_with_the_rack_held_and_two_with_it_free(tables):
    for side in ("left", "right"):
        assert carrier_freedoms(tables, f"wheel_carrier_{side}") == 1, side
        assert carrier_freedoms(tables, f"wheel_carrier_{side}", {f"tie_rod_inner_{side}": [0, 1, 0]}) == 2, side
        assert carrier_freedoms(tables, f"wheel_{side}") == 2, side     # travel + spin


def test_mobility_check_sees_a_strut_without_its_top_mount(tables):
    """The oracle can fail: without the top mount the rod is loose, and so is
    the carrier's tilt about the lower ball joint (two more freedoms)."""
    cut = dict(tables, bushings=[e for e in tables["bushings"] if not e["name"].startswith("top_mount")])
    assert carrier_freedoms(cut, "wheel_carrier_left") == 3


def _guides(model, side="left"):
    topo = model.topology
    tabs = topo.tables
    markers = {mk["index"]: mk for mk in tabs["markers"]}
    rows = [topo.bushing_names.index(f"{g}_{side}") for g in ("piston_guide", "rod_guide")]
    pts = np.array([markers[tabs["bushings"][i]["marker_1"]]["position"] for i in rows], float)
    k = np.array([tabs["bushings"][i]["stiffness"] for i in rows], float)
    return rows, pts, k


def test_strut_slides_freely_along_its_axis_and_is_guided_across_it(model):
    """Piston rod moved against the carrier (design geometry, everything else
    in place): along the strut axis the two guides push back with nothing;
    across it with their radial rates, k (2 guides) d; tilted by theta about
    an axis normal to the strut through the guides' midpoint m, the guides
    push back as a couple, each with k theta (n x (p - m)). Expected forces
    from the guides' tables and scipy's rotation, not from the kernels."""
    topo = model.topology
    cfg = load_model_cfg("macpherson")
    hp = {k: np.asarray(v, float) for k, v in cfg["hardpoints"].items()}
    u = (hp["T"] - hp["S"]) / np.linalg.norm(hp["T"] - hp["S"])
    rod = topo.body_names.index("piston_rod_left")
    rows, pts, k = _guides(model)
    assert np.all(k[:, 2] == 0.0) and np.all(k[:, 0] == k[:, 1])
    kr = k[0, 0]
    force = jax.jit(lambda r: metrics.bushing_forces(model, r, jnp.zeros_like(r)))
    r0 = np.asarray(model.r_design)
    base = np.asarray(force(jnp.asarray(r0)))[rows]

    def moved(dx=np.zeros(3), rotvec=np.zeros(3)):
        r = r0.copy()
        r[rod, :3] += dx
        R = Rotation.from_rotvec(rotvec) * Rotation.from_euler("ZYX", r0[rod, 3:])
        r[rod, 3:] = R.as_euler("ZYX")
        return np.asarray(force(jnp.asarray(r)))[rows] - base

    along = moved(dx=0.010 * u)                       # 10 mm of strut travel
    assert np.max(np.abs(along)) < 1e-6, along
    n = np.cross(u, [1.0, 0.0, 0.0])
    n /= np.linalg.norm(n)
    across = moved(dx=1e-4 * n)                        # 0.1 mm across
    np.testing.assert_allclose(across[:, :3], -kr * 1e-4 * np.tile(n, (2, 1)), rtol=1e-6, atol=1e-6)
    # tilt by theta about an axis n through the guides' midpoint m: the rod's
    # centre of mass c turns about m as well
    theta = 1e-5
    c, m = r0[rod, :3], pts.mean(0)
    R = Rotation.from_rotvec(theta * n).as_matrix()
    tilt = moved(dx=R @ (c - m) - (c - m), rotvec=theta * n)
    expected = np.array([-kr * (R @ (p - m) - (p - m)) for p in pts])
    np.testing.assert_allclose(tilt[:, :3], expected, rtol=1e-4, atol=1e-6)
    # the two guides' forces are a couple: the strut takes the tilt as a moment
    assert np.linalg.norm(tilt[:, :3].sum(0)) < 1e-3 * np.linalg.norm(tilt[0, :3])
    assert np.linalg.norm(tilt[0, :3]) > 10.0         # and not a zero couple
