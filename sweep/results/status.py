"""The one table of per-variant status codes, shared by every job kind.

Every cube has a ``status`` variable (variant,) of these codes (int8); its
``flag_values`` / ``flag_meanings`` attributes (CF conventions) and a
``status_descriptions`` attribute carry this whole table, so a cube explains
its own codes whatever kind wrote it. A kind uses the codes that can occur
in it (:attr:`sweep.kinds.JobKind.status`); the meaning of a code never
depends on the kind.
"""
from __future__ import annotations

import numpy as np

NOT_RUN = -1
OK = 0
EQUILIBRIUM_FAILED = 1
NON_FINITE = 2
INACCURATE = 3
LOAD_STEP_FAILED = 4
IMPLAUSIBLE = 5

# code -> (flag name, what it means for the values)
TABLE = {
    NOT_RUN: ("not_run", "the variant's chunk has not been computed yet (values are the fill value)"),
    OK: ("ok", "values valid"),
    EQUILIBRIUM_FAILED: ("equilibrium_failed",
                         "the static equilibrium (or design position) did not converge; values NaN"),
    NON_FINITE: ("non_finite", "a value went non-finite (diverged); values NaN"),
    INACCURATE: ("inaccurate", "the integrator's error estimate exceeded its tolerance; values kept"),
    LOAD_STEP_FAILED: ("load_step_failed",
                       "a K&C load step did not converge; that step's values NaN, the rest kept"),
    IMPLAUSIBLE: ("implausible_static_state",
                  "the static state converged far from the design (wheel centre, toe or camber beyond the "
                  "job's `checks` limits, or a stop engaged at rest): a spring that cannot hold the load, a "
                  "wrong preload or unit; values kept"),
}
MEANINGS = {code: name for code, (name, _) in TABLE.items()}
# codes whose values are kept (usable with care): the rest carry NaN
VALUES_KEPT = (OK, INACCURATE, LOAD_STEP_FAILED, IMPLAUSIBLE)


def attrs() -> dict:
    """The ``status`` variable's attributes: the whole table."""
    return {"long_name": "variant status", "flag_values": list(TABLE),
            "flag_meanings": " ".join(MEANINGS.values()),
            "status_descriptions": [f"{code} {name}: {text}" for code, (name, text) in TABLE.items()]}


def counts(status, codes=None) -> str:
    """'ok 7, non_finite 1': the codes that occur in ``status`` (``ok`` always),
    in table order (``codes`` restricts the table)."""
    status = np.asarray(status)
    out = []
    for code in (codes if codes is not None else TABLE):
        n = int(np.sum(status == code))
        if n or code == OK:
            out.append(f"{MEANINGS[code]} {n}")
    return ", ".join(out)
