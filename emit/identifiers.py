"""C++ identifiers for the names of a model, and safe text for comments, strings and reports.

Every name that reaches the generated C++ goes through `cpp_names`: process functions,
stream variables, constant arrays, the top-level functions and the file names (the model
name). A name that is already a valid, unreserved and unique identifier is kept as it is;
otherwise `identifier_base` maps it to `[A-Za-z][A-Za-z0-9_]*` (ASCII, no `__`, no leading
or trailing `_`) and `Namer` appends the first free numeric suffix `_1`, `_2`, ... The names
are handed out in a fixed order (the model's own functions, then processes, then channels;
within each, the names that are already free identifiers first, each group sorted), so the
same model always gets the same identifiers.

Reserved: C and C++ keywords (up to C23 / C++23, alternative tokens such as `and`), `main`,
names with a leading underscore or `__` (reserved to the implementation), the names ming's
headers and the emitted code declare (`ming`, `hls`, `HLS_PRAGMA`, `unpack_axis`, ...), the
global names of the standard headers (`system_names.py`) and of Vitis HLS (`ap_int`, ...), and the
macros of the headers only Vitis compiles: its own (`INLINE`, `FLOAT_MAN`, ...) and those of the C
headers they include (`NAN`, `M_PI`, `FE_ALL_EXCEPT`, `INT_MAX`, ...; see `system_names.py`).
Uniqueness ignores case: Vitis names RTL files after functions and arrays, and file systems
may not tell `conv` from `Conv`.

Reports keep the model's names; the C++ identifier is an extra field (`cpp_name`).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from ming_py.dataflow import Process, StreamGraph
from ming_py.process_spec import process_spec
from ming_py.storage import plan_arrays

from .system_names import NAMES as SYSTEM_NAMES

TEMPLATES = Path(__file__).resolve().parent / "templates"

C_KEYWORDS = frozenset("""
    auto break case char const continue default do double else enum extern float for goto if inline int long
    register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while
    alignas alignof bool constexpr false nullptr static_assert thread_local true typeof typeof_unqual
""".split())  # C23 made alignas ... typeof_unqual keywords; _Bool, _Atomic, ... start with an underscore

CPP_KEYWORDS = frozenset("""
    alignas alignof asm auto bool break case catch char char8_t char16_t char32_t class concept const consteval
    constexpr constinit const_cast continue co_await co_return co_yield decltype default delete do double
    dynamic_cast else enum explicit export extern false float for friend goto if inline int long mutable namespace
    new noexcept nullptr operator private protected public register reinterpret_cast requires return short signed
    sizeof static static_assert static_cast struct switch template this thread_local throw true try typedef typeid
    typename union unsigned using virtual void volatile wchar_t while
    and and_eq bitand bitor compl not not_eq or or_eq xor xor_eq
    final override import module
    atomic_cancel atomic_commit atomic_noexcept reflexpr synchronized transaction_safe transaction_safe_dynamic
""".split())  # the alternative tokens, identifiers with a special meaning, and those of the technical specifications

# Names the emitted sources use themselves, besides those their headers declare (see _header_names):
# main and its arguments, the top function's AXI4-Stream ports, namespaces, the C-simulation's macros
# (the modes `ming csim` defines with -D, and the switches ming's headers read).
EMITTED_NAMES = frozenset("""
    main argc argv s_axis m_axis s_axis_weights framing std posix hls ming ming_csim
    MING_CSIM MING_CSIM_CONCURRENT MING_CHECK_PORTS MING_LOADED MING_WEIGHTS_FILE MING_CHECK_WIDTHS MING_TRACE_TOKENS MING_TRACE_STREAMS
""".split())

# Vitis HLS headers (ap_int.h, ap_fixed.h, ap_axi_sdata.h, hls_stream.h) at synthesis; macros of GNU
# dialects and of headers the emitted code does not include itself but a toolchain may (assert).
TOOLCHAIN_NAMES = frozenset("""
    ap_int ap_uint ap_fixed ap_ufixed ap_int_base ap_fixed_base ap_range_ref ap_bit_ref ap_concat_ref
    af_range_ref af_bit_ref ap_private ap_axis ap_axiu ap_axi_s ap_axi_u qdma_axis ap_shift_reg ap_wait ap_wait_n
    ap_q_mode ap_o_mode ap_slong ap_ulong half ssdm_int
    AP_RND AP_RND_ZERO AP_RND_MIN_INF AP_RND_INF AP_RND_CONV AP_TRN AP_TRN_ZERO AP_SAT AP_SAT_ZERO AP_SAT_SYM
    AP_WRAP AP_WRAP_SM AP_INT_MAX_W AP_ASSERT AP_DEBUG AP_WARNING AP_MAX AP_MIN AP_ABS
    assert NDEBUG linux unix i386
