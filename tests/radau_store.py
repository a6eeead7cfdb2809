"""Stored Radau reference trajectories of the long validation tests.

The scipy Radau references of the axle validations (the NMSE of LSRT2 on
both axles, the convergence orders on the double wishbone) are the rest
tier's largest single cost (2-4 minutes each on the development machine:
every step factorises a 288 x 288 iteration matrix on the host). They are
computed once, by :func:`kernels.radau.solve`, and kept in
``tests/fixtures/radau/<name>.npz`` together with what they were computed
from; a test reads one back only where it still is the solution of the
problem the test poses now:

* the same start state (r0, v0), output times, switch times of the
  excitation and Radau tolerances;
* the same solver: the sha256 of ``kernels/radau.py``;
* the same equations along the stored trajectory: the right-hand side f of
  today's model and kernels at every 10th stored state and at the first
  states after every switch time equals the f stored with it (relative
  1e-8 per part: coordinate rates and accelerations). A changed element
  law, model parameter or load shows up there (and the stops, springs and
  bushings act along the trajectory, where it is probed).

Otherwise the reference is computed again (a warning names the reason,
so that a slow rest tier is explained) - never a stale one used. Writing
is explicit: ``AXLE_STORE_REFERENCES=1`` (re)writes every reference a test
run computes, e.g. after a change of the kernels:

    AXLE_STORE_REFERENCES=1 python -m pytest -m "" -p no:randomly \\
        tests/kernels/test_validation.py tests/kernels/test_multilink.py

The reference itself stays an independent oracle: Radau IIA at tight
tolerances (its own test: tests/kernels/test_radau.py); the store only
avoids solving the same problem again.
"""
from __future__ import annotations

import hashlib
import os
import warnings

import jax.numpy as jnp
import numpy as np

STORE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "radau")
PROBE_EVERY = 10          # f is compared at every 10th stored state ...
PROBES_AFTER_SWITCH = 5   # ... and at the first 5 states after each switch time
F_RTOL = 1e-8


def _solver_hash():
    import kernels.radau
    with open(kernels.radau.__file__, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _probe_indices(t, switches):
    idx = set(range(0, len(t), PROBE_EVERY)) | {len(t) - 1}
    for ts in switches:
        k = int(np.searchsorted(t, ts, side="right"))
        idx |= set(range(k, min(k + PROBES_AFTER_SWITCH, len(t))))
    return np.array(sorted(idx), dtype=np.int64)


def _rhs_at(model, exc, t, r, v, idx):
    from kernels.radau import make_rhs
    f, _ = make_rhs(model, exc)
    y = np.concatenate([r.reshape(len(t), -1), v.reshape(len(t), -1)], axis=1)
    return np.stack([np.asarray(f(float(t[i]), jnp.asarray(y[i]))) for i in idx])


def _stale(z, model, exc, r0, v0, t, switches, tol):
    """Why the stored reference ``z`` is not the solution of this problem (None: it is)."""
    if str(z["solver"]) != _solver_hash():
        return "kernels/radau.py changed"
    if z["t"].shape != t.shape or not np.array_equal(z["t"], t):
        return "other output times"
    if not np.array_equal(z["switches"], switches):
        return f"other switch times {switches} (stored {z['switches']})"
    if not np.array_equal(z["tol"], tol):
        return f"other tolerances {tol} (stored {z['tol']})"
    if not (np.allclose(z["r"][0], r0, rtol=0, atol=1e-12) and np.allclose(z["v"][0], v0, rtol=0, atol=1e-12)):
        return "another start state"
    idx = z["probe_idx"]
    f_now = _rhs_at(model, exc, t, z["r"], z["v"], idx)
    n = f_now.shape[1] // 2
    for part, sl in (("coordinate rates", slice(0, n)), ("accelerations", slice(n, None))):
        scale = np.abs(z["probe_f"][:, sl]).max()
        dev = np.abs(f_now[:, sl] - z["probe_f"][:, sl]).max()
        if not dev <= F_RTOL * scale:
            return f"the right-hand side ({part}) differs along the stored trajectory by {dev:.2e} (of {scale:.2e})"
    return None


def radau_reference(name, model, exc, r0, v0, t_eval, rtol=1e-8, atol_coordinates=1e-10, atol_speeds=1e-8):
    """``kernels.radau.solve(model, exc, r0, v0, t_eval, ...)`` -> (t, r, v),
    read from ``tests/fixtures/radau/<name>.npz`` where that still is this
    problem's solution (module doc), else solved (and stored with
    ``AXLE_STORE_REFERENCES=1``)."""
    from kernels import loads
    from kernels.radau import solve
    t = np.asarray(t_eval, dtype=np.float64)
    r0, v0 = np.asarray(r0, np.float64), np.asarray(v0, np.float64)
    switches = np.asarray([s for s in loads.switch_times(exc) if t[0] < s <= t[-1]], np.float64)
    tol = np.array([rtol, atol_coordinates, atol_speeds], np.float64)
    path = os.path.join(STORE, f"{name}.npz")
    store = os.environ.get("AXLE_STORE_REFERENCES", "") not in ("", "0")
    if os.path.exists(path) and not store:
        with np.load(path) as z:
            z = dict(z)
        why = _stale(z, model, exc, r0, v0, t, switches, tol)
        if why is None:
            return t, z["r"], z["v"]
        warnings.warn(f"stored Radau reference {name!r} not used ({why}): solving it again "
                      "(AXLE_STORE_REFERENCES=1 stores the new one; tests/radau_store.py)", stacklevel=2)
    _, r, v = solve(model, exc, r0, v0, t, rtol=rtol, atol_coordinates=atol_coordinates, atol_speeds=atol_speeds)
    r, v = np.asarray(r), np.asarray(v)
    if store:
        idx = _probe_indices(t, switches)
        os.makedirs(STORE, exist_ok=True)
        tmp = path + ".part.npz"
        np.savez_compressed(tmp, t=t, r=r, v=v, switches=switches, tol=tol, solver=_solver_hash(),
                            probe_idx=idx, probe_f=_rhs_at(model, exc, t, r, v, idx))
        os.replace(tmp, path)
    return t, r, v
