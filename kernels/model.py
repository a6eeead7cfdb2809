"""The table data model of method.md section 1, validated and turned into a pytree.

Input: plain tables (dicts and lists, e.g. from YAML), each row with a unique
integer ``index`` and a ``name``. All positions are in the vehicle frame at
the design position (x forward, y left, z up; m).

``bodies``   index (>= 1; index 0 is the ground "chassis", which has no state),
             name, mass [kg], inertia [kg m^2] (3x3 about the centre of mass,
             body frame), position [m] (centre of mass = body frame origin),
             euler [rad] (initial z-y'-x'' angles of the body frame).
``markers``  index, name, body (body index, 0 = chassis), position [m],
             orientation (3x3, columns = marker axes in the vehicle frame).
``bushings`` index, name, marker_1, marker_2, and per direction
             (x, y, z, rx, ry, rz of marker_1's frame):
             stiffness [N/m | N m/rad], damping [N s/m | N m s/rad],
             preload [N | N m] (force on body 1 at zero deflection),
             offset [m | rad] (deflection at which the elastic force is
             the preload), optional ``stiffness_curves`` /
             ``damping_curves``: {direction: {x: [...], y: [...],
             interpolation: linear | pchip}} giving force on body 1 vs
             deflection / deflection rate; a direction with a curve uses it
             instead of the linear coefficient (``kernels.curves``: what the
             interpolation choice means; default pchip); optional ``play``
             [m | rad] per direction (a dead band: no elastic force within
             +-play of ``offset``, then the characteristic from the band
             edge) and ``play_law`` (smooth | switching: the band edges by
             sign, or as state events like a stop's).
``p2p``      index, name, marker_1, marker_2, kind (spring | damper |
             bump_stop | rebound_stop), and the law parameters documented at
             :func:`_p2p_law`; stops: ``law`` (smooth | switching), dampers:
             ``friction`` (:func:`_p2p_friction`).
other        a registered element group's section (``kernels.forces.GROUPS``,
             its ``table_key``): index, name, marker_1, marker_2 and the
             group's own fields (checked by its ``validate``).
``flexible_bodies``  index, name, body (a ``bodies`` index: the floating
             reference frame, a mean-axis frame at the centre of mass, with
             the body's mass and inertia), frequencies [Hz] (n > 0 free-free
             elastic modes, n a multiple of 6; modal coordinates scaled to
             unit modal mass), damping_ratio (one value or n), interfaces:
             [{marker, translation (3 x n) [m kg^-0.5], rotation (3 x n)
             [rad kg^-0.5 m^-1]}] - the mode shapes at the marker's node, in
             the body frame. Every marker on a flexible body is an
             interface (:mod:`kernels.flexible`; ``sweep.axle.fe`` makes
             these rows from an FE model).
``wheels``   {left: body index, right: body index}: wheel bodies, whose frame
             origin is the wheel centre and whose body y axis is the spin
             axis. The external excitation u (method.md eq. 1b) is the force
             and torque (vehicle frame) at each wheel centre.

Sign of forces: a bushing's characteristic gives the force that the element
exerts on its *first* body, in marker_1's frame, as a function of the
deflection of marker_2 relative to marker_1 (so a positive stiffness pulls
body 1 towards body 2).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from kernels import curves, forces
from kernels.names import DIRECTIONS, SIDES

__all__ = ["DIRECTIONS", "P2P_KINDS", "GROUND", "ModelError", "Topology", "Model",
           "validate_tables", "build_model", "export_tables", "cast_floats"]
P2P_KINDS = ("spring", "damper", "bump_stop", "rebound_stop")
STOP_LAWS = ("smooth", "switching")
FRICTION_LAWS = ("switching", "regularised")
FRICTION_KEYS = ("force", "law", "stiffness", "damping", "velocity")
# the discrete state of the switching laws as built (Model.elements["p2p"]["contact"],
# Model.elements["p2p"]["slip"]): kernels.forces
CONTACT_AUTO, SLIP_OFF = forces.CONTACT_AUTO, forces.SLIP_OFF
GROUND = 0
# table sections that traced functions read from ``Topology.tables`` (host
# side, folded into the program): part of ``Topology.structure``
TRACED_TABLES = ("steering_joints", "travel_lock", "vehicle", "reference_bushings")


class ModelError(ValueError):
    """A model table is invalid; the message names the offending field and value."""


@dataclasses.dataclass(frozen=True, eq=False)
class Topology:
    """Static (non-traced) part of a model: sizes, names, index arrays.

    Hashed and compared by structure (names and index arrays, not the
    informational ``tables``) so that it can be a static pytree field:
    functions jitted for one model are reused for every model of the same
    structure, whatever its parameter values. Registered element groups
    (``extra_groups``) enter the hash by identity, with their names and body
    slots: a model built with another group object of the same name is
    another structure (no stale compiled function).
    """
    name: str
    body_names: tuple
    body_index: tuple          # user index of each state slot
    bushing_names: tuple
    bushing_bodies: np.ndarray  # (n_bushings, 2) state slots; slot n_bodies = ground
    p2p_names: tuple
    p2p_kinds: tuple
    p2p_bodies: np.ndarray      # (n_p2p, 2)
    wheel_slots: np.ndarray     # (2,) state slots of left and right wheel
    tables: Any                 # the validated plain tables (exportable)
    # per P2P element: "contact" (a stop with the switching law), "friction"
    # (a damper with switching Coulomb friction) or "" - the elements with a
    # root function (kernels.system: state events)
    p2p_events: tuple = ()
    # per bushing: True where its play has the switching law (state events)
    bushing_events: tuple = ()
    # registered (not built-in) element groups the model was built with
    # (kernels.forces.ElementGroup, in registry order) and their elements
    extra_groups: tuple = ()
    group_names: dict = dataclasses.field(default_factory=dict)    # {group: names}
    group_bodies: dict = dataclasses.field(default_factory=dict)   # {group: (n, 2) slots}
    # flexible bodies (:mod:`kernels.flexible`): per flexible body (frame
    # slot, modal slots) - the modal coordinates occupy ``n_modes / 6``
    # state slots ("modal blocks") after the rigid bodies; per element group
    # (name) the (n, 2) interface of each element end (-1: a rigid marker)
    flex_bodies: tuple = ()
    flex_interface_body: tuple = ()      # per interface: its flexible body
    element_interfaces: dict = dataclasses.field(default_factory=dict)

    @property
    def n_bodies(self):
        return len(self.body_names)

    @property
    def n_dof(self):
        return 6 * self.n_bodies

    @property
    def n_modal_coordinates(self):
        """Modal coordinates of the flexible bodies (6 per modal slot; 0 for a rigid model)."""
        return 6 * sum(len(ms) for _, ms in self.flex_bodies)

    @property
    def n_physical_bodies(self):
        """Rigid bodies and flexible bodies' frames: the slots that are not modal."""
        return self.n_bodies - self.n_modal_coordinates // 6

    @property
    def modal_slots(self):
        """State slots holding modal coordinates (sorted; empty for a rigid model)."""
        return np.array(sorted(s for _, ms in self.flex_bodies for s in ms), int)

    def interfaces(self, group):
        """(n, 2) interface index of each end of the group's elements (-1: rigid marker)."""
        if group.name in self.element_interfaces:
            return np.asarray(self.element_interfaces[group.name])
        return np.full((len(group.names(self)), 2), -1, int)

    @property
    def element_groups(self):
        """The model's force-element groups: built-in, then :attr:`extra_groups`."""
        return forces.BUILTIN_GROUPS + tuple(self.extra_groups)

    @property
    def element_bodies(self):
        """(n_force_elements, 2) body slots of all elements, group by group."""
        return np.concatenate([np.asarray(g.bodies(self)).reshape(-1, 2)
                               for g in self.element_groups]).astype(int)

    @property
    def n_force_elements(self):
        return sum(len(g.names(self)) for g in self.element_groups)

    def _key(self):
        extra = tuple((g, tuple(self.group_names[g.name]), np.asarray(self.group_bodies[g.name]).tobytes())
                      for g in self.extra_groups)
        return (self.name, self.body_names, self.bushing_names, self.p2p_names,
                self.p2p_kinds, self.p2p_events, self.bushing_events, self.bushing_bodies.tobytes(), self.p2p_bodies.tobytes(),
                self.wheel_slots.tobytes(), extra, self.flex_bodies, self.flex_interface_body,
                tuple((k, np.asarray(v).tobytes()) for k, v in sorted(self.element_interfaces.items())))

    def structure(self):
        """The structure a traced program of this model depends on: the
        hash key plus the table sections read while tracing
        (:data:`TRACED_TABLES`; e.g. the vehicle data of the anti-pitch
        metrics), never the element and body values of ``tables``."""
        return self._key() + tuple((k, repr(self.tables.get(k))) for k in TRACED_TABLES)

    def __hash__(self):
        return hash(self._key())

    def __eq__(self, other):
        return isinstance(other, Topology) and self._key() == other._key()