""".split())

# The model name is the stem of hls/<model>.cpp, .h, _weights.h, _tb.cpp: it must not be one of
# the headers copied beside them, nor a device name on Windows. Compared ignoring case.
RESERVED_FILE_STEMS = frozenset(["ming_stream", "ming_numerics", "ming_check", "ming_hls_stream", "hls_stream",
                                 "con", "prn", "aux", "nul"]
                                + [f"{port}{i}" for port in ("com", "lpt") for i in range(1, 10)])
MAX_FILE_STEM = 100


def _header_names() -> frozenset[str]:
    """Names ming's own headers (templates/*.h) define: macros and namespace-scope declarations.

    Namespace members are declared without indentation in these headers, so the lines that start
    with a declaration, stripped of comments and literals, hold all of them.
    """
    declaration = re.compile(
        r"#\s*define\s+(\w+)"
        r"|(?:namespace|struct|class|union|enum(?:\s+class|\s+struct)?)\s+(\w+)"
        r"|using\s+(\w+)\s*="
        r"|typedef\b[^;]*?(\w+)\s*;"
        r"|(?:template\s*<[^;]*>\s*)?(?:(?:inline|static|constexpr|extern|const)\s+)*[\w:]+(?:\s*<[^;(]*>)?"
        r"[\s*&]+(\w+)\s*[(=;\[{]")
    literal = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
    names = set()
    for header in sorted(TEMPLATES.glob("*.h")):
        for line in literal.sub(" ", header.read_text()).splitlines():
            match = declaration.match(line)  # at most one declaration starts a line
            if match:
                names.update(group for group in match.groups() if group)
    return frozenset(names)


HEADER_NAMES = _header_names()
RESERVED = C_KEYWORDS | CPP_KEYWORDS | EMITTED_NAMES | HEADER_NAMES | TOOLCHAIN_NAMES | SYSTEM_NAMES

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_reserved(name: str) -> bool:
    """Whether `name` is not a valid identifier for the generated code (not one, reserved, or taken by a header)."""
    return (not _IDENTIFIER.fullmatch(name) or name in RESERVED or name.startswith("_") or "__" in name
            or re.fullmatch(r"std\d+", name) is not None)  # namespaces std0, std1, ... are reserved


def identifier_base(name: str, fallback: str = "node") -> str:
    """`name` as `[A-Za-z][A-Za-z0-9_]*` without `__` or a trailing `_`; a valid such name is unchanged.

    Letters with accents lose them (NFKD), other non-ASCII characters become `u<hex code point>`,
    anything else not allowed becomes `_`; a leading digit gets the prefix `n_`.
    """
    pieces = []
    for char in unicodedata.normalize("NFKD", name):
        if char.isascii():
            pieces.append(char if char.isalnum() or char == "_" else "_")
        elif unicodedata.category(char) != "Mn":  # combining marks of decomposed letters are dropped
            pieces.append(f"_u{ord(char):04x}_")
    base = re.sub(r"_+", "_", "".join(pieces)).strip("_") or fallback
    return f"n_{base}" if base[0].isdigit() else base


class Namer:
    """Hands out unique, unreserved identifiers; unique ignoring case."""

    def __init__(self) -> None:
        self._taken: set[str] = set()

    def available(self, identifier: str) -> bool:
        return not is_reserved(identifier) and identifier.lower() not in self._taken

    def claim(self, base: str, derived: Callable[[str], list[str]] | None = None,
              acceptable: Callable[[str], bool] | None = None) -> str:
        """The first of `base`, `base_1`, `base_2`, ... whose identifiers (`derived(stem)`, default the
        stem alone) are all available and that `acceptable` accepts; its identifiers are taken."""
        return next(stem for stem in _candidates(base) if self._take(stem, derived, acceptable))

    def claim_all(self, names: Iterable[str], fallback: str,
                  derived: Callable[[str, str], list[str]] | None = None) -> dict[str, str]:
        """Identifiers for `names`: first every name that is a valid identifier and free keeps it, then the
        others get their base or the first free suffix, both in sorted order."""
        bases = {name: identifier_base(name, fallback) for name in names}
        order = sorted(bases, key=lambda name: (bases[name], name))

        def of(name: str):
            return (lambda stem: derived(name, stem)) if derived else None

        chosen: dict[str, str] = {}
        for name in order:
            if bases[name] == name and self._take(name, of(name)):
                chosen[name] = name
        for name in order:
            if name not in chosen:
                chosen[name] = self.claim(bases[name], of(name))
        return {name: chosen[name] for name in order}

    def _take(self, stem: str, derived: Callable[[str], list[str]] | None,
              acceptable: Callable[[str], bool] | None = None) -> bool:
        """Take `stem` and its derived identifiers if all are available (and `acceptable` accepts it)."""
        identifiers = derived(stem) if derived else [stem]
        keys = {identifier.lower() for identifier in identifiers}
        if len(keys) < len(identifiers) or not all(self.available(i) for i in identifiers) or \
                (acceptable is not None and not acceptable(stem)):
            return False
        self._taken |= keys
        return True


def _candidates(base: str):
    yield base
    suffix = 1
    while True:
        yield f"{base}_{suffix}"
        suffix += 1


@dataclass(frozen=True)
class CppNames:
    """The C++ identifiers of a stream graph; keys are the graph's own names."""

    model: str  # stem of the file names: hls/<model>.cpp, <model>.h, <model>_weights.h, <model>_tb.cpp
    top: str
    dataflow: str
    input_values: str  # constexpr int: number of int8 input values
    output_values: tuple[str, ...]  # the same of each output, in the order of the output record
    write_outputs: str | None  # the output writer of several outputs (one output: ming::pack_axis alone)
    processes: dict[str, str]
    channels: dict[str, str]
    arrays: dict[str, dict[str, str]]  # process -> role (array_roles) -> constant array <process>_<role>
    load_weights: str  # the top function's weight loader (`ming_py.weights_load`), where weights are in URAM
    weight_streams: dict[str, str]  # process with weights -> its weight stream from the loader


