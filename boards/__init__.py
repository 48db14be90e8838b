"""The board database: one TOML file per target board, next to this module.

Each file gives the board's Vivado part, its programmable-logic resources
(from the vendor data sheet named in its `source` field), a default kernel
clock and how the host talks to the accelerator (`interface`):

* ``zynq_axis_dma``: AXI4-Stream in/out through an AXI DMA, driven by PYNQ;
* ``alveo_xrt``: an XRT kernel with ``m_axi`` ports on an Alveo platform.

A Zynq board's ``[zynq]`` table gives what its Vivado block design needs (board
part, carrier connections, which processing system, the PL clock limit) and the
PYNQ release its deployment targets; the processing systems themselves (ports,
pins, properties) are described once in ``processing_systems.toml``. An Alveo
board's ``[alveo]`` table names the memory bank its data movers use.

An optional ``[reserved]`` table gives what the board's platform keeps for itself (DSP, BRAM18K, URAM and LUT,
with the document the figures come from): an Alveo shell's static region; on a Zynq board the block design ming
builds around the accelerator (the AXI DMA, the SmartConnects, the reset). `Board.usable` is what is left to a
design, and every resource budget is taken of it. A board without the table reserves nothing. An optional
``[weight_port]`` table (same fields) gives what a design with weights in URAM adds beside it: the data mover
that feeds the accelerator's weight port (`ming_py.weights_load`); the ILP sets it aside where it may choose
URAM weights.

A ``[ddr]`` table gives the off-chip memory the programmable logic can read weights from (`Ddr`): on a Zynq
board the PS DDR through the PS's four high-performance AXI ports (S_AXI_HP0..3, not the coherent HPC or ACP
ports); on an Alveo card the whole memory a kernel can reach through its AXI masters at the kernel clock (its DDR4
banks or HBM pseudo-channels), each port one beat per kernel cycle: the memory's peak bytes per second, the AXI
ports the PL reads it through and their width, and the fraction of the peak a stream of reads sustains, each
with the document it comes from.

`parse_board` validates one file's text; `load_board` / `all_boards` read the
files shipped with the package through `importlib.resources`, so the database
works from an installed wheel as well as from a source checkout.
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from importlib import resources

from ming_py.errors import MingError

INTERFACES = ("zynq_axis_dma", "alveo_xrt")


@dataclass(frozen=True)
class ProcessingSystem:
    """A Zynq processing system as a Vivado block design sees it."""

    name: str
    vlnv: str
    automation_rule: str
    master_port: str  # drives the DMA's register port
    master_clock_pin: str
    slave_port: str  # takes the DMA's memory traffic
    slave_clock_pin: str
    clock_pin: str  # PL clock 0
    reset_pin: str
    clock_property: str  # the PL clock 0 frequency in MHz
    enable: tuple[tuple[str, str], ...]  # properties that open exactly these two ports
    address_bits: int


@dataclass(frozen=True)
class Zynq:
    board_part: str
    processing_system: ProcessingSystem
    pl_clock_max_mhz: float
    pynq: str
    board_connections: str | None = None


@dataclass(frozen=True)
class Alveo:
    memory: str  # e.g. "HBM[0]", "DDR[0]"


RESERVABLE = ("dsp", "bram18k", "uram", "lut")


@dataclass(frozen=True)
class Reserved:
    """What the board's platform keeps for itself (an Alveo shell's static region, a Zynq block design's DMA and
    interconnect); no design may use it."""

    dsp: int = 0
    bram18k: int = 0
    uram: int = 0
    lut: int = 0
    source: str = ""  # the document the figures come from

    def __bool__(self) -> bool:
        return any(getattr(self, resource) for resource in RESERVABLE)


@dataclass(frozen=True)
class Ddr:
    """The off-chip memory the PL reads weights from, and the AXI ports it reads it through."""

    peak_bytes_per_s: float  # the memory's peak: bus width x transfer rate (all channels or banks)
    ports: int  # AXI ports from the PL to it (Zynq: S_AXI_HP0..3; Alveo: every DDR bank or HBM pseudo-channel)
    port_bits: int  # each port's data width, one beat per PL (kernel) clock cycle
    sustained_fraction: float  # of the peak that a stream of long read bursts sustains
    source: str  # the documents the figures come from, and which figures are assumptions

    def bytes_per_s(self, clock_mhz: float) -> float:
        """What the PL can read per second at `clock_mhz`: the memory's sustained rate, or the ports' if less."""
        return min(self.peak_bytes_per_s * self.sustained_fraction, self.ports * self.port_bits / 8 * clock_mhz * 1e6)


@dataclass(frozen=True)
class Board:
    """One target board: its device, PL resources and default build settings."""

    name: str
    part: str
    family: str
    dsp: int
    bram18k: int
    uram: int
    lut: int
    ff: int
    clock_mhz: float
    interface: str
    platform: str | None
    source: str
    notes: str = ""
    zynq: Zynq | None = None
    alveo: Alveo | None = None
    reserved: Reserved = Reserved()
    weight_port: Reserved = Reserved()  # what the weight port's data mover takes (weights in URAM)
    ddr: Ddr | None = None  # the off-chip memory the PL can read weights from

    @property
    def clock_period_ns(self) -> float:
        return round(1000.0 / self.clock_mhz, 3)

    def usable(self, resource: str) -> int:
        """What a design may use of `resource` (one of `RESERVABLE`): the device's less what its platform keeps."""
        return getattr(self, resource) - getattr(self.reserved, resource)


