"""fecbench: an experiment harness for transport-protocol research."""

__version__ = "0.1.0"
