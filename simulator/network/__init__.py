"""Flow-level network model: resources, flow classes, max-min sharing, the engine and its closed form."""

from simulator.network.closed_form import uncontended_time_s
from simulator.network.engine import FlowEngine
from simulator.network.flows import FlowClass, FlowRecord, NetworkError, Resource
from simulator.network.maxmin import max_min_rates

__all__ = [
    "FlowClass",
    "FlowEngine",
    "FlowRecord",
    "NetworkError",
    "Resource",
    "max_min_rates",
    "uncontended_time_s",
]