def _field(**kw):
    return dataclasses.field(**kw)


@dataclasses.dataclass
class Model:
    """Model pytree. Array leaves can be vmapped over variants; ``topology`` is static.

    Shapes: m bodies, K padded curve knots.
    """
    mass: jax.Array            # (m,) kg
    inertia: jax.Array         # (m, 3, 3) kg m^2, body frame, about the CoM
    gravity: jax.Array         # (3,) m/s^2
    r_design: jax.Array        # (m, 6) design pose
    topology: Topology = _field(metadata=dict(static=True))
    # the force elements' parameter tables, {group name: pytree with leading
    # axis n_group}, every group of the topology: "bushing" and "p2p" (their
    # keys: kernels.forces.BUSHING_PARAMS / P2P_PARAMS), then the registered
    # groups (their ElementGroup.build)
    elements: dict = _field(default_factory=dict)
    # flexible bodies (kernels.flexible; empty for a rigid model): "k" (nq, 6)
    # modal stiffness omega^2 [1/s^2] and "c" (nq, 6) modal damping 2 zeta
    # omega [1/s] of the modal slots (Topology.modal_slots order); "phi",
    # "psi" (ni, 3, n_max) translational [m kg^-0.5] / rotational [rad
    # kg^-0.5 m^-1] mode shapes at each interface node (zero-padded to the
    # largest mode count)
    flex: dict = _field(default_factory=dict)

    def replace_elements(self, **groups):
        """This model with entries of its element groups' parameter tables
        replaced, e.g. ``model.replace_elements(bushing={"k": k})``; the
        other entries and groups are kept (jit/vmap/grad-safe)."""
        elements = dict(self.elements)
        for name, entries in groups.items():
            if name not in elements:
                raise KeyError(f"replace_elements: the model has no element group {name!r} "
                               f"(groups: {', '.join(elements)})")
            unknown = set(entries) - set(elements[name])
            if unknown:
                raise KeyError(f"replace_elements: group {name!r} has no parameter {sorted(unknown)[0]!r}")
            elements[name] = {**elements[name], **entries}
        return dataclasses.replace(self, elements=elements)


