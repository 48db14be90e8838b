"""User pins: fix some processes' unroll factors or channels' FIFO depths; the ILP chooses the rest.

`--set conv2.unroll.oc=8`, `--set conv2.requantizers=2` (requantizers taking the output lanes in turn; 0:
one per lane), `--set conv2.multipliers=fabric` (dsp, fabric or dsp_pair), `--set conv2.line_buffer=uram`
(bram or uram), `--set conv2.weights=uram` (bram: where their size puts a ROM, lutram, uram: loaded at start
through the weight port, `ming_py.weights_load`, or ddr: streamed from DDR every image, `ming_py.weights_ddr`),
`--set conv2.bands=4` (with weights=ddr: a conv's map taken in 4 bands of output rows, its weights read once per
band), `--set conv1_to_pool1.depth=64`, or a JSON/YAML file with the same keys (flat
`{"conv2.unroll.oc": 8}` or nested `{"conv2": {"unroll": {"oc": 8}}}`): the folding file every build writes
(`OUT/settings.yaml`, `folding.settings_yaml`) is one.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ming_py.boards import Board
from ming_py.dataflow import StreamGraph, divisors
from ming_py.epilogues import rule_of
from ming_py.errors import MingError
from ming_py.contract.ming_json import check_digits, json_document
from ming_py.process_spec import process_spec
from ming_py.kinds import kind_of, trip_counts
from ming_py.storage import WEIGHT_MEMORIES, plan_arrays
from ming_py.kinds.streamed import streamed_problem
from ming_py.weights_ddr import board_ddr_problem


@dataclass
class Pins:
    unroll: dict[str, dict[str, int]] = field(default_factory=dict)  # process -> loop -> factor
    multipliers: dict[str, str] = field(default_factory=dict)  # process -> dsp | fabric | dsp_pair
    line_buffers: dict[str, str] = field(default_factory=dict)  # process -> bram | uram
    weights: dict[str, str] = field(default_factory=dict)  # process -> bram | lutram | uram | ddr
    requantizers: dict[str, int] = field(default_factory=dict)  # process -> shared requantizers (0: one per lane)
    bands: dict[str, int] = field(default_factory=dict)  # process -> bands of its map, its weights from DDR
    depths: dict[str, int] = field(default_factory=dict)  # channel -> FIFO depth
    depth_origins: dict[str, str] = field(default_factory=dict)  # channel -> the setting as the user wrote it

    @property
    def pinned(self) -> bool:
        """Whether any process setting is pinned (FIFO depths aside: the ILP does not choose them)."""
        return bool(self.unroll or self.multipliers or self.line_buffers or self.requantizers or self.weights or
                    self.bands)


class Settings(dict):
    """Settings by key, each remembering where it was given (`origin`: --set or the settings file's path)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.origins: dict[str, str] = {}

    def written(self, key: str) -> str:
        """The setting as the user wrote it: `--set KEY=VALUE` or `FILE: KEY: VALUE`."""
        where = self.origins.get(key, "--set")
        return f"--set {key}={self[key]}" if where == "--set" else f"settings file {where}: {key}: {self[key]}"


def parse_assignments(assignments: list[str], files: list[Path] = ()) -> Settings:
    """`key=value` settings from the command line and files; the same key twice with two values is an error."""
    settings = Settings()
    origin = settings.origins
    items: list[tuple[str, object, str]] = []
    for path in files:
        items += [(k, v, str(path)) for k, v in _flatten(_load(Path(path)), str(path)).items()]
    for text in assignments:
        key, sep, value = text.rpartition("=")  # a name may hold "=", a value never does
        if not sep:
            raise MingError(f"--set {text}: write KEY=VALUE, e.g. conv2.unroll.oc=8")
        items.append((key.strip(), value.strip(), "--set"))
    for key, value, where in items:
        check_key(key, where)
        number = check_value(key, value, where)
        if key in settings and settings[key] != number:
            raise MingError(f"conflicting settings for {key}: {settings[key]} ({origin[key]}) and {number} ({where})")
        settings[key], origin[key] = number, where
    return settings


KEY_FORMS = ("PROCESS.unroll.LOOP, PROCESS.requantizers, PROCESS.multipliers, PROCESS.line_buffer, PROCESS.weights, "
             "PROCESS.bands or CHANNEL.depth")
# a process or channel name may hold any character (PyTorch's exports: /features/features.0/Conv; TFLite's joined
# tensor names; a settings file's quoted keys), but neither starts nor ends with a space
_KEY = re.compile(r"(?P<name>\S(?:.*\S)?)\."
                  r"(?:unroll\.(?P<loop>[^.\s=]+)|(?P<field>requantizers|multipliers|line_buffer|weights|bands|depth))",
                  re.DOTALL)
CHOICES = {"multipliers": ("dsp", "fabric", "dsp_pair"), "line_buffer": ("bram", "uram"),
           "weights": WEIGHT_MEMORIES}  # the named settings
_INTEGER = re.compile(r"[+-]?[0-9]+")


def check_key(key: object, where: str) -> None:
    """The form of a setting's name; whether the process or channel exists is known only after the import."""
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise MingError(f"{where}: {key!r} is not a setting; use {KEY_FORMS}, e.g. conv2.unroll.oc or "
                        "conv1_to_pool1.depth")


def check_value(key: str, value: object, where: str) -> int | str:
    """A setting's value: one of CHOICES' names for a named setting, else a whole number (from a file an
    integer, not true, 2.0 or "2"; from --set its decimal digits)."""
    choices = CHOICES.get(key.rsplit(".", 1)[-1])
    if choices is not None:
        if value in choices:
            return value
        raise MingError(f"{where}: {key}={_as_json(value) if where != '--set' else value} is not one of "
                        f"{', '.join(choices)}")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if where == "--set" and isinstance(value, str) and _INTEGER.fullmatch(value):
        try:
            check_digits(value)
        except ValueError as exc:
            raise MingError(f"--set {key}: {exc}; give a whole number such as 8") from None
        return int(value)
    shown = value if where == "--set" else _as_json(value)
    raise MingError(f"{where}: {key}={shown} is not an integer; give a whole number such as 8")


def _as_json(value: object) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


MAX_SETTINGS_BYTES = 2 ** 20  # a settings file names a few keys; 1 MiB is thousands of them


def _load(path: Path) -> dict:
    if not path.is_file():
        raise MingError(f"{path}: settings file not found")
    def too_large(size: str) -> MingError:
        return MingError(f"{path}: settings file is {size} bytes; ming reads settings files up to "
                         f"{MAX_SETTINGS_BYTES:,} bytes (a few keys such as conv2.unroll.oc: 8)")

    size = path.stat().st_size
    if size > MAX_SETTINGS_BYTES:
        raise too_large(f"{size:,}")
    try:
        with path.open("rb") as file:  # the file may have grown since stat
            raw = file.read(MAX_SETTINGS_BYTES + 1)
        if len(raw) > MAX_SETTINGS_BYTES:
            raise too_large(f"over {MAX_SETTINGS_BYTES:,}")
        text = raw.decode()
        if path.suffix in (".yaml", ".yml"):
            data = _load_yaml(text)
        else:
            data = json_document(text, object_pairs_hook=_Mapping)
    except MingError:
        raise
    except _AliasRefused as exc:
        raise MingError(f"{path}: {exc}") from None
    except Exception as exc:
        raise MingError(f"{path}: cannot parse settings ({str(exc).splitlines()[0][:100]})") from None
    if not isinstance(data, dict):
        raise MingError(f"{path}: expected a mapping of settings")
    return data


class _Mapping(dict):
    """A parsed JSON/YAML mapping that remembers every key/value pair: parsers keep only the last of a key twice."""

    def __init__(self, pairs: list[tuple[object, object]]):
        super().__init__(pairs)
        self.pairs = pairs


class _AliasRefused(Exception):
    pass


def _load_yaml(text: str) -> object:
    """YAML without anchors and aliases: nested aliases expand exponentially (a few hundred bytes
    of "billion laughs" become gigabytes), and settings never need them. Refused as the composer meets
    them, before anything is expanded."""
    import yaml

    class KeepPairs(yaml.SafeLoader):
        def compose_node(self, parent, index):
            event = self.peek_event()
            if isinstance(event, yaml.AliasEvent):
                raise _AliasRefused(f"YAML alias *{event.anchor} (line {event.start_mark.line + 1}) is not "
                                    "allowed in a settings file; write every setting out")
            if getattr(event, "anchor", None) is not None:
                raise _AliasRefused(f"YAML anchor &{event.anchor} (line {event.start_mark.line + 1}) is not "
                                    "allowed in a settings file; write every setting out")
            return super().compose_node(parent, index)

        def construct_mapping(self, node, deep=False):
            self.flatten_mapping(node)  # resolve `<<` merges first
            return _Mapping([(self.construct_object(k, deep=True), self.construct_object(v, deep=True))
                             for k, v in node.value])

        def construct_yaml_int(self, node):
            check_digits(node.value)  # before int() meets Python's 4,300-digit limit
            return super().construct_yaml_int(node)

    KeepPairs.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, KeepPairs.construct_mapping)
    KeepPairs.add_constructor("tag:yaml.org,2002:int", KeepPairs.construct_yaml_int)
    return yaml.load(text, Loader=KeepPairs)


