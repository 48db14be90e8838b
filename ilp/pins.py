"""User pins: fix some processes' unroll factors or channels' FIFO depths; the ILP chooses the rest.

`--set conv2.unroll.oc=8`, `--set conv1_to_pool1.depth=64`, or a JSON/YAML file with
the same keys (flat `{"conv2.unroll.oc": 8}` or nested `{"conv2": {"unroll": {"oc": 8}}}`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ming_py.dataflow import StreamGraph
from ming_py.ir import MingError


@dataclass
class Pins:
    unroll: dict[str, dict[str, int]] = field(default_factory=dict)  # process -> loop -> factor
    depths: dict[str, int] = field(default_factory=dict)  # channel -> FIFO depth


def parse_assignments(assignments: list[str], files: list[Path] = ()) -> dict[str, int]:
    """`key=value` settings from the command line and files; the same key twice with two values is an error."""
    settings: dict[str, int] = {}
    origin: dict[str, str] = {}
    items: list[tuple[str, object, str]] = []
    for path in files:
        items += [(k, v, str(path)) for k, v in _flatten(_load(Path(path))).items()]
    for text in assignments:
        key, sep, value = text.partition("=")
        if not sep:
            raise MingError(f"--set {text}: write KEY=VALUE, e.g. conv2.unroll.oc=8")
        items.append((key.strip(), value.strip(), "--set"))
    for key, value, where in items:
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise MingError(f"{where}: {key}={value} is not an integer") from None
        if key in settings and settings[key] != number:
            raise MingError(f"conflicting settings for {key}: {settings[key]} ({origin[key]}) and {number} ({where})")
        settings[key], origin[key] = number, where
    return settings


def _load(path: Path) -> dict:
    if not path.is_file():
        raise MingError(f"{path}: settings file not found")
    text = path.read_text()
    try:
        if path.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except Exception as exc:
        raise MingError(f"{path}: cannot parse settings ({str(exc).splitlines()[0][:100]})") from None
    if not isinstance(data, dict):
        raise MingError(f"{path}: expected a mapping of settings")
    return data


def _flatten(data: dict, prefix: str = "") -> dict[str, object]:
    flat = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat |= _flatten(value, f"{name}.")
        else:
            flat[name] = value
    return flat


def resolve(settings: dict[str, int], graph: StreamGraph) -> Pins:
    """Check settings against the design: every name exists and every factor divides its loop."""
    pins = Pins()
    processes = {p.name: p for p in graph.processes}
    for key, value in sorted(settings.items()):
        parts = key.split(".")
        if len(parts) == 3 and parts[1] == "unroll" and parts[0] in processes:
            process, loop = processes[parts[0]], parts[2]
            trips = graph.trip_counts(process)
            if loop not in trips:
                raise MingError(f"{key}: process {process.name} ({process.kind}) unrolls "
                                f"{', '.join(sorted(trips)) or 'nothing'}")
            if value < 1 or trips[loop] % value:
                raise MingError(f"{key}={value}: the factor must divide the loop's {trips[loop]} iterations")
            pins.unroll.setdefault(process.name, {})[loop] = value
        elif len(parts) == 2 and parts[1] == "depth" and parts[0] in graph.channels:
            if value < 1:
                raise MingError(f"{key}={value}: a FIFO depth is at least 1")
            pins.depths[parts[0]] = value
        else:
            raise MingError(f"{key}: not a setting of this design; use PROCESS.unroll.LOOP or CHANNEL.depth "
                            f"(processes: {', '.join(sorted(processes))})")
    return pins
