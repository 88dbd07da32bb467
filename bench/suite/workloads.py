"""The workload list: bench/suite/workloads.toml, parsed and checked without torch."""
import os
import re
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_LIST = os.path.join(HERE, "workloads.toml")
FAMILIES = ("forward", "backward", "split", "decode", "lightning", "packer", "overhead")
NAME = re.compile(r"^[a-z0-9][a-z0-9_.=:-]*$")


class ListError(ValueError):
    """The workload list is malformed (names the workload and the field)."""


def load(path=DEFAULT_LIST):
    """Parses the list; returns (defaults, workloads) with each workload's peers resolved."""
    from .routines import ROUTINES
    with open(path, "rb") as f:
        data = tomllib.load(f)
    defaults = data.get("defaults", {})
    peers_by_routine = defaults.get("systems", {})
    out, seen = [], set()
    for w in data.get("workload", []):
        name = w.get("name")
        if not isinstance(name, str) or not NAME.match(name):
            raise ListError(f"workload name {name!r} is not a lower-case identifier")
        if name in seen:
            raise ListError(f"workload {name}: listed twice")
        seen.add(name)
        routine = w.get("routine")
        if routine not in ROUTINES:
            raise ListError(f"workload {name}: routine {routine!r} does not exist "
                            f"(one of {', '.join(sorted(ROUTINES))})")
        if w.get("family") not in FAMILIES:
            raise ListError(f"workload {name}: family {w.get('family')!r} not in {FAMILIES}")
        systems = w.get("systems", peers_by_routine.get(routine))
        if not systems or not all(isinstance(s, str) for s in systems):
            raise ListError(f"workload {name}: no systems (set defaults.systems.{routine})")
        x = w.get("x")
        params = w.get("params", {})
        if x is not None and x not in params:
            raise ListError(f"workload {name}: plot axis x={x!r} is not one of its params")
        out.append({
            "name": name, "routine": routine, "family": w["family"], "quick": bool(w.get("quick", False)),
            "systems": list(systems), "params": params, "title": w.get("title", name),
            "x": x, "series": w.get("series", ""), "table": w.get("table", ""),
        })
    return defaults, out


def select(workloads, quick=False, only=None, shard=None):
    """The workloads of one run: the quick subset, a name regex, shard "i/n" (round robin)."""
    sel = [w for w in workloads if (not quick or w["quick"])]
    if only:
        rx = re.compile(only)
        sel = [w for w in sel if rx.search(w["name"])]
    if shard:
        i, n = (int(x) for x in shard.split("/"))
        if not 1 <= i <= n:
            raise ListError(f"--shard {shard}: expected i/n with 1 <= i <= n")
        sel = [w for j, w in enumerate(sel) if j % n == i - 1]
    return sel