def _flatten(data: dict, where: str, prefix: str = "") -> dict[str, object]:
    """Nested and dotted keys as dotted keys; a setting given twice (either way) is refused."""
    flat = {}
    for key, value in getattr(data, "pairs", data.items()):
        name = f"{prefix}{key}"
        inner = _flatten(value, where, f"{name}.") if isinstance(value, dict) else {name: value}
        if not inner:
            raise MingError(f"{where}: {name} is empty; give a number or nested settings")
        for setting in inner:
            if setting in flat:
                raise MingError(f"{where}: {setting} is given twice; keep one")
        flat |= inner
    return flat


def resolve(settings: dict[str, int | str], graph: StreamGraph, board: Board | None = None) -> Pins:
    """Check settings against the design: every name exists (a process by its own name or by the model node it
    computes) and every factor divides its loop; weights pinned to DDR on a board that can stream them
    (`ming_py.weights_ddr.board_ddr_problem`)."""
    pins = Pins()
    for key, value in sorted(settings.items()):
        try:
            _resolve_one(pins, graph, key, value)
        except MingError as error:
            raise MingError(f"{_file_of(settings, key)}{error}") from None
        if key.endswith(".depth"):
            pins.depth_origins[_KEY.fullmatch(key)["name"]] = \
                settings.written(key) if isinstance(settings, Settings) else f"--set {key}={value}"
    for name in pins.bands:
        if pins.weights.get(name) != "ddr":
            raise MingError(f"{name}.bands={pins.bands[name]}: bands serve a process whose weights stream from DDR; "
                            f"set {name}.weights=ddr too, or remove the setting")
    _check_map_buffers(graph, pins)
    for name in [name for name, memory in pins.weights.items() if memory == "ddr"]:
        _check_streamed(graph, graph.process(name), pins.unroll.get(name, {}), pins.bands.get(name, 1))
        problem = board and board_ddr_problem(board)
        if problem:
            raise MingError(f"{name}.weights=ddr: {problem}; keep process {name}'s weights on chip")
        if pins.requantizers.get(name):
            raise MingError(f"{name}.weights=ddr and {name}.requantizers={pins.requantizers[name]}: process {name} "
                            "streams its weights from DDR with one requantizer per output lane; set requantizers=0 "
                            "or remove one of the settings")
    return pins


