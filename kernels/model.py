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
             :func:`kernels.forces.p2p_law_parameters`; stops: ``law`` (smooth |
             switching), dampers: ``friction``
             (:func:`kernels.forces.p2p_friction_parameters`).
``element_groups``  optional: the force-element groups the model adds to
             the built-in ones (:class:`kernels.forces.ElementGroup` objects,
             :class:`kernels.forces.ElementRegistry`).
other        an added element group's section (its ``table_key``): index,
             name, marker_1, marker_2 and the group's own fields (checked by
             its ``validate``).
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

Every element group - the bushings and P2P elements too - is checked and
built the same way (:class:`kernels.forces.ElementGroup`: ``validate``,
``describe``, ``build``); this module checks what every group shares (the
markers) and lays out the bodies, the groups and the flexible bodies.

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

from kernels import forces
from kernels.tables import ModelError, finite, rows as _rows, vector, where
from kernels.names import DIRECTIONS, SIDES

__all__ = ["DIRECTIONS", "P2P_KINDS", "GROUND", "ModelError", "Topology", "Model",
           "validate_tables", "build_model", "export_tables", "cast_floats"]
P2P_KINDS, STOP_LAWS = forces.P2P_KINDS, forces.STOP_LAWS
GROUND = 0
# table sections that traced functions read from ``Topology.tables`` (host
# side, folded into the program): part of ``Topology.structure``
TRACED_TABLES = ("steering_joints", "travel_lock", "vehicle", "reference_bushings")