_DATA_FIELDS = [f.name for f in dataclasses.fields(Model) if f.name != "topology"]
jax.tree_util.register_dataclass(Model, data_fields=_DATA_FIELDS, meta_fields=["topology"])


# --------------------------------------------------------------------------- validation

def _where(table, i, row):
    return f"{table}[{i}] {row.get('name', '?')!r}"


def _finite(value, what):
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ModelError(f"{what} = {value!r} is not a number (or a list of numbers)") from None
    if not np.all(np.isfinite(arr)):
        raise ModelError(f"{what} = {value!r} is not finite (NaN or inf)")
    return arr


def _vector(row, key, n, what, default=None):
    if key not in row or row[key] is None:
        if default is None:
            raise ModelError(f"{what}: missing field {key!r}")
        return np.array(default, float)
    arr = _finite(row[key], f"{what}.{key}")
    if arr.shape != (n,):
        raise ModelError(f"{what}.{key} = {row[key]!r} must have {n} values")
    return arr


def _rows(tables, key):
    rows = tables.get(key, [])
    seen = {}
    for i, row in enumerate(rows):
        if "index" not in row:
            raise ModelError(f"{_where(key, i, row)}: missing field 'index'")
        idx = row["index"]
        if not isinstance(idx, (int, np.integer)) or isinstance(idx, bool):
            raise ModelError(f"{_where(key, i, row)}.index = {idx!r} is not an integer")
        if idx in seen:
            raise ModelError(f"{_where(key, i, row)}.index = {idx} duplicates "
                             f"{key}[{seen[idx]}]")
        seen[idx] = i
        if not row.get("name"):
            raise ModelError(f"{key}[{i}] (index {idx}): missing field 'name'")
    names = [r["name"] for r in rows]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ModelError(f"{key}: duplicate name {sorted(dup)[0]!r}")
    return rows, seen


def _check_curve(curve, what):
    if not isinstance(curve, dict) or "x" not in curve or "y" not in curve:
        raise ModelError(f"{what} must be a mapping with 'x' and 'y' lists")
    x = _finite(curve["x"], f"{what}.x")
    y = _finite(curve["y"], f"{what}.y")
    if x.ndim != 1 or x.shape != y.shape or len(x) < 2:
        raise ModelError(f"{what}: 'x' and 'y' must be lists of equal length >= 2 "
                         f"(got {len(np.atleast_1d(x))} and {len(np.atleast_1d(y))})")
    bad = np.nonzero(np.diff(x) <= 0)[0]
    if len(bad):
        i = int(bad[0])
        raise ModelError(f"{what}.x is not strictly increasing: x[{i}] = {x[i]} >= "
                         f"x[{i + 1}] = {x[i + 1]}")
    interp = curve.get("interpolation", "pchip")
    if interp not in curves.INTERPOLATIONS:
        raise ModelError(f"{what}.interpolation = {interp!r} is not one of "
                         f"{', '.join(curves.INTERPOLATIONS)}")
    return x, y


def _rotation(value, what):
    R = _finite(value, what)
    if R.shape != (3, 3):
        raise ModelError(f"{what} must be a 3x3 matrix")
    if not np.allclose(R.T @ R, np.eye(3), atol=1e-9) or np.linalg.det(R) < 0:
        raise ModelError(f"{what} is not a proper rotation matrix")
    return R


def validate_tables(tables):
    """Check the tables; raise :class:`ModelError` naming the first bad field."""
    bodies, body_rows = _rows(tables, "bodies")
    if not bodies:
        raise ModelError("bodies: the model has no bodies")
    for i, b in enumerate(bodies):
        w = _where("bodies", i, b)
        if b["index"] == GROUND:
            raise ModelError(f"{w}.index = 0 is reserved for the ground (chassis)")
        mass = b.get("mass")
        if (isinstance(mass, bool) or not isinstance(mass, (int, float, np.number))
                or not np.isfinite(mass) or mass <= 0):
            raise ModelError(f"{w}.mass = {mass!r} must be a positive number [kg]")
        inertia = _finite(b.get("inertia", np.nan), f"{w}.inertia")
        if inertia.shape != (3, 3):
            raise ModelError(f"{w}.inertia must be a 3x3 matrix")
        if not np.allclose(inertia, inertia.T, rtol=1e-12, atol=1e-14):
            raise ModelError(f"{w}.inertia = {inertia.tolist()} is not symmetric")
        eig = np.linalg.eigvalsh(inertia)
        if eig[0] <= 0:
            raise ModelError(f"{w}.inertia = {inertia.tolist()} is not positive definite "
                             f"(eigenvalues {eig.tolist()})")
        _vector(b, "position", 3, w)
        _vector(b, "euler", 3, w, default=[0, 0, 0])
    markers, marker_rows = _rows(tables, "markers")
    for i, mk in enumerate(markers):
        w = _where("markers", i, mk)
        if mk.get("body") != GROUND and mk.get("body") not in body_rows:
            raise ModelError(f"{w}.body = {mk.get('body')!r} is not a body index")
        _vector(mk, "position", 3, w)
        _rotation(mk.get("orientation", np.eye(3)), f"{w}.orientation")
    for key in ("bushings", "p2p"):
        rows, _ = _rows(tables, key)
        for i, e in enumerate(rows):
            w = _where(key, i, e)
            _check_ends(e, w, markers, marker_rows)
            if key == "bushings":
                for fld in ("stiffness", "damping"):
                    _non_negative(_vector(e, fld, 6, w), f"{w}.{fld}")
                for fld in ("preload", "offset"):
                    _vector(e, fld, 6, w, default=[0] * 6)
                play = _vector(e, "play", 6, w, default=[0] * 6)
                bad = np.nonzero(play < 0)[0]
                if len(bad):
                    raise ModelError(f"{w}.play = {play.tolist()}: {DIRECTIONS[int(bad[0])]} = "
                                     f"{play[int(bad[0])]} must be >= 0")
                if e.get("play_law", "smooth") not in STOP_LAWS:
                    raise ModelError(f"{w}.play_law = {e['play_law']!r} is not one of {', '.join(STOP_LAWS)}")
                for fld in ("stiffness_curves", "damping_curves"):
                    for d, c in (e.get(fld) or {}).items():
                        if d not in DIRECTIONS:
                            raise ModelError(f"{w}.{fld}: unknown direction {d!r} "
                                             f"(expected one of {DIRECTIONS})")
                        x, y = _check_curve(c, f"{w}.{fld}.{d}")
                        if not np.any((np.asarray(x) == 0) & (np.asarray(y) == 0)):
                            raise ModelError(
                                f"{w}.{fld}.{d} must pass through (0, 0): at zero deflection (rate) the "
                                "bushing pushes nothing but its `preload` (a knot x = 0 with y = 0)")
            else:
                _check_p2p(e, w, markers[marker_rows[e["marker_1"]]],
                           markers[marker_rows[e["marker_2"]]])
    for group in _table_groups(tables):
        rows, _ = _rows(tables, group.table_key)
        for i, e in enumerate(rows):
            w = _where(group.table_key, i, e)
            _check_ends(e, w, markers, marker_rows)
            if group.validate is not None:
                group.validate(e, w)
    _check_flexible(tables, bodies, body_rows, markers, marker_rows)
    wheels = tables.get("wheels") or {}
    for side in SIDES:
        if wheels.get(side) not in body_rows:
            raise ModelError(f"wheels.{side} = {wheels.get(side)!r} is not a body index")
    _vector(tables, "gravity", 3, "model", default=[0, 0, -9.81])
    return tables


