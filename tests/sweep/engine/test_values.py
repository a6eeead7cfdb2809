"""A compiled chunk runner is keyed on structure, never on values
(sweep.engine.values): a changed wheel load, load-step time, bushing rate,
mass or hardpoint leaves the trace-cache key unchanged, and the program
compiled for the first model, reading the changed values at run time, gives
the numbers of an independent program compiled with the changed values
folded in (the ``lifted=False`` runner of the changed model) - the
oracle is another compilation, not the same program twice: in
test_values_numbers.py, the slow tier; here the keys and the lifting)."""
import numpy as np
import pytest

from sweep.engine import values
from sweep.kinds import kind_of
from tests.jobs import cfg_of

TOY_STEP = ("model=toy_trailing_arm", "loadcase.t_start=4.97", "loadcase.t_end=5.03", "integrator.backend=xla")
TOY_KC = ("model=toy_trailing_arm", "loadcase=kc_wheel_travel", "loadcase.steps=5")
# one changed value per entry: each keeps the key; all together are the oracle's model
CHANGES = {
    "wheel load": "loadcase.wheel_loads.left.fz=4200.0",
    "bushing rate": "model.bushing_types.pivot_bushing.stiffness=[9.0e+5,1.4e+6,6.0e+5,800.0,900.0,100.0]",
    "mass": "model.per_side.bodies.wheel.mass=23.5",
    "hardpoint": "model.hardpoints.SA=[-0.09,0.68,-0.045]",
    "spring preload": "model.per_side.p2p.spring.preload=3300.0",
}
STEP_TIME = "loadcase.changes=[{time: 5.01, duration: 0.0, left: {fx: -2500.0}, right: {fx: -2500.0}}]"


def plan_and_runner(*overrides):
    cfg = cfg_of(*overrides)
    kind = kind_of(cfg)
    plan = kind.plan(cfg)
    return plan, kind.runner(plan)


@pytest.fixture(scope="module")
def step_a():
    return plan_and_runner(*TOY_STEP)


@pytest.mark.parametrize("change", list(CHANGES) + ["step time"])
def test_a_changed_value_keeps_the_key(step_a, change):
    _, ra = step_a
    _, rb = plan_and_runner(*TOY_STEP, STEP_TIME if change == "step time" else CHANGES[change])
    assert rb.key == ra.key
    assert not np.array_equal(rb.values, ra.values)


def test_a_changed_structure_changes_the_key(step_a):
    _, ra = step_a
    # a load step off the step grid: the program splits steps (structure)
    off_grid = STEP_TIME.replace("5.01", "5.0105")
    assert plan_and_runner(*TOY_STEP, off_grid)[1].key != ra.key
    # fewer stored bushings: another output layout
    assert plan_and_runner(*TOY_STEP, "output.bushings=pivot_*")[1].key != ra.key
    # vehicle data read while tracing (anti-pitch metrics) are structure, not silently folded values
    kc_a = plan_and_runner(*TOY_KC, "+model.vehicle={axle: rear, wheelbase: 2.7, cg_height: 0.55, "
                           "front_brake_share: 0.7}")[1]
    kc_b = plan_and_runner(*TOY_KC, "+model.vehicle={axle: rear, wheelbase: 2.9, cg_height: 0.55, "
                           "front_brake_share: 0.7}")[1]
    assert kc_a.key != kc_b.key


def test_lifted_tree_round_trips_and_keeps_integers_in_the_structure():
    from kernels import loads
    from sweep.axle.builder import model_from_config
    cfg = cfg_of("model=toy_trailing_arm")
    model = model_from_config(cfg.model)
    exc = loads.excitation(np.full((2, 6), 3.0), [(1.0, 0.0, np.ones((2, 6)))])
    lift = values.Lifted((model, exc, {"radius": 0.3, "steps": 7, "name": "x"}))
    m2, e2, d2 = lift.rebuild(lift.vector)
    for a, b in zip(*(np.asarray(x) for x in (exc.base, e2.base))):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(np.asarray(m2.elements["bushing"]["k"]), np.asarray(model.elements["bushing"]["k"]))
    assert d2["steps"] == 7 and d2["name"] == "x" and float(d2["radius"]) == 0.3
    assert lift.size == lift.vector.size > 100
    # integer leaves (discrete states, index tables) are constants of the structure
    other = values.Lifted((model, exc, {"radius": 0.3, "steps": 8, "name": "x"}))
    from sweep.core.tracecache import fingerprint
    assert fingerprint(other.structure()) != fingerprint(lift.structure())
    moved = values.Lifted((model, exc._replace(base=exc.base + 1.0), {"radius": 0.4, "steps": 7, "name": "x"}))
    assert fingerprint(moved.structure()) == fingerprint(lift.structure())


def test_the_generated_code_is_keyed_on_the_pattern_of_its_values():
    """The generated C reads the values at run time and compiles in only
    which of them are 0 or +-1 (sweep.codegen.emit.shared_pattern): a
    changed wheel load, rate, mass, hardpoint or preload keeps its key (the
    built library is reused), a rate that becomes 0 (a direction removed) is
    another pattern and another library; the job's key is the structure's
    either way."""
    gen = ("integrator.backend=generated",)
    _, ra = plan_and_runner(*TOY_STEP, *gen)
    _, rb = plan_and_runner(*TOY_STEP, *gen, *CHANGES.values(), STEP_TIME)
    _, rc = plan_and_runner(*TOY_STEP, *gen, "model.bushing_types.pivot_bushing.stiffness="
                            "[8.0e+5,1.5e+6,6.0e+5,800.0,800.0,0.0]")
    assert ra.key == rb.key == rc.key
    assert ra.fn.fold is not None and not np.array_equal(ra.values, rb.values)
    assert ra.fn.values_key and ra.fn.values_key == rb.fn.values_key
    assert rc.fn.values_key != ra.fn.values_key


def test_the_geometry_derivative_of_a_hardpoint_equals_central_differences_of_the_build():
    """differentiable_values (what makes hardpoints tuning variables): the
    forward-mode tangent of the lifted model values along a hardpoint
    offset equals a second-order central difference of two rebuilt models
    (numpy, written here), and is not zero - the cheap fast-tier check of
    the build's derivative; the whole chain through the K&C metrics:
    tests/sweep/tune/test_hardpoint_gradients.py (slow)."""
    import jax
    import jax.numpy as jnp
    from sweep.axle.builder import model_from_config
    from sweep.axle.params import build_parameters
    cfg = cfg_of("model=toy_trailing_arm")
    model = model_from_config(cfg.model)
    pset = build_parameters({"h": {"target": "hardpoint", "points": ["PR"], "axis": "z",
                                   "bounds": [-0.01, 0.01]}}, model)
    pv = values.PerVariant(cfg.model, pset, lambda m: m, values.Lifted(model))
    fn = values.differentiable_values(pv, 1)
    theta = jnp.array([0.002])
    _, tangent = jax.jvp(fn, (theta,), (jnp.ones(1),))
    h = 1e-4
    fd = (pv.row(np.array([0.002 + h])) - pv.row(np.array([0.002 - h]))) / (2 * h)
    tangent = np.asarray(tangent)
    assert np.max(np.abs(fd)) > 1.0                       # the geometry really depends on the point
    np.testing.assert_allclose(tangent, fd, rtol=1e-5, atol=1e-4)      # atol: round-off of large values / h