@dataclasses.dataclass(frozen=True, eq=False)
class Topology:
    """Static (non-traced) part of a model: sizes, names, index arrays.

    Hashed and compared by structure (names and index arrays, not the
    informational ``tables``) so that it can be a static pytree field:
    functions jitted for one model are reused for every model of the same
    structure, whatever its parameter values. Added element groups
    (``extra_groups``) enter the hash by identity, with their names and body
    slots: a model built with another group object of the same name is
    another structure (no stale compiled function).
    """
    name: str
    body_names: tuple
    body_index: tuple          # user index of each state slot
    wheel_slots: np.ndarray     # (2,) state slots of left and right wheel
    tables: Any                 # the validated plain tables (exportable)
    # added (not built-in) element groups the model was built with
    # (kernels.forces.ElementGroup, in the tables' element_groups order); every group's
    # elements (the built-in groups' too), by group name: their names, their
    # (n, 2) state slots (slot n_bodies = ground) and what its ``describe``
    # says of them (e.g. "p2p": kinds, events)
    extra_groups: tuple = ()
    group_names: dict = dataclasses.field(default_factory=dict)    # {group: names}
    group_bodies: dict = dataclasses.field(default_factory=dict)   # {group: (n, 2) slots}
    group_static: dict = dataclasses.field(default_factory=dict)   # {group: {key: per-element tuple}}
    flex_bodies: tuple = ()
    flex_interface_body: tuple = ()      # per interface: its flexible body
    element_interfaces: dict = dataclasses.field(default_factory=dict)

    @property
    def n_bodies(self):
        return len(self.body_names)

    # the built-in groups' elements by their old names
    bushing_names = property(lambda self: self.group_names.get("bushing", ()))
    bushing_bodies = property(lambda self: self.group_bodies.get("bushing", np.zeros((0, 2), int)))
    p2p_names = property(lambda self: self.group_names.get("p2p", ()))
    p2p_bodies = property(lambda self: self.group_bodies.get("p2p", np.zeros((0, 2), int)))
    # per P2P element: its kind (kernels.forces.P2P_KINDS) and its state event:
    # "contact" (a stop with the switching law), "friction" (a damper with
    # switching Coulomb friction) or "" - the elements with a root function
    # (kernels.system: state events)
    p2p_kinds = property(lambda self: self.group_static.get("p2p", {}).get("kinds", ()))
    p2p_events = property(lambda self: self.group_static.get("p2p", {}).get("events", ()))
    # per bushing: True where its play has the switching law (state events)
    bushing_events = property(lambda self: self.group_static.get("bushing", {}).get("events", ()))

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
        groups = tuple((g.name if g.builtin else g, tuple(self.group_names.get(g.name, ())),
                        np.asarray(self.group_bodies.get(g.name, np.zeros((0, 2), int))).tobytes(),
                        tuple(sorted(self.group_static.get(g.name, {}).items())))
                       for g in self.element_groups)
        return (self.name, self.body_names, groups, self.wheel_slots.tobytes(), self.flex_bodies,
                self.flex_interface_body,
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

    Shapes: m bodies (the element groups' tables: ``elements``).
    """
    mass: jax.Array            # (m,) kg
    inertia: jax.Array         # (m, 3, 3) kg m^2, body frame, about the CoM
    gravity: jax.Array         # (3,) m/s^2
    r_design: jax.Array        # (m, 6) design pose
    topology: Topology = _field(metadata=dict(static=True))
    # the force elements' parameter tables, {group name: pytree with leading
    # axis n_group}, every group of the topology: "bushing" and "p2p" (their
    # keys: kernels.forces.BUSHING_PARAMS / P2P_PARAMS), then the added
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
        (dicts, as every group's ``build`` returns) replaced, e.g.
        ``model.replace_elements(bushing={"k": k})``; the other entries and
        groups are kept (jit/vmap/grad-safe)."""
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

def _rotation(value, what):
    R = finite(value, what)
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
        w = where("bodies", i, b)
        if b["index"] == GROUND:
            raise ModelError(f"{w}.index = 0 is reserved for the ground (chassis)")
        mass = b.get("mass")
        if (isinstance(mass, bool) or not isinstance(mass, (int, float, np.number))
                or not np.isfinite(mass) or mass <= 0):
            raise ModelError(f"{w}.mass = {mass!r} must be a positive number [kg]")
        inertia = finite(b.get("inertia", np.nan), f"{w}.inertia")
        if inertia.shape != (3, 3):
            raise ModelError(f"{w}.inertia must be a 3x3 matrix")
        if not np.allclose(inertia, inertia.T, rtol=1e-12, atol=1e-14):
            raise ModelError(f"{w}.inertia = {inertia.tolist()} is not symmetric")
        eig = np.linalg.eigvalsh(inertia)
        if eig[0] <= 0:
            raise ModelError(f"{w}.inertia = {inertia.tolist()} is not positive definite "
                             f"(eigenvalues {eig.tolist()})")
        vector(b, "position", 3, w)
        vector(b, "euler", 3, w, default=[0, 0, 0])
    markers, marker_rows = _rows(tables, "markers")
    for i, mk in enumerate(markers):
        w = where("markers", i, mk)
        if mk.get("body") != GROUND and mk.get("body") not in body_rows:
            raise ModelError(f"{w}.body = {mk.get('body')!r} is not a body index")
        vector(mk, "position", 3, w)
        _rotation(mk.get("orientation", np.eye(3)), f"{w}.orientation")
    for group in element_groups_of(tables):
        rows, _ = _rows(tables, group.table_key)
        for i, e in enumerate(rows):
            w = where(group.table_key, i, e)
            _check_ends(e, w, markers, marker_rows, group.min_length)
            if group.validate is not None:
                group.validate(e, w)
    _check_flexible(tables, bodies, body_rows, markers, marker_rows)
    wheels = tables.get("wheels") or {}
    for side in SIDES:
        if wheels.get(side) not in body_rows:
            raise ModelError(f"wheels.{side} = {wheels.get(side)!r} is not a body index")
    vector(tables, "gravity", 3, "model", default=[0, 0, -9.81])
    return tables


def _check_flexible(tables, bodies, body_rows, markers, marker_rows):
    """The ``flexible_bodies`` rows: frame body, modes, damping, interfaces."""
    rows, _ = _rows(tables, "flexible_bodies")
    wheels = tables.get("wheels") or {}
    seen = {}
    for i, fb in enumerate(rows):
        w = where("flexible_bodies", i, fb)
        b = fb.get("body")
        if b not in body_rows:
            raise ModelError(f"{w}.body = {b!r} is not a body index")
        if b in seen:
            raise ModelError(f"{w}.body = {b} is already flexible_bodies[{seen[b]}]")
        if b in (wheels.get("left"), wheels.get("right")):
            raise ModelError(f"{w}.body = {b} is a wheel body; a wheel must be rigid")
        seen[b] = i
        f = finite(fb.get("frequencies", np.nan), f"{w}.frequencies")
        if f.ndim != 1 or len(f) == 0 or len(f) % 6:
            raise ModelError(f"{w}.frequencies has {f.size} values: need a positive multiple of 6 "
                             "(the modal coordinates fill whole state slots of 6)")
        if np.any(f <= 0):
            raise ModelError(f"{w}.frequencies = {f.tolist()}: every frequency must be > 0 [Hz]")
        n = len(f)
        zeta = finite(fb.get("damping_ratio", 0.0), f"{w}.damping_ratio")
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
                a = finite(itf.get(key, np.nan), f"{wj}.{key}")
                if a.shape != (3, n):
                    raise ModelError(f"{wj}.{key} has shape {a.shape}: need (3, {n})")
        loose = sorted(on_body - listed)
        if loose:
            raise ModelError(f"markers index {loose[0]} is on flexible body {b} but is not one of "
                             f"{w}.interfaces (a force element attaches at an interface node)")


def element_groups_of(tables):
    """The element groups a model of these tables has: the built-in groups
    (always, with or without rows), then every group of
    ``tables["element_groups"]`` whose section has rows, in that order
    (:meth:`kernels.forces.ElementRegistry.of_tables`). A wrong entry is a
    :class:`ModelError` naming it."""
    return registry_of(tables).of_tables(tables)


def registry_of(tables) -> "forces.ElementRegistry":
    """The :class:`kernels.forces.ElementRegistry` of the tables' ``element_groups``."""
    added = tables.get("element_groups") or ()
    if isinstance(added, forces.ElementRegistry):
        return added
    if not isinstance(added, (list, tuple)):
        raise ModelError(f"element_groups = {added!r}: must be a list of kernels.forces.ElementGroup")
    try:
        return forces.ElementRegistry(tuple(added))
    except (TypeError, ValueError) as err:
        raise ModelError(f"element_groups: {err}") from None


def _check_ends(e, w, markers, marker_rows, min_length=0.0):
    """An element's two markers exist and lie on different bodies (and at
    least ``min_length`` apart at the design position, for a group whose law
    acts along the line between them)."""
    for end in ("marker_1", "marker_2"):
        if e.get(end) not in marker_rows:
            raise ModelError(f"{w}.{end} = {e.get(end)!r} is not a marker index")
    m1, m2 = markers[marker_rows[e["marker_1"]]], markers[marker_rows[e["marker_2"]]]
    if m1["body"] == m2["body"]:
        raise ModelError(f"{w}: both markers are on body {m1['body']}")
    if min_length:
        length = np.linalg.norm(np.subtract(m2["position"], m1["position"]))
        if length < min_length:
            raise ModelError(f"{w}: markers coincide at the design position (length {length} m); "
                             "this element acts along the line between them and needs one")


# --------------------------------------------------------------------------- building

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

    # every element group: slots and names from the rows, structure from its
    # describe, parameters from its build
    groups = element_groups_of(tables)
    group_names, group_bodies, group_static, elements = {}, {}, {}, {}
    for group in groups:
        rows = tables.get(group.table_key, [])
        ends = [(local(e["marker_1"]), local(e["marker_2"])) for e in rows]
        group_bodies[group.name] = np.array([(a[0], b[0]) for a, b in ends], int).reshape(-1, 2)
        group_names[group.name] = tuple(e["name"] for e in rows)
        group_static[group.name] = {k: tuple(v) for k, v in (group.describe(rows) if group.describe else {}).items()}
        point = lambda end: np.array([markers[e[end]]["position"] for e in rows], float).reshape(-1, 3)  # noqa: E731
        prm = group.build(rows, {"pos1": np.array([a[1] for a, _ in ends]).reshape(-1, 3),
                                 "rot1": np.array([a[2] for a, _ in ends]).reshape(-1, 3, 3),
                                 "pos2": np.array([b[1] for _, b in ends]).reshape(-1, 3),
                                 "rot2": np.array([b[2] for _, b in ends]).reshape(-1, 3, 3),
                                 "point1": point("marker_1"), "point2": point("marker_2")})
        elements[group.name] = jax.tree_util.tree_map(_as_leaf, prm)
        if group.input is not None and rows:
            _check_input(group, elements[group.name], len(rows))

    nq = flex["n_slots"]
    inertia = np.concatenate([np.array([b["inertia"] for b in bodies], float).reshape(-1, 3, 3),
                              np.tile(np.eye(3), (nq, 1, 1))])
    element_interfaces = {}
    if nq:
        element_interfaces = {g.name: ends_interfaces(tables.get(g.table_key, [])) for g in groups}
        for g in groups:
            if g.input is not None and np.any(element_interfaces[g.name] >= 0):
                raise ModelError(f"{g.table_key}: element group {g.name!r} reads a time-varying input; its "
                                 "elements cannot attach at a flexible body's interface")
    wheels = tables["wheels"]
    topo = Topology(
        name=str(tables.get("name", "model")),
        body_names=tuple(b["name"] for b in bodies) + flex["slot_names"],
        body_index=tuple(b["index"] for b in bodies) + tuple(-1 - j for j in range(nq)),
        wheel_slots=np.array([slot[wheels["left"]], slot[wheels["right"]]]),
        tables=tables,
        extra_groups=tuple(g for g in groups if not g.builtin),
        group_names=group_names, group_bodies=group_bodies, group_static=group_static,
        flex_bodies=flex["bodies"], flex_interface_body=flex["interface_body"],
        element_interfaces=element_interfaces,
    )
    f = lambda a: jnp.asarray(a, jnp.float64)  # noqa: E731
    tree = lambda d: {kk: f(v) for kk, v in d.items()}  # noqa: E731
    return Model(
        mass=f([b["mass"] for b in bodies] + [1.0] * nq), inertia=f(inertia),
        gravity=f(tables.get("gravity", [0, 0, -9.81])),
        r_design=f(np.vstack([np.hstack([pos, eul]), np.zeros((nq, 6))])),
        elements=elements,
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


def _check_input(group, prm, n):
    """A group that reads a time-varying input: its built ``input`` entry is
    (n, k) and ``input(prm, t)`` gives (k,) for one element; no state events
    (their root functions would see the input at rest)."""
    w = f"{group.table_key}: element group {group.name!r} reads a time-varying input"
    inp = prm.get("input") if isinstance(prm, dict) else None
    if inp is None or np.ndim(inp) != 2 or np.shape(inp)[0] != n:
        raise ModelError(f"{w}; its build must give an 'input' entry of shape (n, k) with n = {n} "
                         "(the input at rest)")
    one = jax.tree_util.tree_map(lambda a: a[0], prm)
    shape = jax.eval_shape(group.input, one, jnp.zeros((), jnp.float64)).shape
    if shape != (np.shape(inp)[1],):
        raise ModelError(f"{w}: input(prm, t) gives shape {shape} for one element, its built 'input' entry "
                         f"({np.shape(inp)[1]},)")
    if group.events is not None:
        raise ModelError(f"{w}: a group with an input cannot have state events")


def _as_leaf(a):
    """A built parameter leaf as a JAX array: floats as float64, integers kept."""
    a = np.asarray(a)
    return jnp.asarray(a, jnp.float64 if not np.issubdtype(a.dtype, np.integer) else a.dtype)


def export_tables(model: Model) -> dict:
    """Plain arrays with names for rebuilding the model in another code.

    Marker positions are vehicle-frame design positions; bushing and P2P
    characteristics are as given in the input tables. A model with added
    element groups also has their :class:`kernels.forces.ElementGroup`
    objects under ``element_groups`` (Python objects, not plain data).
    """
    return model.topology.tables


def cast_floats(tree, dtype):
    """Every floating-point array leaf of a pytree (a :class:`Model`, an
    excitation, a state) cast to ``dtype``; integer index tables stay as they
    are. ``cast_floats(x, jnp.float32)`` is the float32 speed option, whose
    accuracy cost BENCHMARKS.md reports (float64 is the default)."""
    return jax.tree_util.tree_map(
        lambda a: a.astype(dtype) if hasattr(a, "dtype") and jnp.issubdtype(a.dtype, jnp.floating) else a, tree)