def _check_flexible(tables, bodies, body_rows, markers, marker_rows):
    """The ``flexible_bodies`` rows: frame body, modes, damping, interfaces."""
    rows, _ = _rows(tables, "flexible_bodies")
    wheels = tables.get("wheels") or {}
    seen = {}
    for i, fb in enumerate(rows):
        w = _where("flexible_bodies", i, fb)
        b = fb.get("body")
        if b not in body_rows:
            raise ModelError(f"{w}.body = {b!r} is not a body index")
        if b in seen:
            raise ModelError(f"{w}.body = {b} is already flexible_bodies[{seen[b]}]")
        if b in (wheels.get("left"), wheels.get("right")):
            raise ModelError(f"{w}.body = {b} is a wheel body; a wheel must be rigid")
        seen[b] = i
        f = _finite(fb.get("frequencies", np.nan), f"{w}.frequencies")
        if f.ndim != 1 or len(f) == 0 or len(f) % 6:
            raise ModelError(f"{w}.frequencies has {f.size} values: need a positive multiple of 6 "
                             "(the modal coordinates fill whole state slots of 6)")
        if np.any(f <= 0):
            raise ModelError(f"{w}.frequencies = {f.tolist()}: every frequency must be > 0 [Hz]")
        n = len(f)
        zeta = _finite(fb.get("damping_ratio", 0.0), f"{w}.damping_ratio")
        if zeta.shape not in ((), (n,)) or np.any(zeta < 0):
            raise ModelError(f"{w}.damping_ratio = {fb.get('damping_ratio')!r}: one value or {n} values, "
                             "each >= 0")
        ifaces = fb.get("interfaces") or []
        on_body = {mk["index"] for mk in markers if mk.get("body") == b}
        listed = set()
        for j, itf in enumerate(ifaces):
            wj = f"{w}.interfaces[{j}]"
            mk = itf.get("marker")
            if mk not in on_body:
                raise ModelError(f"{wj}.marker = {mk!r} is not a marker on body {b}")
            if mk in listed:
                raise ModelError(f"{wj}.marker = {mk} is listed twice")
            listed.add(mk)
            for key in ("translation", "rotation"):
                a = _finite(itf.get(key, np.nan), f"{wj}.{key}")
                if a.shape != (3, n):
                    raise ModelError(f"{wj}.{key} has shape {a.shape}: need (3, {n})")
        loose = sorted(on_body - listed)
        if loose:
            raise ModelError(f"markers index {loose[0]} is on flexible body {b} but is not one of "
                             f"{w}.interfaces (a force element attaches at an interface node)")


def _table_groups(tables):
    """The registered (not built-in) element groups whose section the tables have."""
    return [g for g in forces.GROUPS.values() if not g.builtin and tables.get(g.table_key)]


def _check_ends(e, w, markers, marker_rows):
    """An element's two markers exist and lie on different bodies."""
    for end in ("marker_1", "marker_2"):
        if e.get(end) not in marker_rows:
            raise ModelError(f"{w}.{end} = {e.get(end)!r} is not a marker index")
    b1 = markers[marker_rows[e["marker_1"]]]["body"]
    b2 = markers[marker_rows[e["marker_2"]]]["body"]
    if b1 == b2:
        raise ModelError(f"{w}: both markers are on body {b1}")


def _non_negative(arr, what):
    """Stiffness and damping of a bushing: a negative value feeds energy into the
    axle (a negative linear coefficient; curves carry their own sign)."""
    bad = np.nonzero(arr < 0)[0]
    if len(bad):
        i = int(bad[0])
        raise ModelError(f"{what} = {arr.tolist()}: {DIRECTIONS[i]} = {arr[i]} must be >= 0 "
                         "(a negative stiffness or damping feeds energy into the axle)")
    return arr