def _file_of(settings: dict, key: str) -> str:
    """'settings file FILE: ' for a setting read from a file, else nothing (a --set names itself)."""
    where = settings.origins.get(key, "--set") if isinstance(settings, Settings) else "--set"
    return "" if where == "--set" else f"settings file {where}: "


def _resolve_one(pins: Pins, graph: StreamGraph, key: str, value) -> None:
    check_key(key, "settings")
    processes = {p.name: p for p in graph.processes}
    form = _KEY.fullmatch(key)
    loop, setting = form["loop"], form["field"]
    name = form["name"] if setting == "depth" else _process_name(form["name"], graph)  # a channel by its own name
    if name in processes and setting != "depth":
        _pin_process(pins, graph, processes[name], key, loop or setting, value, setting is None)
    elif name in graph.channels and setting == "depth":
        if value < 1:
            raise MingError(f"{key}={value}: a FIFO depth is at least 1")
        pins.depths[name] = value
    else:
        raise MingError(f"{key}: not a setting of this design; use {KEY_FORMS} "
                        f"(processes: {', '.join(sorted(processes))})")


def _process_name(name: str, graph: StreamGraph) -> str:
    """A process's name, given either it or the model node it computes (the framework's full name)."""
    if any(p.name == name for p in graph.processes):
        return name
    computing = [p.name for p in graph.processes if p.source == name]
    return computing[0] if len(computing) == 1 else name


