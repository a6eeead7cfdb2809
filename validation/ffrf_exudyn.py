"""The flexible beam of tests/kernels/test_flexible.py in Exudyn, as an
``ObjectFFRFreducedOrder`` on the same Craig-Bampton data.

Exudyn's reduced-order FFRF body works on mesh nodes with 3 translational
DOF (solid-element meshes); the beam frame has 6 DOF per node. Each beam
node j is therefore given to Exudyn as 7 points: the node and 6 satellites
at +-d along the body axes, rigidly attached to it for small motion
(``u_sat = u_j + theta_j x (+-d e_k)``, the map B_j). The mode basis
``B Phi``, the mass matrix ``B+^T M B+`` and the stiffness ``B+^T K B+``
(B+ the pseudo-inverse) keep the kinetic and strain energy of every motion
of the beam, so Exudyn forms the same mass, inertia, modal mass (the
identity) and modal stiffness (diag omega^2) from them, plus its own
first-order inertia couplings. An interface marker is a
``MarkerSuperElementRigid`` on the 6 satellites of its node (their centroid
is the node). Wheels are rigid bodies, the bushings Exudyn's
``ObjectConnectorRigidBodySpringDamper`` (linear, the kernels' rates; the
axle's small rotations make its Tait-Bryan measure and the kernels'
rotation vector agree to second order).
"""
from __future__ import annotations

import numpy as np

SATELLITE = 0.01     # m, distance of the 6 satellite points from their beam node


def _skew(v):
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


def satellite_map(n_nodes, d=SATELLITE):
    """B (21 n, 6 n): point displacements of node + 6 satellites per node from
    the node's (u, theta); and the points' offsets from their node (7, 3)."""
    offsets = np.vstack([np.zeros(3), d * np.eye(3), -d * np.eye(3)])
    Bj = np.vstack([np.hstack([np.eye(3), -_skew(o)]) for o in offsets])         # (21, 6)
    return np.kron(np.eye(n_nodes), Bj), offsets


def build(model, rb, nodes, M, K, u_wheels, frame_position):
    """Exudyn system of the beam on wheels and bushings: ``model`` the kernels'
    model of tests/kernels/test_flexible.beam_tables (its bushings and
    wheels), ``rb`` the ReducedBody, ``nodes``/``M``/``K`` its FE model,
    ``u_wheels`` (2, 3) constant wheel-centre forces [N] (vehicle frame),
    ``frame_position`` the body frame origin (centre of mass, vehicle frame).
    Returns (SC, mbs, sensors {name: sensor}, info)."""
    import exudyn as exu
    import exudyn.itemInterface as ei
    from exudyn.FEM import FEMinterface, ObjectFFRFreducedOrderInterface
    from exudyn.rigidBodyUtilities import RigidBodyInertia
    import scipy.sparse as sp

    topo = model.topology
    n_nodes = len(nodes)
    B, offsets = satellite_map(n_nodes)
    Bp = np.linalg.pinv(B)
    com = rb.centre_of_mass
    points = (nodes[:, None, :] - com + offsets[None]).reshape(-1, 3)        # body frame, origin at the CoM
    fem = FEMinterface()
    fem.nodes = {"Position": points}
    fem.massMatrix = sp.csr_matrix(Bp.T @ M @ Bp)
    fem.stiffnessMatrix = sp.csr_matrix(Bp.T @ K @ Bp)
    fem.modeBasis = {"matrix": B @ rb.mode_shapes, "type": "NormalModes"}
    fem.eigenValues = (2 * np.pi * rb.frequencies_hz) ** 2
    cms = ObjectFFRFreducedOrderInterface(fem)

    SC = exu.SystemContainer()
    mbs = SC.AddSystem()
    ground = mbs.AddObject(ei.ObjectGround(referencePosition=[0.0, 0.0, 0.0]))
    ffrf = cms.AddObjectFFRFreducedOrder(mbs, positionRef=list(map(float, frame_position)),
                                         gravity=[0.0, 0.0, 0.0])
    obj = ffrf["oFFRFreducedOrder"]
    r0 = np.asarray(model.r_design)
    slot = {name: i for i, name in enumerate(topo.body_names)}
    wheel_obj = {}
    for side in ("left", "right"):
        s = slot[f"wheel_{side}"]
        wheel_obj[s] = mbs.CreateRigidBody(
            referencePosition=r0[s, :3].tolist(),
            inertia=RigidBodyInertia(float(model.mass[s]), np.asarray(model.inertia[s]), [0.0, 0.0, 0.0],
                                     inertiaTensorAtCOM=True),
            gravity=[0.0, 0.0, 0.0], nodeType=exu.NodeType.RotationRxyz, show=False)
    iface_nodes = {int(k): j for j, k in enumerate(rb.interface_nodes)}

    def beam_marker(position):
        d = np.linalg.norm(nodes + 0.0 - (position - 0.0), axis=1)
        j = int(np.argmin(d))
        return mbs.AddMarker(ei.MarkerSuperElementRigid(
            bodyNumber=obj, offset=[0.0, 0.0, 0.0], meshNodeNumbers=[7 * j + k for k in range(1, 7)],
            weightingFactors=[1.0 / 6.0] * 6, visualization={"show": False, "showMarkerNodes": False}))

    markers = {mk["index"]: mk for mk in topo.tables["markers"]}
    body_of_index = {b["index"]: b["name"] for b in topo.tables["bodies"]}
    for e in topo.tables["bushings"]:
        mks = []
        for end in ("marker_1", "marker_2"):
            mk = markers[e[end]]
            p = np.asarray(mk["position"], float)
            name = body_of_index.get(mk["body"], "ground")
            if name == "beam":
                mks.append(beam_marker(p - np.asarray(frame_position) + com))
            elif name == "ground":
                mks.append(mbs.AddMarker(ei.MarkerBodyRigid(bodyNumber=ground, localPosition=p.tolist())))
            else:
                s = slot[name]
                mks.append(mbs.AddMarker(ei.MarkerBodyRigid(bodyNumber=wheel_obj[s],
                                                            localPosition=(p - r0[s, :3]).tolist())))
        mbs.AddObject(ei.ObjectConnectorRigidBodySpringDamper(
            markerNumbers=mks, stiffness=np.diag(e["stiffness"]), damping=np.diag(e["damping"])))
    sensors = {}
    for si, side in enumerate(("left", "right")):
        s = slot[f"wheel_{side}"]
        mkw = mbs.AddMarker(ei.MarkerBodyRigid(bodyNumber=wheel_obj[s], localPosition=[0.0, 0.0, 0.0]))
        mbs.AddLoad(ei.LoadForceVector(markerNumber=mkw, loadVector=list(map(float, u_wheels[si]))))
        sensors[side] = mbs.AddSensor(ei.SensorBody(bodyNumber=wheel_obj[s], storeInternal=True,
                                                    writeToFile=False,
                                                    outputVariableType=exu.OutputVariableType.Position))
    mbs.Assemble()
    return SC, mbs, sensors, {"ffrf": ffrf, "iface_nodes": iface_nodes}