def array_roles(graph: StreamGraph, process: Process) -> list[str]:
    """The constant arrays `process` has in <model>_weights.h: the ROMs of its storage plan (the same under every
    schedule)."""
    spec = process_spec(graph, process, (), (1,) * len(process.inputs), (1,) * len(process.outputs))
    return [role for role, plan in plan_arrays(spec, process.epilogue).items() if plan.rom]


def _model_identifiers(stem: str, outputs: int) -> list[str]:
    """top, dataflow, the input's values, each output's values and, for several outputs, their writer; last the
    weight loader."""
    if outputs == 1:
        return [f"{stem}_top", f"{stem}_dataflow", f"{stem.upper()}_INPUT_VALUES", f"{stem.upper()}_OUTPUT_VALUES",
                f"{stem}_load_weights"]
    return ([f"{stem}_top", f"{stem}_dataflow", f"{stem.upper()}_INPUT_VALUES"]
            + [f"{stem.upper()}_OUTPUT{k}_VALUES" for k in range(outputs)] + [f"{stem}_write_outputs",
                                                                              f"{stem}_load_weights"])


def cpp_names(graph: StreamGraph) -> CppNames:
    """The identifiers of everything `graph` defines in C++, unique together, deterministic."""
    namer = Namer()
    base = identifier_base(graph.name, "model")[:MAX_FILE_STEM].rstrip("_")
    # The stem itself never appears alone in C++ (so a process may share the model's name), but it
    # is held to the same rules so that the file names are identifiers too.
    outputs = len(graph.outputs)
    model = namer.claim(base, lambda stem: _model_identifiers(stem, outputs),
                        lambda stem: not is_reserved(stem) and stem.lower() not in RESERVED_FILE_STEMS)
    top, dataflow, input_values, *output_values, load_weights = _model_identifiers(model, outputs)
    write_outputs = output_values.pop() if outputs > 1 else None
    roles = {p.name: array_roles(graph, p) for p in graph.processes}
    streams = {p.name: ["weights_in"] if "weights" in roles[p.name] else [] for p in graph.processes}
    processes = namer.claim_all(roles, "node", lambda name, stem: [stem] + [f"{stem}_{r}" for r in
                                                                            roles[name] + streams[name]])
    channels = namer.claim_all(graph.channels, "channel")
    arrays = {name: {role: f"{processes[name]}_{role}" for role in roles[name]} for name in roles}
    return CppNames(model, top, dataflow, input_values, tuple(output_values), write_outputs,
                    {p.name: processes[p.name] for p in graph.processes},
                    {name: channels[name] for name in graph.channels}, arrays, load_weights,
                    {name: f"{processes[name]}_weights_in" for name in roles if streams[name]})


# ---- text that quotes a name --------------------------------------------------------------


def comment_text(text: str) -> str:
    """`text` safe in a `//` (C++) or `#` (Tcl) comment: control characters and line separators shown as
    escapes, so the comment stays on its line; no backslash at the end (it would continue the line)."""
    text = "".join(_escape_char(c) if _is_control(c) else c for c in text)
    return text[:-1] + "\\x5c" if text.endswith("\\") else text


def c_string(text: str) -> str:
    """The contents of a C++ string literal that prints `text` (control characters as visible escapes)."""
    text = "".join(_escape_char(c) if _is_control(c) else c for c in text)
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    return re.sub(r"(?<=\?)\?", r"\\?", text)  # no trigraphs either


def mlir_string(text: str) -> str:
    """The contents of an MLIR string attribute that holds `text`."""
    return "".join("".join(f"\\{b:02X}" for b in c.encode()) if c in '"\\' or _is_control(c) else c for c in text)


def markdown_cell(text: str) -> str:
    """`text` in a Markdown table cell: `|` escaped, control characters as escapes."""
    return "".join(_escape_char(c) if _is_control(c) else c for c in text).replace("|", "\\|")


def _is_control(char: str) -> bool:
    return unicodedata.category(char) in ("Cc", "Zl", "Zp")


def _escape_char(char: str) -> str:
    code = ord(char)
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char, f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
