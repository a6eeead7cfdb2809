"""The generated C of the shipped axles against XLA: every fixed-step method, the scalar (one-variant) code (the engine's runner on a chunk: tests/sweep/engine/test_values_numbers.py)."""
from __future__ import annotations
import pytest
from sweep.codegen import build
from tests.sweep.codegen.test_codegen import _compare

pytestmark = [pytest.mark.slow, pytest.mark.skipif(build.compiler() is None, reason="no C compiler")]


@pytest.mark.parametrize("method, relin", [("lsrt2", 1), ("ros34pw2", 1), ("linear_implicit_euler", 1),
                                           ("lsrt2", 4)])
def test_generated_equals_xla_for_every_fixed_step_method(method, relin):
    """Every fixed-step method re-linearised every step, and LSRT2 every
    fourth step (the carried linearisation and the per-step branch, which
    are the same for every method; the other methods' every-fourth builds:
    tests/validation/test_codegen_axles_full.py), on the toy axle over
    4.95-5.03 s, across the load step: every channel, the status and the
    iterations equal XLA's (the fast tier checks the generator's operations
    on small functions, tests/sweep/codegen/test_codegen.py)."""
    _compare(f"toy_{method}_relinearise{relin}", method, relin, n_samples=17, every=5)


@pytest.mark.parametrize("model_name, method, relin", [
    ("double_wishbone", "lsrt2", 1),
    ("twist_beam", "lsrt2", 1),
])
def test_generated_axle_equals_xla(model_name, method, relin):
    """The shipped axles over 4.95-5.03 s, across the load step: the double
    wishbone (144 DOF, 31 bushings, curves with per-variant segment
    lookups), the multi-link, the leaf-spring axle (leaf beams, state
    events) and the twist beam (a flexible cross member: modal slots,
    elements at interface nodes); the multi-link and the leaf-spring axle:
    tests/validation/test_codegen_axles_full.py. Each method and re-linearisation period is run on the toy
    axle above; the full axles take minutes to build each (the multi-link
    with ROS34PW2: gcc over 8 min; the double wishbone re-linearised every
    fourth step: 14 min), so here LSRT2 on each."""
    _compare(f"{model_name}_{method}_relinearise{relin}", method, relin, n_samples=17, every=5,
             model_name=model_name)


def test_generated_scalar_code_equals_xla():
    """The toy axle's integration built with one variant per vector (as for
    a single-variant job: scalar C, libm instead of libmvec) against XLA's
    stored outputs, as the toy axle's method test at 4 lanes."""
    _compare("toy_lsrt2", "lsrt2", 1, W=1, n_samples=17, every=5)