def static_wheel_positions(model, rb, nodes, M, K, u_wheels, frame_position):
    """Exudyn's static solution: wheel-centre positions (2, 3) [m]."""
    import exudyn as exu
    SC, mbs, sensors, _ = build(model, rb, nodes, M, K, u_wheels, frame_position)
    opts = exu.SimulationSettings()
    opts.staticSolver.newton.relativeTolerance = 1e-12
    opts.staticSolver.newton.absoluteTolerance = 1e-10
    opts.staticSolver.newton.maxIterations = 50
    opts.staticSolver.numberOfLoadSteps = 1
    opts.solution.file.write = False
    opts.linearSolver.solverType = exu.LinearSolverType.EigenSparse
    opts.show.computationTime = False
    opts.show.statistics = False
    mbs.SolveStatic(opts)
    return np.array([mbs.GetSensorValues(sensors[s]) for s in ("left", "right")])


def step_response(model, rb, nodes, M, K, u_wheels, frame_position, t_end, h, spectral_radius=1.0):
    """Exudyn's response from rest at the design position to constant
    wheel-centre forces applied at t = 0 (generalised-alpha, step h):
    times (n,) and wheel-centre positions (n, 2, 3)."""
    import exudyn as exu
    SC, mbs, sensors, _ = build(model, rb, nodes, M, K, u_wheels, frame_position)
    opts = exu.SimulationSettings()
    opts.timeIntegration.endTime = float(t_end)
    opts.timeIntegration.numberOfSteps = int(round(t_end / h))
    opts.timeIntegration.generalizedAlpha.spectralRadius = float(spectral_radius)
    opts.timeIntegration.newton.relativeTolerance = 1e-10
    opts.timeIntegration.newton.absoluteTolerance = 1e-8
    opts.timeIntegration.verboseMode = 0
    opts.solution.sensors.writePeriod = float(h)
    opts.solution.file.write = False
    opts.linearSolver.solverType = exu.LinearSolverType.EigenSparse
    opts.show.computationTime = False
    opts.show.statistics = False
    mbs.SolveDynamic(opts)
    data = [np.asarray(mbs.GetSensorStoredData(sensors[s])) for s in ("left", "right")]
    return data[0][:, 0], np.stack([d[:, 1:4] for d in data], 1)
