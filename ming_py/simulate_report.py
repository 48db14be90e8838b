"""report.json as the simulation reads it (`ming simulate OUT`): read, and checked to hold every field the
simulation needs, of the right types; anything else is one MingError line naming the file and the field."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from .dataflow import Window
from .errors import MingError
from .contract.ming_json import read_json
from .process_spec import loop_of, spec_from_report
from .kinds import WINDOW_GEOMETRY_KINDS, registered

KINDS = tuple(registered())
# What the simulation's code raises on a malformed report: check_report names the field for those it sees, and
# simulate_dir the file for the rest (e.g. token counts of processes and channels that disagree)
MALFORMED = (KeyError, TypeError, ValueError, IndexError, AttributeError, ZeroDivisionError, StopIteration,
             OverflowError)
REBUILD = "rebuild with `ming build`"


def read_report(path: Path) -> dict:
    """The report.json at `path`, checked to hold what `simulate` reads (see `check_report`)."""
    try:
        report = read_json(path)
    except UnicodeDecodeError:
        raise MingError(f"{path}: not UTF-8 text; {REBUILD}") from None
    except OSError as exc:
        raise MingError(f"{path}: cannot be read ({exc.strerror}); {REBUILD}") from None
    except ValueError as exc:
        where = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        message = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise MingError(f"{path}: not valid JSON: {message}{where}; {REBUILD}") from None
    check_report(report, path)
    return report


def malformed_reason(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"missing field {exc.args[0]!r}" if exc.args else "a missing field"
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if isinstance(exc, ValueError) else f"{type(exc).__name__}: {text}"


def check_report(report, path) -> None:
    """Raise MingError (one line: the file, the field, what is wrong) unless `report` has the fields the
    simulation reads, of the right types: "channels" (name, shape, lanes, fifo_depth, producer, consumer),
    "nodes" (name, kind, inputs, outputs, schedule, window, routes, and a loop that kernel.loop_of accepts)
    and the optional "outputs" (channel)."""

    def fail(field: str, problem: str):
        raise MingError(f"{path}: {field}: {problem}; {REBUILD}")

    def is_int(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    def kind(value) -> str:
        return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
                float: "a number", type(None): "null"}.get(type(value), type(value).__name__)

    def need(value, field: str, want: type, what: str):
        if not isinstance(value, want) or (want is int and isinstance(value, bool)):
            fail(field, f"{what} expected, found {kind(value)}")
        return value

    if not isinstance(report, dict):
        raise MingError(f"{path}: not a ming report (a JSON object expected, found {kind(report)}); {REBUILD}")
    for key in ("nodes", "channels"):
        if key not in report:
            fail(key, "missing")
    channels = need(report["channels"], "channels", list, "a list of channels")
    nodes = need(report["nodes"], "nodes", list, "a list of processes")
    if not nodes:
        fail("nodes", "no processes")
    names: dict[str, int] = {}
    for i, channel in enumerate(channels):
        field = f"channels[{i}]"
        need(channel, field, dict, "an object")
        for key in ("name", "shape", "lanes", "fifo_depth"):
            if key not in channel:
                fail(field, f"missing field {key!r}")
        name = need(channel["name"], f"{field}.name", str, "a string")
        if name in names:
            fail(f"{field}.name", f"{name!r} is also the name of channels[{names[name]}]")
        names[name] = i
        field = f"{field} ({name})"
        shape = need(channel["shape"], f"{field}.shape", list, "a list of 3 sizes")
        if len(shape) != 3 or not all(is_int(x) and x > 0 for x in shape):
            fail(f"{field}.shape", f"3 positive sizes (channels, height, width) expected, found {shape}")
        lanes = need(channel["lanes"], f"{field}.lanes", int, "a number")
        if lanes < 1 or shape[0] % lanes:
            fail(f"{field}.lanes", f"{lanes} does not divide its {shape[0]} channels")
        depth = need(channel["fifo_depth"], f"{field}.fifo_depth", int, "a number")
        if depth < 1:
            fail(f"{field}.fifo_depth", f"{depth} is less than 1")
        for key in ("producer", "consumer"):
            if channel.get(key) is not None:
                need(channel[key], f"{field}.{key}", str, "a process name")
    if not channels:
        fail("channels", "no channels")
    specs = {channel["name"]: channel for channel in channels}
    for i, node in enumerate(nodes):
        field = f"nodes[{i}]"
        need(node, field, dict, "an object")
        for key in ("name", "kind", "inputs", "outputs", "schedule"):
            if key not in node:
                fail(field, f"missing field {key!r}")
        name = need(node["name"], f"{field}.name", str, "a string")
        field = f"{field} ({name})"
        if need(node["kind"], f"{field}.kind", str, "a string") not in KINDS:
            fail(f"{field}.kind", f"unknown kind {node['kind']!r}")
        for key in ("inputs", "outputs"):
            for k, channel in enumerate(need(node[key], f"{field}.{key}", list, "a list of channel names")):
                if not isinstance(channel, str) or channel not in specs:
                    fail(f"{field}.{key}[{k}]", f"no channel named {channel!r}")
        schedule = need(node["schedule"], f"{field}.schedule", dict, "an object")
        unroll = need(schedule.get("unroll", {}), f"{field}.schedule.unroll", dict, "an object")
        for loop, factor in unroll.items():
            if not is_int(factor) or factor < 1:
                fail(f"{field}.schedule.unroll.{loop}", f"a positive number expected, found {factor!r}")
        if node.get("window") is not None:
            _check_window(need(node["window"], f"{field}.window", dict, "an object"), f"{field}.window", fail)
        elif node["kind"] in WINDOW_GEOMETRY_KINDS:
            fail(field, f"a {node['kind']} process needs its \"window\"")
        for k, route in enumerate(need(node.get("routes", []), f"{field}.routes", list, "a list")):
            if not isinstance(route, list) or len(route) != 2 or not all(is_int(x) and x >= 0 for x in route):
                fail(f"{field}.routes[{k}]", f"[first channel, channels] expected, found {route!r}")
        try:
            loop_of(spec_from_report(node, specs))
        except MALFORMED as exc:
            fail(field, malformed_reason(exc))
    for i, output in enumerate(need(report.get("outputs", []), "outputs", list, "a list")):
        need(output, f"outputs[{i}]", dict, "an object")
        if output.get("channel") not in specs:
            fail(f"outputs[{i}].channel", f"no channel named {output.get('channel')!r}")


def _check_window(window: dict, field: str, fail) -> None:
    """The fields of a report's window: those of dataflow.Window, numbers or lists of as many numbers as the
    default has."""
    fields = {f.name: f for f in dataclasses.fields(Window)}
    for key, value in window.items():
        if key not in fields:
            fail(f"{field}.{key}", "not a field of a window")
        default = fields[key].default
        if isinstance(default, tuple):
            if not isinstance(value, list) or len(value) != len(default) or \
                    not all(isinstance(x, int) and not isinstance(x, bool) for x in value):
                fail(f"{field}.{key}", f"a list of {len(default)} numbers expected, found {value!r}")
        elif not isinstance(value, int) or isinstance(value, bool):
            fail(f"{field}.{key}", f"a number expected, found {value!r}")
    for key, spec in fields.items():
        if spec.default is dataclasses.MISSING and key not in window:
            fail(field, f"missing field {key!r}")