# keys of a P2P row that its kind does not use, and why (a key given where it
# would be ignored, or act where it should not, is an error)
P2P_NOT_FOR = {"spring": ("clearance",),
               "damper": ("stiffness", "clearance", "seat_offset"),
               "bump_stop": ("stiffness", "preload", "damping", "seat_offset"),
               "rebound_stop": ("stiffness", "preload", "damping", "seat_offset")}
P2P_WHY = {"clearance": "only stops engage after a clearance",
           "stiffness": "its force is its own law; a spring-damper is a `spring` with `damping`",
           "preload": "a stop pushes only when engaged",
           "damping": "it would act at every length, engaged or not; give the damping to the damper",
           "seat_offset": "a seat offset sets a spring's ride height"}


def _check_p2p(e, w, m1, m2):
    kind = e.get("kind")
    if kind not in P2P_KINDS:
        raise ModelError(f"{w}.kind = {kind!r} is not one of {P2P_KINDS}")
    length = np.linalg.norm(np.subtract(m2["position"], m1["position"]))
    if length < 1e-6:
        raise ModelError(f"{w}: markers coincide at the design position (length {length} m); "
                         "a P2P element needs a line of action")
    for fld in ("stiffness", "damping", "preload", "clearance", "length", "seat_offset"):
        if fld in e and e[fld] is not None:
            _finite(e[fld], f"{w}.{fld}")
    if e.get("clearance") is not None and e["clearance"] < 0:
        raise ModelError(f"{w}.clearance = {e['clearance']} must be >= 0")
    if e.get("length") is not None and not e["length"] > 0:
        raise ModelError(f"{w}.length = {e['length']} must be > 0 [m] (leave it out for the design distance)")
    for fld in P2P_NOT_FOR.get(kind, ()):
        if e.get(fld) is not None:
            raise ModelError(f"{w}.{fld}: a {kind} has no {fld} ({P2P_WHY[fld]})")
    if kind in ("bump_stop", "rebound_stop"):
        if "curve" not in e:
            raise ModelError(f"{w}: a {kind} needs a 'curve' (penetration -> force)")
        x, y = _check_curve(e["curve"], f"{w}.curve")
        if x[0] != 0 or y[0] != 0:
            raise ModelError(f"{w}.curve must start at (0, 0) so that the force is "
                             f"continuous at engagement (got ({x[0]}, {y[0]}))")
    if "curve" in e and kind in ("spring", "damper"):
        x, y = _check_curve(e["curve"], f"{w}.curve")
        if kind == "damper" and not np.any((np.asarray(x) == 0) & (np.asarray(y) == 0)):
            raise ModelError(f"{w}.curve must pass through (0, 0): a damper pushes nothing at rest "
                             "(a gas force is the damper's `preload`)")
    if "law" in e:
        if kind not in ("bump_stop", "rebound_stop"):
            raise ModelError(f"{w}.law = {e['law']!r}: only a bump_stop or rebound_stop has a law "
                             f"({' | '.join(STOP_LAWS)})")
        if e["law"] not in STOP_LAWS:
            raise ModelError(f"{w}.law = {e['law']!r} is not one of {', '.join(STOP_LAWS)}")
    fr = e.get("friction")
    if fr is not None:
        if kind != "damper":
            raise ModelError(f"{w}.friction: only a damper has friction (kind is {kind!r})")
        if not isinstance(fr, dict):
            raise ModelError(f"{w}.friction = {fr!r} must be a mapping with 'force' [N]")
        unknown = sorted(set(fr) - set(FRICTION_KEYS))
        if unknown:
            raise ModelError(f"{w}.friction: unknown key {unknown[0]!r} (known: {', '.join(FRICTION_KEYS)})")
        law = fr.get("law", "switching")
        if law not in FRICTION_LAWS:
            raise ModelError(f"{w}.friction.law = {law!r} is not one of {', '.join(FRICTION_LAWS)}")
        for key in ("force", "stiffness", "damping", "velocity"):
            if key in fr:
                val = float(_finite(fr[key], f"{w}.friction.{key}"))
                if val < 0 or (key in ("stiffness", "velocity") and val == 0):
                    raise ModelError(f"{w}.friction.{key} = {fr[key]} must be "
                                     f"{'> 0' if key in ('stiffness', 'velocity') else '>= 0'}")
        if "force" not in fr:
            raise ModelError(f"{w}.friction: missing field 'force' (Coulomb force [N])")


# --------------------------------------------------------------------------- building

