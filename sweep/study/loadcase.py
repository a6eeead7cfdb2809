"""Load cases from config: wheel-centre loads u(t) as an
:class:`kernels.loads.Excitation`, and the output sample grid of a run."""
import logging
import math

import numpy as np

from kernels import loads
from kernels.names import COMPONENTS as CHANNELS, SIDES
from sweep.axle.params import check_keys
from sweep.core.config import ConfigError, Float, duration, fmt

CHANGE_KEYS = {"time", "duration", *SIDES}
log = logging.getLogger(__name__)


def _loads(spec, what):
    u = np.zeros((2, 6))
    if spec is not None and not isinstance(spec, dict):
        raise ConfigError(f"{what} = {spec!r}: must be a mapping {{left: {{fx: ...}}, right: {{...}}}}")
    for key in spec or {}:
        if key not in SIDES:
            raise ConfigError(f"{what}.{key}: unknown side (expected left or right)")
    for i, side in enumerate(SIDES):
        side_spec = (spec or {}).get(side) or {}
        if not isinstance(side_spec, dict):
            raise ConfigError(f"{what}.{side} = {side_spec!r}: must be a mapping of load channels")
        for ch, val in side_spec.items():
            if ch not in CHANNELS:
                raise ConfigError(f"{what}.{side}.{ch}: unknown load channel "
                                  f"(expected one of {CHANNELS})")
            u[i, CHANNELS.index(ch)] = Float(unit="N, N m").check(val, f"{what}.{side}.{ch}")
    return u


def build_excitation(cfg):
    """Return (excitation, t_start, t_end) of a load-case config."""
    what = "loadcase"
    t0 = Float(unit="s").check(cfg.get("t_start", 0.0), f"{what}.t_start")
    t1 = Float(unit="s").check(cfg.get("t_end"), f"{what}.t_end")
    if not t1 > t0:
        raise ConfigError(f"{what}.t_end = {t1} must be greater than t_start = {t0}")
    base = _loads(cfg.get("wheel_loads"), f"{what}.wheel_loads")
    changes = []
    for i, ch in enumerate(cfg.get("changes") or []):
        w = f"{what}.changes[{i}]"
        if not isinstance(ch, dict):
            raise ConfigError(f"{w} = {ch!r}: must be a mapping {{time, duration, left, right}}")
        check_keys(w, ch, CHANGE_KEYS)
        if ch.get("time") is None:
            raise ConfigError(f"{w}.time is missing: a load change needs the time [s] it starts at")
        t = Float(unit="s").check(ch["time"], f"{w}.time")
        dur = Float(unit="s").check(ch.get("duration", 0.0), f"{w}.duration")
        if dur < 0:
            raise ConfigError(f"{w}.duration = {dur} must be >= 0")
        amp = _loads({k: v for k, v in ch.items() if k in SIDES}, w)
        if t >= t1:
            log.warning(f"warning: {w}.time = {duration(t)} s is at or after the end of the simulated window "
                        f"(loadcase.t_end = {duration(t1)} s): this load change never acts")
        changes.append((t, dur, amp))
    return loads.excitation(base, changes), t0, t1


def sample_grid(t_start, t_end, dt, every, every_key="output.every"):
    """Number of output samples of a run from t_start to t_end at step dt,
    writing every ``every``-th step; :class:`ConfigError` naming ``every_key``
    (``sweep.every`` when the sweep sets it) or ``integrator.dt`` otherwise."""
    span = t_end - t_start
    n_steps = int(round(span / dt))
    if n_steps < 1 or not math.isclose(n_steps * dt, span, rel_tol=0, abs_tol=1e-9):
        raise ConfigError(f"integrator.dt = {fmt(dt)}: does not divide the load case duration "
                          f"{duration(span)} s ({duration(t_start)} to {duration(t_end)} s)")
    if every < 1 or n_steps % every:
        raise ConfigError(f"{every_key} = {every}: must be >= 1 and divide the "
                          f"{n_steps} steps of the run")
    return n_steps // every + 1