# field -> (accepted python types from tomllib, required?)
_FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {
    "name": ((str,), True),
    "part": ((str,), True),
    "family": ((str,), True),
    "dsp": ((int,), True),
    "bram18k": ((int,), True),
    "uram": ((int,), True),
    "lut": ((int,), True),
    "ff": ((int,), True),
    "clock_mhz": ((int, float), True),
    "interface": ((str,), True),
    "platform": ((str,), False),
    "source": ((str,), True),
    "notes": ((str,), False),
    "zynq": ((dict,), False),
    "alveo": ((dict,), False),
    "reserved": ((dict,), False),
    "weight_port": ((dict,), False),
    "ddr": ((dict,), False),
}
_ZYNQ_FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {
    "board_part": ((str,), True),
    "board_connections": ((str,), False),
    "processing_system": ((str,), True),
    "pl_clock_max_mhz": ((int, float), True),
    "pynq": ((str,), True),
}
_ALVEO_FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {"memory": ((str,), True)}
_RESERVED_FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {
    **{resource: ((int,), True) for resource in RESERVABLE},
    "source": ((str,), True),
}
_DDR_FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {
    "peak_bytes_per_s": ((int, float), True),
    "ports": ((int,), True),
    "port_bits": ((int,), True),
    "sustained_fraction": ((int, float), True),
    "source": ((str,), True),
}
_POSITIVE = ("dsp", "bram18k", "lut", "ff", "clock_mhz")
_NONEMPTY = ("name", "part", "family", "source")
_TYPE_NAMES = {(str,): "a string", (int,): "an integer", (int, float): "a number", (dict,): "a table"}
# which table each interface needs
_INTERFACE_TABLES = {"zynq_axis_dma": "zynq", "alveo_xrt": "alveo"}


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def parse_board(text: str, source_name: str) -> Board:
    """Parse and validate one board file's TOML `text`; errors name `source_name` and the field."""

    def fail(msg: str) -> MingError:
        return MingError(_one_line(f"board file {source_name}: {msg}"))

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise fail(f"invalid TOML: {e}") from None

    _check_fields(data, _FIELDS, "", fail)

    for key in _NONEMPTY:
        if not data[key].strip():
            raise fail(f"field '{key}' must not be empty")
    for key in _POSITIVE:
        if not data[key] > 0:
            raise fail(f"field '{key}' must be positive, got {data[key]!r}")
    if data["uram"] < 0:
        raise fail(f"field 'uram' must be >= 0, got {data['uram']!r}")
    if data["bram18k"] % 2:
        raise fail(f"field 'bram18k' must be even (2 x BRAM36), got {data['bram18k']!r}")
    if data["interface"] not in INTERFACES:
        raise fail(f"field 'interface' must be one of {', '.join(INTERFACES)}, got {data['interface']!r}")
    platform = data.get("platform")
    if platform is not None and not platform.strip():
        raise fail("field 'platform' must not be empty (omit it when the board has no Vitis platform)")
    table = _INTERFACE_TABLES[data["interface"]]
    if table not in data:
        raise fail(f"interface {data['interface']!r} needs a [{table}] table")
    for other in set(_INTERFACE_TABLES.values()) - {table}:
        if other in data:
            raise fail(f"a [{other}] table does not belong to interface {data['interface']!r}")
    if table == "alveo" and platform is None:
        raise fail("interface 'alveo_xrt' needs the field 'platform' (the Vitis platform to link against)")

    return Board(
        name=data["name"],
        part=data["part"],
        family=data["family"],
        dsp=data["dsp"],
        bram18k=data["bram18k"],
        uram=data["uram"],
        lut=data["lut"],
        ff=data["ff"],
        clock_mhz=float(data["clock_mhz"]),
        interface=data["interface"],
        platform=platform,
        source=data["source"],
        notes=data.get("notes", ""),
        zynq=_zynq(data["zynq"], fail) if "zynq" in data else None,
        alveo=_alveo(data["alveo"], fail) if "alveo" in data else None,
        reserved=_reserved(data["reserved"], data, fail) if "reserved" in data else Reserved(),
        weight_port=_reserved(data["weight_port"], data, fail, "weight_port") if "weight_port" in data else Reserved(),
        ddr=_ddr(data["ddr"], fail) if "ddr" in data else None,
    )