def _p2p_law(e, length_design):
    """Translate a P2P row into (L_ref, k, preload, c, elastic curve, damping curve).

    Laws (tension T > 0 pulls the bodies together; compression travel
    ``s = L_ref - L``; extension rate ``dL/dt``):
      spring:       push = preload + stiffness * s, or push = curve(s)
                    (curve: compression travel [m] -> force [N], preload included)
      damper:       T = damping * dL/dt, or T = curve(dL/dt)
                    (curve: rebound/extension velocity [m/s] -> force [N])
      bump_stop:    push = curve(s - clearance) for s > clearance, else 0
      rebound_stop: T = curve(-s - clearance) for -s > clearance, else 0
    A stop's ``law``: ``smooth`` (default) evaluates this by the sign of the
    penetration in every evaluation (the force has a kink at engagement
    that a fixed step may straddle); ``switching`` makes engagement and
    release state events: the time loop locates them (root function: the
    penetration) and integrates each side with its own smooth law (in
    contact the curve continued linearly through engagement, free: 0).
    ``length`` (default: design distance of the markers) is L_ref;
    ``seat_offset`` [m] (spring seat / packer adjustment, + = compressed
    further at the design position) adds to it. Curves carry their
    ``interpolation`` (default pchip), bump/rebound stop curves are pchip
    unless stated.
    """
    kind = e["kind"]
    L = float(e.get("length") or length_design) + float(e.get("seat_offset") or 0.0)
    k = float(e.get("stiffness") or 0.0)
    f0 = float(e.get("preload") or 0.0)
    c = float(e.get("damping") or 0.0)
    kcurve = ccurve = None
    interp = (e.get("curve") or {}).get("interpolation", "pchip")
    if kind == "spring" and "curve" in e:
        kcurve = (np.asarray(e["curve"]["x"], float), np.asarray(e["curve"]["y"], float),
                  ("linear", "linear"), interp)
        k = f0 = 0.0
    elif kind == "damper" and "curve" in e:
        ccurve = (np.asarray(e["curve"]["x"], float), np.asarray(e["curve"]["y"], float),
                  ("linear", "linear"), interp)
        c = 0.0
    elif kind == "bump_stop":
        cl = float(e.get("clearance") or 0.0)
        kcurve = (np.asarray(e["curve"]["x"], float) + cl, np.asarray(e["curve"]["y"], float),
                  ("constant", "linear"), interp)
        k = f0 = 0.0
    elif kind == "rebound_stop":
        cl = float(e.get("clearance") or 0.0)
        x = np.asarray(e["curve"]["x"], float)
        y = np.asarray(e["curve"]["y"], float)
        kcurve = (-(x + cl)[::-1], -y[::-1], ("linear", "constant"), interp)
        k = f0 = 0.0
    return L, k, f0, c, kcurve, ccurve


# defaults of the switching friction law [added]: the stuck damper is a stiff
# spring-damper that holds the rod against the tube (elastic stick, the
# rod guide and seal compliance): 1e6 N/m (1 mm under 1 kN), damping 2000 N s/m
# (critically damps 1 kg of rod against that stiffness); regularised law: 1 mm/s
FRICTION_DEFAULTS = {"stiffness": 1.0e6, "damping": 2.0e3, "velocity": 1.0e-3}


def _p2p_friction(e):
    """(force, stick stiffness, stick damping, regularisation velocity, event)
    of a P2P row's ``friction`` (dampers only):

      friction: {force: F_c [N], law: switching | regularised,
                 stiffness: [N/m], damping: [N s/m], velocity: [m/s]}

    switching (default): while sliding the tension is F_c sign(dL/dt) (the
    sign held as the mode of the law); when dL/dt crosses zero the damper
    sticks: a spring-damper (``stiffness``, ``damping``) anchored at the
    length where it stuck, until its force reaches F_c and it slides again
    in that direction - both switches are state events (root functions),
    located by the time loop. regularised: F_c tanh((dL/dt) / velocity),
    smooth, no events (the stiffness of the law grows as F_c / velocity).
    Defaults: :data:`FRICTION_DEFAULTS`."""
    fr = e.get("friction")
    if not fr:
        return 0.0, 0.0, 0.0, 0.0, ""
    get = lambda key: float(fr.get(key, FRICTION_DEFAULTS[key]))  # noqa: E731
    if fr.get("law", "switching") == "regularised":
        return float(fr["force"]), 0.0, 0.0, get("velocity"), ""
    return float(fr["force"]), get("stiffness"), get("damping"), 0.0, "friction"


def _tables_to_arrays(specs, n_knots):
    zero = (np.array([0.0, 1.0]), np.array([0.0, 0.0]), ("linear", "linear"), "linear")
    tabs = [curves.hermite_table(*(s or zero)[:2], n_knots=n_knots, extrapolate=(s or zero)[2],
                                 interpolation=(s or zero)[3])
            for s in specs]
    return curves.stack_tables(tabs)