def _pin_process(pins: Pins, graph: StreamGraph, process, key: str, setting: str, value, is_loop: bool) -> None:
    if is_loop:
        trips = trip_counts(graph, process)
        if setting not in trips:
            raise MingError(f"{key}: process {process.name} ({process.kind}) unrolls "
                            f"{', '.join(sorted(trips)) or 'nothing'}")
        if value < 1 or trips[setting] % value:
            raise MingError(f"{key}={value}: the factor must divide the loop's {trips[setting]} iterations")
        pins.unroll.setdefault(process.name, {})[setting] = value
    elif setting == "requantizers":
        _check_requantizers(process, key, value)
        pins.requantizers[process.name] = value
    elif setting == "multipliers":
        _check_multipliers(graph, process, key, value)
        pins.multipliers[process.name] = value
    elif setting == "weights":
        if process.weights is None:
            raise MingError(f"{key}: process {process.name} ({process.kind}) has no weights")
        pins.weights[process.name] = value
    elif setting == "bands":
        if value < 1:
            raise MingError(f"{key}={value}: give the number of bands of rows, at least 1")
        pins.bands[process.name] = value
    else:
        _check_line_buffer(graph, process, key, value)
        pins.line_buffers[process.name] = value


def _check_streamed(graph: StreamGraph, process, unroll: dict[str, int], bands: int) -> None:
    """Weights from DDR apply to a kind whose loop streams them, at its pinned unroll factors and bands
    (`ming_py.weights_ddr.streamed_problem`)."""
    factors = tuple((loop, unroll.get(loop, 1)) for loop in trip_counts(graph, process))
    spec = process_spec(graph, process, factors, (1,) * len(process.inputs), (1,) * len(process.outputs),
                        bands=bands)
    problem = streamed_problem(spec)
    if problem:
        setting = f"{process.name}.weights=ddr" + (f" and {process.name}.bands={bands}" if bands > 1 else "")
        raise MingError(f"{setting}: process {process.name}: {problem}")


def _check_requantizers(process, key: str, value: int) -> None:
    """A requantizer count applies to a process with requantizers (0: one per output lane), and a count other than
    0 to a kind whose requantizers may take the output lanes in turn."""
    if value < 0:
        raise MingError(f"{key}={value}: give the number of requantizers, or 0 for one per output lane")
    if rule_of(process.epilogue).datapath(process.epilogue) is None:
        raise MingError(f"{key}: process {process.name} ({process.kind}) has no requantizers; remove the setting")
    if value and not kind_of(process.kind).shares_requantizer:
        raise MingError(f"{key}={value}: process {process.name} ({process.kind}) does not share requantizers (it has "
                        "one per output lane); remove the setting or set 0")


