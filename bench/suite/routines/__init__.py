"""Routines of the benchmark suite: each takes a workload's params and returns rows.

``ROUTINES`` maps the ``routine`` field of bench/suite/workloads.toml to its function,
imported lazily (torch and fragmask are needed only on the GPU machine).
"""
import importlib

ROUTINES = {
    "attention": ("attention", "run"),
    "decode": ("decode", "run"),
    "lightning": ("lightning", "run"),
    "packer": ("packer", "run"),
    "overhead": ("overhead", "run"),
    "cli": ("cli", "run"),
}


def get(name):
    """The routine's function ``run(ctx, params, peers) -> list of rows``."""
    module, fn = ROUTINES[name]
    return getattr(importlib.import_module(f"{__name__}.{module}"), fn)
