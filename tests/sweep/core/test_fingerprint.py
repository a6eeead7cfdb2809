"""The trace cache's fingerprint follows what a runner closes over (sweep/core/tracecache.py)."""
import numpy as np


def test_fingerprint_follows_what_the_runner_closes_over(dw_model):

    from sweep.core.tracecache import fingerprint
    key = fingerprint("time_response", 4, dw_model, {"a": np.arange(3.0)}, 1e-3)
    assert key == fingerprint("time_response", 4, dw_model, {"a": np.arange(3.0)}, 1e-3)
    # one bushing stiffness a little different -> another key
    k = np.array(dw_model.elements["bushing"]["k"])
    k[0, 0] *= 1.0 + 1e-12
    other = dw_model.replace_elements(bushing={"k": k})
    assert fingerprint("time_response", 4, other, {"a": np.arange(3.0)}, 1e-3) != key
    # step size, chunk shape, nested values
    assert fingerprint("time_response", 4, dw_model, {"a": np.arange(3.0)}, 2e-3) != key
    assert fingerprint("time_response", 8, dw_model, {"a": np.arange(3.0)}, 1e-3) != key
    assert fingerprint("time_response", 4, dw_model, {"a": np.arange(3.0) + 1}, 1e-3) != key
    # something it cannot hash exactly: never reused
    f = lambda x: x  # noqa: E731
    assert fingerprint(f) != fingerprint(f)
