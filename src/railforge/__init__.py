"""Railforge: gang scheduling, simulation and validation for multi-node GPU + RDMA clusters."""

__version__ = "0.1.0"