def build_model(tables) -> Model:
    """Validate plain tables and build the :class:`Model` pytree (float64)."""
    validate_tables(tables)
    bodies = tables["bodies"]
    slot = {b["index"]: i for i, b in enumerate(bodies)}
    markers = {mk["index"]: mk for mk in tables["markers"]}
    flex = _flexible_layout(tables, slot, len(bodies))
    m = len(bodies) + flex["n_slots"]        # rigid bodies, then the modal slots
    slot[GROUND] = m

    pos = np.array([b["position"] for b in bodies], float)
    eul = np.array([b.get("euler", [0, 0, 0]) for b in bodies], float)
    from kernels.rotations import euler_to_matrix
    R_body = euler_to_matrix(eul)
    pos_g = np.vstack([pos, np.zeros((m - len(bodies) + 1, 3))])
    R_g = np.concatenate([R_body, np.tile(np.eye(3), (m - len(bodies) + 1, 1, 1))], 0)
    iface_of = flex["interface_of_marker"]

    def ends_interfaces(rows):
        return np.array([(iface_of.get(e["marker_1"], -1), iface_of.get(e["marker_2"], -1))
                         for e in rows], int).reshape(-1, 2)

    def local(mk_index):
        mk = markers[mk_index]
        s = slot[mk["body"]]
        Rm = np.asarray(mk.get("orientation", np.eye(3)), float)
        p = R_g[s].T @ (np.asarray(mk["position"], float) - pos_g[s])
        return s, p, R_g[s].T @ Rm

    # bushings
    bu = tables.get("bushings", [])
    nb = len(bu)
    bu_bodies = np.zeros((nb, 2), int)
    p1 = np.zeros((nb, 3)); p2 = np.zeros((nb, 3))
    R1 = np.tile(np.eye(3), (nb, 1, 1)); R2 = R1.copy()
    k = np.zeros((nb, 6)); c = np.zeros((nb, 6))
    pre = np.zeros((nb, 6)); off = np.zeros((nb, 6))
    play = np.zeros((nb, 6)); bu_events = []
    kspec = [[None] * 6 for _ in range(nb)]
    cspec = [[None] * 6 for _ in range(nb)]
    for i, e in enumerate(bu):
        s1, p1[i], R1[i] = local(e["marker_1"])
        s2, p2[i], R2[i] = local(e["marker_2"])
        bu_bodies[i] = (s1, s2)
        k[i] = e["stiffness"]; c[i] = e["damping"]
        pre[i] = e.get("preload") or np.zeros(6)
        off[i] = e.get("offset") or np.zeros(6)
        play[i] = e.get("play") or np.zeros(6)
        bu_events.append(bool(e.get("play_law") == "switching" and np.any(play[i] > 0)))
        for d, cv in (e.get("stiffness_curves") or {}).items():
            j = DIRECTIONS.index(d)
            kspec[i][j] = (np.asarray(cv["x"], float), np.asarray(cv["y"], float),
                           ("linear", "linear"), cv.get("interpolation", "pchip"))
            k[i, j] = 0.0
        for d, cv in (e.get("damping_curves") or {}).items():
            j = DIRECTIONS.index(d)
            cspec[i][j] = (np.asarray(cv["x"], float), np.asarray(cv["y"], float),
                           ("linear", "linear"), cv.get("interpolation", "pchip"))
            c[i, j] = 0.0

    # P2P
    pp = tables.get("p2p", [])
    npp = len(pp)
    pp_bodies = np.zeros((npp, 2), int)
    q1 = np.zeros((npp, 3)); q2 = np.zeros((npp, 3))
    L = np.zeros(npp); pk = np.zeros(npp); pf = np.zeros(npp); pc = np.zeros(npp)
    pkspec, pcspec = [], []
    engage = np.zeros(npp); esign = np.zeros(npp); k0 = np.zeros(npp)
    fric = np.zeros((npp, 4)); p2p_events = []
    for i, e in enumerate(pp):
        s1, q1[i], _ = local(e["marker_1"])
        s2, q2[i], _ = local(e["marker_2"])
        pp_bodies[i] = (s1, s2)
        Ld = np.linalg.norm(np.subtract(markers[e["marker_2"]]["position"],
                                        markers[e["marker_1"]]["position"]))
        L[i], pk[i], pf[i], pc[i], kc, cc = _p2p_law(e, Ld)
        event = ""
        if e["kind"] in ("bump_stop", "rebound_stop"):
            cl = float(e.get("clearance") or 0.0)
            esign[i] = 1.0 if e["kind"] == "bump_stop" else -1.0
            engage[i] = L[i] - esign[i] * cl
            cv = e["curve"]
            k0[i] = curves.hermite_table(cv["x"], cv["y"], interpolation=cv.get(
                "interpolation", "pchip"))["coef"][1][1]
            event = "contact" if e.get("law", "smooth") == "switching" else ""
        *fric[i], fevent = _p2p_friction(e)
        p2p_events.append(event or fevent)
        pkspec.append(kc); pcspec.append(cc)

    all_specs = [s for row in kspec + cspec for s in row] + pkspec + pcspec
    n_knots = max([2] + [len(s[0]) for s in all_specs if s is not None])

    def bushing_curves(spec):
        flat = _tables_to_arrays([s for row in spec for s in row], n_knots)
        return {kk: v.reshape((nb, 6) + v.shape[1:]) for kk, v in flat.items()}

    # registered element groups: slots and names from the rows, parameters from the group's build
    extra_groups, group_names, group_bodies, elements = [], {}, {}, {}
    for group in _table_groups(tables):
        rows = tables[group.table_key]
        ends = [(local(e["marker_1"]), local(e["marker_2"])) for e in rows]
        group_bodies[group.name] = np.array([(a[0], b[0]) for a, b in ends], int).reshape(-1, 2)
        group_names[group.name] = tuple(e["name"] for e in rows)
        prm = group.build(rows, {"pos1": np.array([a[1] for a, _ in ends]).reshape(-1, 3),
                                 "rot1": np.array([a[2] for a, _ in ends]).reshape(-1, 3, 3),
                                 "pos2": np.array([b[1] for _, b in ends]).reshape(-1, 3),
                                 "rot2": np.array([b[2] for _, b in ends]).reshape(-1, 3, 3)})
        elements[group.name] = jax.tree_util.tree_map(_as_leaf, prm)
        extra_groups.append(group)

    nq = flex["n_slots"]
    inertia = np.concatenate([np.array([b["inertia"] for b in bodies], float).reshape(-1, 3, 3),
                              np.tile(np.eye(3), (nq, 1, 1))])
    element_interfaces = {}
    if nq:
        element_interfaces = {forces.BUSHING.name: ends_interfaces(bu), forces.P2P.name: ends_interfaces(pp)}
        element_interfaces.update({g.name: ends_interfaces(tables[g.table_key]) for g in extra_groups})
    wheels = tables["wheels"]
    topo = Topology(
        name=str(tables.get("name", "model")),
        body_names=tuple(b["name"] for b in bodies) + flex["slot_names"],
        body_index=tuple(b["index"] for b in bodies) + tuple(-1 - j for j in range(nq)),
        bushing_names=tuple(e["name"] for e in bu),
        bushing_bodies=bu_bodies,
        p2p_names=tuple(e["name"] for e in pp),
        p2p_kinds=tuple(e["kind"] for e in pp),
        p2p_events=tuple(p2p_events),
        bushing_events=tuple(bu_events),
        p2p_bodies=pp_bodies,
        wheel_slots=np.array([slot[wheels["left"]], slot[wheels["right"]]]),
        tables=tables,
        extra_groups=tuple(extra_groups), group_names=group_names, group_bodies=group_bodies,
        flex_bodies=flex["bodies"], flex_interface_body=flex["interface_body"],
        element_interfaces=element_interfaces,
    )
    f = lambda a: jnp.asarray(a, jnp.float64)  # noqa: E731
    tree = lambda d: {kk: f(v) for kk, v in d.items()}  # noqa: E731
    return Model(
        mass=f([b["mass"] for b in bodies] + [1.0] * nq), inertia=f(inertia),
        gravity=f(tables.get("gravity", [0, 0, -9.81])),
        r_design=f(np.vstack([np.hstack([pos, eul]), np.zeros((nq, 6))])),
        elements={forces.BUSHING.name: {
            "pos1": f(p1), "rot1": f(R1), "pos2": f(p2), "rot2": f(R2),
            "k": f(k), "c": f(c), "preload": f(pre), "offset": f(off),
            "kc": tree(bushing_curves(kspec)), "cc": tree(bushing_curves(cspec)),
            "k_scale": f(np.ones((nb, 6))), "c_scale": f(np.ones((nb, 6))),
            "play": f(play), "play_mode": f(np.full((nb, 6), forces.PLAY_AUTO))},
            forces.P2P.name: {
            "pos1": f(q1), "pos2": f(q2), "length": f(L), "k": f(pk), "preload": f(pf), "c": f(pc),
            "kc": tree(_tables_to_arrays(pkspec, n_knots)), "cc": tree(_tables_to_arrays(pcspec, n_knots)),
            "k_scale": f(np.ones(npp)), "c_scale": f(np.ones((npp, 2))),
            "engage": f(engage), "engage_sign": f(esign), "k0": f(k0),
            "friction": f(fric[:, 0]), "friction_k": f(fric[:, 1]), "friction_c": f(fric[:, 2]),
            "friction_v": f(fric[:, 3]),
            "contact": f(np.full(npp, CONTACT_AUTO)), "slip": f(np.full(npp, SLIP_OFF)), "anchor": f(L)},
            **elements},
        topology=topo, flex=tree(flex["arrays"]),
    )