def _check_multipliers(graph: StreamGraph, process, key: str, value: str) -> None:
    """Multipliers apply to a kind with MAC lanes, and each placement to a kind that offers it at some schedule."""
    kind = kind_of(process.kind)
    if not kind.mac:
        raise MingError(f"{key}: process {process.name} ({process.kind}) has no MAC lanes, so no multipliers to "
                        "place; remove the setting")
    trips = trip_counts(graph, process)
    offered = {m for factors in itertools.product(*(divisors(n) for n in trips.values()))
               for m in kind.multiplier_choices(dict(zip(trips, factors)))}
    if value not in offered:
        raise MingError(f"{key}={value}: process {process.name} ({process.kind}) takes multipliers "
                        f"{' or '.join(sorted(offered))}, never {value}; choose one of those or remove the setting")


def _check_line_buffer(graph: StreamGraph, process, key: str, memory: str) -> None:
    """A line buffer memory applies to a process with a line buffer, or with the map buffers of a loop streaming
    its weights from DDR (`ming_py.kinds.window.streamed_map_buffers`); which one it places, and whether URAM can
    hold it, is checked once every setting is read (`_check_map_buffers`)."""
    kind = kind_of(process.kind)
    if not kind.line_buffer and not kind.streamed_maps:
        raise MingError(f"{key}: process {process.name} ({process.kind}) has no line buffer")


def _check_map_buffers(graph: StreamGraph, pins: Pins) -> None:
    """A line buffer memory places a process's line buffer, or with its weights pinned to DDR the map buffers of
    its streamed loop (a process without a line buffer needs that pin); URAM only where that buffer takes URAM at
    the least parallel schedule: more lanes or window copies only make its banks shallower, so if that one sits
    in LUTRAM (or registers) every schedule's does."""
    for name, memory in sorted(pins.line_buffers.items()):
        process = graph.process(name)
        key, streamed = f"{name}.line_buffer", pins.weights.get(name) == "ddr"
        if not kind_of(process.kind).line_buffer and not streamed:
            raise MingError(f"{key}: process {name} ({process.kind}) has no line buffer; the setting places the map "
                            f"buffers of its loop streaming weights from DDR, so set {name}.weights=ddr too, or "
                            "remove it")
        _check_lands(graph, process, key, memory, streamed, pins.bands.get(name, 1))


def _check_lands(graph: StreamGraph, process, key: str, memory: str, streamed: bool, bands: int) -> None:
    """URAM asked for a buffer (`streamed`: the map buffers, a band's) that is too small for it at every schedule is
    refused."""
    if memory != "uram":
        return
    ones = tuple((loop, 1) for loop in trip_counts(graph, process))
    landed = line_buffer_memory(graph, process, ones, (1,) * len(process.inputs), (1,) * len(process.outputs),
                                memory, streamed, bands)
    if landed != memory:
        buffer = "map buffers are" if streamed else "line buffer is"
        raise MingError(f"{key}=uram: process {process.name}'s {buffer} small enough for {landed.upper()} at every "
                        "schedule, where ming keeps it; remove the setting")


def line_buffer_memory(graph: StreamGraph, process, unroll: tuple, lanes_in: tuple, lanes_out: tuple,
                       asked: str, streamed: bool = False, bands: int = 1) -> str:
    """Where a schedule's line buffer (`streamed`: the map buffers of its loop streaming weights from DDR, a band's,
    `asked` where either lands there) sits when `asked` for: there, or LUTRAM or registers where it is small."""
    spec = process_spec(graph, process, unroll, lanes_in, lanes_out, ddr_weights=streamed, bands=bands)
    plan = plan_arrays(spec, process.epilogue, asked, "ddr" if streamed else "bram")
    if not streamed:
        return plan["line_buffer"].memory
    maps = (plan["in_map"].memory, plan["out_map"].memory)
    return asked if asked in maps else maps[0]