def _check_fields(data: dict, fields: dict, prefix: str, fail) -> None:
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise fail(f"unknown field(s) {', '.join(repr(prefix + k) for k in unknown)}; allowed: {', '.join(fields)}")
    missing = [prefix + k for k, (_, required) in fields.items() if required and k not in data]
    if missing:
        raise fail(f"missing required field(s) {', '.join(map(repr, missing))}")
    for key, (types, _) in fields.items():
        if key not in data:
            continue
        value = data[key]
        # bool is an int subclass in Python; `dsp = true` is still a type error.
        if isinstance(value, bool) or not isinstance(value, types):
            raise fail(f"field '{prefix}{key}' must be {_TYPE_NAMES[types]}, got {type(value).__name__} {value!r}")


def _zynq(data: dict, fail) -> Zynq:
    _check_fields(data, _ZYNQ_FIELDS, "zynq.", fail)
    systems = processing_systems()
    if data["processing_system"] not in systems:
        raise fail(f"field 'zynq.processing_system' must be one of {', '.join(systems)}, got "
                   f"{data['processing_system']!r}")
    if not data["pl_clock_max_mhz"] > 0:
        raise fail(f"field 'zynq.pl_clock_max_mhz' must be positive, got {data['pl_clock_max_mhz']!r}")
    return Zynq(board_part=data["board_part"], processing_system=systems[data["processing_system"]],
                pl_clock_max_mhz=float(data["pl_clock_max_mhz"]), pynq=data["pynq"],
                board_connections=data.get("board_connections"))


def _alveo(data: dict, fail) -> Alveo:
    _check_fields(data, _ALVEO_FIELDS, "alveo.", fail)
    return Alveo(memory=data["memory"])


def _reserved(data: dict, device: dict, fail, table: str = "reserved") -> Reserved:
    _check_fields(data, _RESERVED_FIELDS, f"{table}.", fail)
    if not data["source"].strip():
        raise fail(f"field '{table}.source' must not be empty; name the document the figures come from")
    for resource in RESERVABLE:
        if data[resource] < 0:
            raise fail(f"field '{table}.{resource}' must be >= 0, got {data[resource]!r}")
        if data[resource] > device[resource]:
            raise fail(f"field '{table}.{resource}' ({data[resource]}) must not exceed the device's "
                       f"'{resource}' ({device[resource]})")
    if data["bram18k"] % 2:
        raise fail(f"field '{table}.bram18k' must be even (2 x BRAM36), got {data['bram18k']!r}")
    return Reserved(**data)