def _flexible_layout(tables, slot, m_rigid):
    """Slots, names and arrays of the (validated) ``flexible_bodies`` rows.

    The modal coordinates of each flexible body take ``n / 6`` state slots
    after the ``m_rigid`` rigid bodies (mass 1, inertia the identity: the
    unit modal mass), named ``<name>.modes_<j>``."""
    rows = tables.get("flexible_bodies", [])
    out = {"n_slots": 0, "slot_names": (), "bodies": (), "interface_body": (),
           "interface_of_marker": {}, "arrays": {}}
    if not rows:
        return out
    n_max = max(len(fb["frequencies"]) for fb in rows)
    k, c, phi, psi, fbodies, names, ibody = [], [], [], [], [], [], []
    nxt = m_rigid
    for b, fb in enumerate(rows):
        f = np.asarray(fb["frequencies"], float)
        n = len(f)
        w = 2.0 * np.pi * f
        zeta = np.broadcast_to(np.asarray(fb.get("damping_ratio", 0.0), float), (n,))
        k.append((w * w).reshape(-1, 6))
        c.append((2.0 * zeta * w).reshape(-1, 6))
        slots = tuple(range(nxt, nxt + n // 6))
        nxt += n // 6
        fbodies.append((slot[fb["body"]], slots))
        names += [f"{fb['name']}.modes_{j}" for j in range(n // 6)]
        for itf in fb["interfaces"]:
            out["interface_of_marker"][itf["marker"]] = len(ibody)
            ibody.append(b)
            pad = ((0, 0), (0, n_max - n))
            phi.append(np.pad(np.asarray(itf["translation"], float), pad))
            psi.append(np.pad(np.asarray(itf["rotation"], float), pad))
    out.update(n_slots=nxt - m_rigid, slot_names=tuple(names), bodies=tuple(fbodies),
               interface_body=tuple(ibody),
               arrays={"k": np.concatenate(k), "c": np.concatenate(c),
                       "phi": np.array(phi).reshape(-1, 3, n_max), "psi": np.array(psi).reshape(-1, 3, n_max)})
    return out


def _as_leaf(a):
    """A built parameter leaf as a JAX array: floats as float64, integers kept."""
    a = np.asarray(a)
    return jnp.asarray(a, jnp.float64 if not np.issubdtype(a.dtype, np.integer) else a.dtype)


def export_tables(model: Model) -> dict:
    """Plain arrays with names for rebuilding the model in another code.

    Marker positions are vehicle-frame design positions; bushing and P2P
    characteristics are as given in the input tables.
    """
    return model.topology.tables


def cast_floats(tree, dtype):
    """Every floating-point array leaf of a pytree (a :class:`Model`, an
    excitation, a state) cast to ``dtype``; integer index tables stay as they
    are. ``cast_floats(x, jnp.float32)`` is the float32 speed option, whose
    accuracy cost BENCHMARKS.md reports (float64 is the default)."""
    return jax.tree_util.tree_map(
        lambda a: a.astype(dtype) if hasattr(a, "dtype") and jnp.issubdtype(a.dtype, jnp.floating) else a, tree)
