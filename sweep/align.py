"""Static alignment of an axle model, the way Adams/Car's "static alignment" does it.

    python -m sweep.align double_wishbone          # or a path to a model YAML
    python -m sweep.align model=my_axle hydra.searchpath=[file://axles]   # as python -m sweep takes it

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

Pretension (an axle whose springs are bushings, e.g. a leaf spring: the
design geometry is to be the static state under the design load with every
element undeflected)::

    alignment:
      wheel_load: 7108.0      # N per wheel
      pretension:             # per-side bushing -> the directions it is preloaded in
        front_eye: [x, y]
        leaf_joint_P: [x, y, rz]

At the design geometry each element's force is its preload, so the
generalised forces of all bodies (gravity, the wheel loads, the preloads)
are affine in the listed preloads; :func:`pretension` solves them for zero
(both sides mirrored, least squares; an axle that the listed directions
cannot balance is an error naming the largest residual). The values go into
each bushing's ``preload`` (left side; the right side is mirrored).
"""
from __future__ import annotations

import os
import sys

import kernels  # noqa: F401  (float64)
from kernels.model import ModelError
# the alignment itself is a service (sweep/axle/alignment.py, also used per variant
# by hardpoint sweeps); its functions are re-exported here for scripts
from sweep.axle.alignment import _pretension_spec, _spec, align, check_proposal, pretension
from sweep.axle.alignment import design_alignment, realigned  # noqa: F401  (re-exported)
from sweep.axle.builder import load_model_file
from sweep.core.config import ConfigError
CONFIG_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs", "model")


def model_path(name_or_path, searchpath=()):
    """The model file of ``name_or_path``: a path to a YAML file, or a model
    name looked up as ``python -m sweep`` does - the project's
    ``configs/model/`` first, then ``<dir>/model/`` of each ``searchpath``
    directory (``hydra.searchpath=[file://dir]``)."""
    if name_or_path.endswith((".yaml", ".yml")):
        if not os.path.exists(name_or_path):
            raise ConfigError(f"model = {name_or_path!r}: no such model file")
        return name_or_path
    tried = [os.path.join(CONFIG_DIR, name_or_path + ".yaml")] + \
        [os.path.join(d, "model", name_or_path + ".yaml") for d in searchpath]
    for path in tried:
        if os.path.exists(path):
            return path
    raise ConfigError(f"model = {name_or_path!r}: no such model config (looked in {', '.join(tried)})")


def load_model_config(name_or_path, searchpath=()):
    return load_model_file(model_path(name_or_path, searchpath))


def parse_args(argv):
    """(model name or path, searchpath dirs) of ``sweep.align``'s command line:
    ``NAME``, ``PATH.yaml``, ``model=NAME`` or ``model=PATH.yaml``, and
    ``hydra.searchpath=[file://dir,...]`` - the forms ``python -m sweep``
    takes; None for a line that is not one of them."""
    from sweep.core.runtime import searchpath_dirs
    model, rest = None, []
    for a in argv:
        key, sep, value = a.partition("=")
        if sep and key.lstrip("+") == "hydra.searchpath":
            continue
        if sep and key == "model" and model is None:
            model = value
        elif not sep and model is None:
            model = a
        else:
            rest.append(a)
    if model is None or rest:
        return None
    return model, searchpath_dirs(argv)


def main_pretension(cfg) -> int:
    a = _pretension_spec(cfg)
    print(f"pretension of {cfg.get('name')}: design geometry = static state under {a['wheel_load']} N per wheel")
    values, res = pretension(cfg)
    print(f"result (largest residual {res:.3g} N or N m); put into the model YAML:")
    for name, row in values.items():
        print(f"  per_side.bushings.{name}.preload: [{', '.join(f'{v:.9g}' for v in row)}]")
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parsed = None if any(a in ("-h", "--help") for a in argv) else parse_args(argv)
    if parsed is None:
        print(__doc__)
        return 0 if any(a in ("-h", "--help") for a in argv) else 2
    try:
        cfg = load_model_config(*parsed)
        if "pretension" in (cfg.get("alignment") or {}):
            return main_pretension(cfg)
        a = _spec(cfg)
        if "toe_by" in a:
            print(f"static alignment of {cfg.get('name')}: toe {a['toe_deg']} deg, camber "
                  f"{a['camber_deg']} deg, design wheel load {a['wheel_load']} N")
        else:
            print(f"ride height of {cfg.get('name')}: design wheel load {a['wheel_load']} N "
                  "(no toe / camber adjustment)")
        x, res = align(cfg)
        check_proposal(cfg, x)
    except ModelError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if "toe_by" in a:
        print(f"result (off target: toe {res[0]:+.5f} deg, camber {res[1]:+.5f} deg, "
              f"wheel load {res[2]:+.3f} N); put into the model YAML:")
        print(f"  per_side.bushings.{a['toe_by']}.adjust.distance: {x[0]:.7f}")
        print(f"  per_side.bushings.{a['camber_by']}.adjust.distance: {x[1]:.7f}")
    else:
        print(f"result (off target: wheel load {res[-1]:+.3f} N); put into the model YAML:")
    print(f"  per_side.p2p.{a['seat_offset_of']}.seat_offset: {x[-1]:.7f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