def _ddr(data: dict, fail) -> Ddr:
    _check_fields(data, _DDR_FIELDS, "ddr.", fail)
    if not data["source"].strip():
        raise fail("field 'ddr.source' must not be empty; name the documents the figures come from")
    for key in ("peak_bytes_per_s", "ports", "port_bits"):
        if not data[key] > 0:
            raise fail(f"field 'ddr.{key}' must be positive, got {data[key]!r}")
    if data["port_bits"] % 8:
        raise fail(f"field 'ddr.port_bits' must be a whole number of bytes, got {data['port_bits']!r}")
    if not 0 < data["sustained_fraction"] <= 1:
        raise fail(f"field 'ddr.sustained_fraction' must be within 0 (excluded) and 1, got "
                   f"{data['sustained_fraction']!r}")
    return Ddr(peak_bytes_per_s=float(data["peak_bytes_per_s"]), ports=data["ports"], port_bits=data["port_bits"],
               sustained_fraction=float(data["sustained_fraction"]), source=data["source"])


PROCESSING_SYSTEMS_FILE = "processing_systems.toml"


@functools.cache
def processing_systems() -> dict[str, ProcessingSystem]:
    """The Zynq processing systems by name (`processing_systems.toml`)."""
    data = tomllib.loads(resources.files(__name__).joinpath(PROCESSING_SYSTEMS_FILE).read_text(encoding="utf-8"))
    return {name: ProcessingSystem(name=name, **{k: v for k, v in fields.items() if k != "enable"},
                                   enable=tuple(sorted(fields["enable"].items())))
            for name, fields in data.items()}


@functools.cache
def _load_all() -> tuple[Board, ...]:
    boards = []
    for entry in resources.files(__name__).iterdir():
        if not entry.is_file() or not entry.name.endswith(".toml") or entry.name == PROCESSING_SYSTEMS_FILE:
            continue
        stem = entry.name[: -len(".toml")]
        board = parse_board(entry.read_text(encoding="utf-8"), entry.name)
        if board.name != stem:
            raise MingError(f"board file {entry.name}: field 'name' is {board.name!r} but must equal the "
                            f"file name {stem!r}")
        boards.append(board)
    return tuple(sorted(boards, key=lambda b: b.name))


def check_clock(board: Board) -> None:
    """A Zynq board's clock is one its PL clock can run at."""
    limit = board.zynq.pl_clock_max_mhz if board.zynq else None
    if limit is not None and board.clock_mhz > limit:
        raise MingError(f"board {board.name}: clock {board.clock_mhz:g} MHz is above its PL clock limit of "
                        f"{limit:g} MHz; pass a lower --clock (at most {limit:g})")


def board_names() -> list[str]:
    """The known board names, sorted."""
    return [b.name for b in _load_all()]


def all_boards() -> list[Board]:
    """Every known board, sorted by name."""
    return list(_load_all())


def load_board(name: str) -> Board:
    """The board called `name` (case-insensitive)."""
    key = str(name).strip().lower()
    for board in _load_all():
        if board.name.lower() == key:
            return board
    raise MingError(f"unknown board {name!r}; known boards: {', '.join(board_names())}")


def boards_table() -> str:
    """An aligned text table of every board's part, resources, clock and interface."""
    header = ("name", "part", "DSP", "BRAM18K", "URAM", "LUT", "FF", "clock MHz", "interface")
    numeric = (False, False, True, True, True, True, True, True, False)
    rows = [(b.name, b.part, str(b.dsp), str(b.bram18k), str(b.uram), str(b.lut), str(b.ff), f"{b.clock_mhz:g}",
             b.interface) for b in _load_all()]
    return _aligned(header, numeric, rows)


def reservations_table() -> str:
    """An aligned text table of what each board's platform keeps and what it leaves to a design ("" if none
    keeps anything)."""
    header = ("name", "", "DSP", "BRAM18K", "URAM", "LUT")
    numeric = (False, False, True, True, True, True)
    rows = []
    for b in _load_all():
        if b.reserved:
            rows.append((b.name, "kept by the platform", *(str(getattr(b.reserved, r)) for r in RESERVABLE)))
            rows.append(("", "left to a design", *(str(b.usable(r)) for r in RESERVABLE)))
    return _aligned(header, numeric, rows) if rows else ""


def _aligned(header: tuple[str, ...], numeric: tuple[bool, ...], rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def fmt(row: tuple[str, ...]) -> str:
        cells = [c.rjust(w) if num else c.ljust(w) for c, w, num in zip(row, widths, numeric)]
        return "  ".join(cells).rstrip()

    return "\n".join([fmt(header), "  ".join("-" * w for w in widths), *map(fmt, rows)])
