"""The numbers of a program compiled for one model and run on another
model's values (sweep.engine.values): equal, to round-off, to an independent
program compiled with those values folded in (the ``lifted=False`` runner
of the changed model), for the time response and K&C on the toy axle with
every kind of value changed at once. The keys: test_values.py."""
import dataclasses

import numpy as np
import pytest

from sweep.engine import values
from tests.sweep.engine.test_values import CHANGES, STEP_TIME, TOY_KC, TOY_STEP, plan_and_runner

pytestmark = pytest.mark.slow


def rel_err(a, b):
    """max |a - b| / max |b| per channel; NaN in the same places (a metric
    the model cannot define) counts as equal."""
    out = {}
    for k in b:
        x, y = np.asarray(a[k], float), np.asarray(b[k], float)
        assert np.array_equal(np.isnan(x), np.isnan(y)), k
        ok = ~np.isnan(y)
        out[k] = float(np.max(np.abs(x[ok] - y[ok]), initial=0.0) / max(np.max(np.abs(y[ok]), initial=0.0), 1e-300))
    return out


# XLA's MLIR fusion emitters, the default of the jobs users run: the tests'
# XLA_FLAGS switch them off (tests/conftest.py), and under the elemental
# emitter a program's folded constants and its run-time values round apart
# by up to 1e-11 (the stiff solve amplifying the order of the operations)
DEFAULT_EMITTERS = {"xla_cpu_use_fusion_emitters": True}


def _run(fn, rows, options=DEFAULT_EMITTERS):
    """``fn`` compiled with the XLA compiler ``options`` and run on ``rows``."""
    import jax
    return jax.device_get(fn.lower(rows).compile(dict(options))(rows))


def test_time_response_reads_changed_values_at_run_time():
    """The program of model A run on model B's values equals B's own
    program with B's values folded in: every value changed at once (both
    compiled with XLA's default fusion emitters)."""
    import jax
    from sweep.kinds import time_response as tr
    plan_a, ra = plan_and_runner(*TOY_STEP)
    plan_b, rb = plan_and_runner(*TOY_STEP, STEP_TIME, *CHANGES.values())
    assert rb.key == ra.key
    thetas = np.zeros((1, 0))
    got = _run(ra.fn, values.rows(thetas, rb.values, isinstance(ra.example, tuple)))
    c = plan_b.case
    folded = tr.make_chunk_runner(plan_b.model, plan_b.pset, dataclasses.replace(c, backend="xla"), lifted=False)
    want = _run(folded, thetas)
    assert int(got[1][0]) == int(want[1][0]) == 0          # status ok
    errs = rel_err(got[0], want[0])
    assert max(errs.values()) <= 1e-12, errs
    # and the change is real: B differs from A visibly
    same_a = jax.device_get(ra.fn(values.rows(thetas, ra.values, isinstance(ra.example, tuple))))
    assert rel_err(same_a[0], want[0])["wheel_centre_displacement"] > 1e-3


