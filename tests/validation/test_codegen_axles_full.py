"""The generated C of the multi-link and of the leaf-spring axle (leaf
beams, state events) against XLA over 4.95-5.03 s (full form, on demand).
and the toy axle's other methods re-linearised every fourth step. CI's
form: the double wishbone and the twist beam
(tests/sweep/codegen/test_codegen_axles.py) and every method on the toy
axle."""
import pytest

from sweep.codegen import build
from tests.sweep.codegen.test_codegen import _compare

pytestmark = [pytest.mark.validation, pytest.mark.skipif(build.compiler() is None, reason="no C compiler")]


@pytest.mark.parametrize("model_name", ["multilink", "leaf_spring_axle"])
def test_generated_axle_equals_xla(model_name):
    _compare(f"{model_name}_lsrt2_relinearise1", "lsrt2", 1, n_samples=17, every=5, model_name=model_name)


@pytest.mark.parametrize("method", ["ros34pw2", "linear_implicit_euler"])
def test_generated_equals_xla_relinearised_every_fourth_step(method):
    _compare(f"toy_{method}_relinearise4", method, 4, n_samples=17, every=5)
