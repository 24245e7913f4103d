"""Emulated networks: topology specs, switchless Mininet builders, link shaping (netem or delayline).

    topo = load_topology("topologies/single.toml")
    with Network(topo, {"bw": 10, "owd": 20}) as net:
        net.configure({"owd": 50})
        print(net.fidelity())
"""

from fecbench.emulation.backend import netem_available, netem_probe, select_backend
from fecbench.emulation.fidelity import rtt_ok
from fecbench.emulation.network import Network
from fecbench.emulation.spec import Shaping, Topology
from fecbench.emulation.topology_file import load_topology

__all__ = ["Network", "Shaping", "Topology", "load_topology", "netem_available", "netem_probe",
           "rtt_ok", "select_backend"]