def test_the_generated_code_reads_changed_values_at_run_time():
    """The generated C built for model A (the whole variant: equilibria and
    integration, the engine's runner on a chunk of the host protocol), run
    on model B's values - every value changed at once, the same pattern of
    zeros and ones - equals XLA's program with B's values folded in (every
    channel, the status, the Newton iterations one by one); B's own runner
    loads A's library instead of building one; where the generator cannot
    translate the whole variant, the equilibria run on XLA and the
    integration alone is generated, with the same numbers; values of
    another pattern are refused, never run on A's code."""
    import jax
    from sweep.codegen import build
    from sweep.kinds import time_response as tr
    if build.compiler() is None:
        pytest.skip("no C compiler")
    gen = ("integrator.backend=generated",)
    plan_a, ra = plan_and_runner(*TOY_STEP, *gen)
    plan_b, rb = plan_and_runner(*TOY_STEP, *gen, STEP_TIME, *CHANGES.values())
    thetas = np.zeros((4, 0))
    run_a = ra.fn.lower(ra.example, key=ra.key).compile()
    assert ra.fn.info["backend"] == "generated" and ra.fn.info["whole"]
    got = run_a((thetas, rb.values))
    c = plan_b.case
    folded = tr.make_chunk_runner(plan_b.model, plan_b.pset, dataclasses.replace(c, backend="xla"), lifted=False)
    want = jax.device_get(folded(thetas[:1]))
    assert (np.asarray(got[1]) == 0).all() and int(want[1][0]) == 0          # status ok
    errs = rel_err({k: np.asarray(v)[:1] for k, v in got[0].items()}, want[0])
    assert max(errs.values()) <= 1e-10, errs
    np.testing.assert_array_equal(np.asarray(got[2])[:1], want[2])           # the Newton iterations
    rb.fn.lower(rb.example, key=rb.key).compile()
    assert rb.fn.info["cached"] and rb.fn.info["trace_skipped"]               # A's library, not built again
    # a whole variant the generator cannot translate: equilibria on XLA, the
    # integration generated, reading the values at run time as well
    whole = ra.fn.whole
    ra.fn.whole = lambda theta, vec: (whole(theta, vec), jax.pure_callback(lambda x: x, theta, theta))[0]
    staged = ra.fn.lower(ra.example).compile()
    assert ra.fn.info["backend"] == "generated" and not ra.fn.info.get("whole")
    got = staged((thetas[:1], rb.values))          # the chunk shape the XLA stage was compiled for
    errs = rel_err(got[0], want[0])
    assert max(errs.values()) <= 1e-10, errs
    _, rz = plan_and_runner(*TOY_STEP, *gen, "model.per_side.p2p.spring.preload=0.0")
    with pytest.raises(RuntimeError, match="pattern"):
        run_a((thetas, rz.values))


def test_kc_reads_changed_values_at_run_time():
    import jax
    from sweep.kinds import kinematics_compliance as kc_kind
    plan_a, ra = plan_and_runner(*TOY_KC)
    changed = [CHANGES["bushing rate"], CHANGES["hardpoint"], CHANGES["mass"], "loadcase.travel=[-0.06,0.07]",
               "loadcase.loaded_radius=0.33", "loadcase.brake_lock_stiffness=5.0e+4"]
    plan_b, rb = plan_and_runner(*TOY_KC, *changed)
    assert rb.key == ra.key
    thetas = np.zeros((1, 0))
    got = jax.device_get(ra.fn(values.rows(thetas, rb.values, isinstance(ra.example, tuple))))
    lc = plan_b.case
    want = jax.device_get(kc_kind.make_kc_runner(plan_b.model, plan_b.pset, lc, lc["lock_index"], 1)(thetas))
    assert int(got[1][0]) == int(want[1][0]) == 0
    errs = rel_err(got[0], want[0])
    assert max(errs.values()) <= 1e-12, {k: v for k, v in errs.items() if v > 1e-12}
    # the travel range moved: the steps' wheel-centre heights follow it
    dz = np.asarray(got[0]["wheel_centre_displacement"])[0, :, 0, 2]
    np.testing.assert_allclose([dz.min(), dz.max()], [-0.06, 0.07], atol=1e-6)


def test_a_quick_start_program_equals_the_optimised_one():
    """A short job's program compiled for a quick start
    (sweep.engine.stream.QUICK_START: XLA level 0, the elemental fusion
    emitter) gives the numbers of the same program compiled with XLA's
    defaults (optimisation level 3, the MLIR fusion emitters; given as
    options here because the tests' XLA_FLAGS set the quick ones): every
    channel to round-off of two compilers - 1e-10 max|b|, as the generated
    C against XLA (measured 1.4e-11, the bushing forces; the stiff solve
    amplifies the order of the operations) - the status and the Newton
    iterations exactly."""
    from sweep.engine.stream import QUICK_START
    _, r = plan_and_runner(*TOY_STEP)
    rows = values.rows(np.zeros((1, 0)), r.values, isinstance(r.example, tuple))
    quick = _run(r.fn, rows, QUICK_START)
    opt = _run(r.fn, rows, {**DEFAULT_EMITTERS, "xla_backend_optimization_level": 3})
    assert int(quick[1][0]) == int(opt[1][0]) == 0                 # status ok
    np.testing.assert_array_equal(np.asarray(quick[2]), np.asarray(opt[2]))   # Newton iterations
    errs = rel_err(quick[0], opt[0])
    assert max(errs.values()) <= 1e-10, errs
