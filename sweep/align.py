"""Static alignment of an axle model, the way Adams/Car's "static alignment" does it.

    python -m sweep.align double_wishbone          # or a path to a model YAML

The model YAML's ``alignment`` section states the targets and what is
adjusted::

    alignment:
      toe_deg: 0.0            # design toe (DIN 70000, + = toe-in), both sides
      camber_deg: 0.8         # design camber (DIN 70000, + = top out)
      wheel_load: 5000.0      # N: design wheel load the spring seat offset is set for
      toe_by: tie_rod_outer   # bushing whose `adjust.distance` sets the toe
      camber_by: upper_ball_joint
      seat_offset_of: main_spring   # P2P spring whose `seat_offset` sets the ride height

At the design position (both wheel centres at their design heights, the
vertical wheel loads found with the equilibrium: :func:`kernels.kc.design_position`)
the three unknowns (tie-rod length, camber shim, spring seat offset [m]) are
found by Newton's method with a finite-difference Jacobian so that toe,
camber and the vertical wheel-centre force equal the targets. The result is
printed as the lines to put into the YAML; :func:`alignment_residual` is what
the tests check (to 0.02 deg and 1 % of the load).
"""
from __future__ import annotations

import copy
import os
import sys

import jax
import numpy as np

import kernels  # noqa: F401  (float64)
from kernels import kc, metrics
from kernels.model import ModelError, build_model
from sweep.model_builder import build_tables, check_alignment, load_model_file
from sweep.schema import ConfigError

DEG = 180.0 / np.pi
CONFIG_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs", "model")


def load_model_config(name_or_path):
    path = name_or_path if name_or_path.endswith(".yaml") else os.path.join(CONFIG_DIR, name_or_path + ".yaml")
    if not os.path.exists(path):
        raise ConfigError(f"model = {name_or_path!r}: no such model config ({path})")
    return load_model_file(path)


@jax.jit
def _design_state(model):
    eq = kc.design_position(model)
    toe, camber = metrics.toe_camber(model, eq.r)
    return eq.fz, toe * DEG, camber * DEG, eq.converged


def design_alignment(cfg):
    """(wheel load [N], toe [deg], camber [deg]) per side (2,) at the design
    position of the model config ``cfg`` (a plain dict)."""
    fz, toe, camber, ok = _design_state(build_model(build_tables(cfg)))
    if not bool(ok):
        raise ModelError("the design position did not converge")
    return np.asarray(fz), np.asarray(toe), np.asarray(camber)


def _spec(cfg):
    a = cfg.get("alignment")
    if not a:
        raise ConfigError("model.alignment: the model states no alignment targets")
    for key in ("toe_deg", "camber_deg", "wheel_load", "toe_by", "camber_by", "seat_offset_of"):
        if key not in a:
            raise ConfigError(f"model.alignment.{key}: missing")
    check_alignment(cfg)
    return a


def get_adjustments(cfg):
    a = _spec(cfg)
    ps = cfg["per_side"]
    return np.array([float(ps["bushings"][a["toe_by"]]["adjust"]["distance"]),
                     float(ps["bushings"][a["camber_by"]]["adjust"]["distance"]),
                     float(ps["p2p"][a["seat_offset_of"]].get("seat_offset") or 0.0)])


def with_adjustments(cfg, x):
    a = _spec(cfg)
    out = copy.deepcopy(cfg)
    ps = out["per_side"]
    ps["bushings"][a["toe_by"]]["adjust"]["distance"] = float(x[0])
    ps["bushings"][a["camber_by"]]["adjust"]["distance"] = float(x[1])
    ps["p2p"][a["seat_offset_of"]]["seat_offset"] = float(x[2])
    return out


def alignment_residual(cfg):
    """(toe - target [deg], camber - target [deg], wheel load - target [N]) of the left side."""
    a = _spec(cfg)
    fz, toe, camber = design_alignment(cfg)
    return np.array([toe[0] - a["toe_deg"], camber[0] - a["camber_deg"], fz[0] - a["wheel_load"]])


def align(cfg, tol=(1e-4, 1e-4, 0.1), max_iter=8, log=print):
    """Newton on (tie-rod length, camber shim, seat offset) [m]; returns x and the residual."""
    x = get_adjustments(cfg)
    scale = np.array([1.0, 1.0, 1000.0])        # deg, deg, kN: a balanced residual
    res = alignment_residual(with_adjustments(cfg, x))
    for it in range(max_iter):
        log(f"  iteration {it}: toe {res[0]:+.5f} deg, camber {res[1]:+.5f} deg, "
            f"wheel load {res[2]:+.2f} N off target at x = {np.round(x * 1000, 4).tolist()} mm")
        if np.all(np.abs(res) <= np.asarray(tol)):
            break
        J = np.zeros((3, 3))
        h = 1e-4
        for j in range(3):
            xp = x.copy()
            xp[j] += h
            J[:, j] = (alignment_residual(with_adjustments(cfg, xp)) - res) / h / scale
        x = x - np.linalg.solve(J, res / scale)
        res = alignment_residual(with_adjustments(cfg, x))
    return x, res


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    try:
        cfg = load_model_config(argv[0])
        a = _spec(cfg)
        print(f"static alignment of {cfg.get('name')}: toe {a['toe_deg']} deg, camber "
              f"{a['camber_deg']} deg, design wheel load {a['wheel_load']} N")
        x, res = align(cfg)
    except ModelError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"result (off target: toe {res[0]:+.5f} deg, camber {res[1]:+.5f} deg, "
          f"wheel load {res[2]:+.3f} N); put into the model YAML:")
    print(f"  per_side.bushings.{a['toe_by']}.adjust.distance: {x[0]:.7f}")
    print(f"  per_side.bushings.{a['camber_by']}.adjust.distance: {x[1]:.7f}")
    print(f"  per_side.p2p.{a['seat_offset_of']}.seat_offset: {x[2]:.7f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
