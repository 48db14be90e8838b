"""The `ming` command line."""

from __future__ import annotations

import signal
import sys

# SIGINT/SIGTERM as one line and exit code 130/143 from the first moment ming's code runs. The imports below
# (numpy, the IR) take a tenth of a second; a signal meanwhile waits until they are done (an exception raised
# inside a C extension's import would come out as an ImportError and a traceback), then ends ming.
_STARTING = signal.pthread_sigmask(signal.SIG_BLOCK, (signal.SIGINT, signal.SIGTERM))
from ming_py import interrupt  # noqa: E402  (signal and contextlib only)

try:
    interrupt.install()
    import argparse
    import codecs
    import importlib
    import json
    import os
    from pathlib import Path

    from . import __version__
    from .errors import MingError
    signal.pthread_sigmask(signal.SIG_SETMASK, _STARTING)  # a signal that came meanwhile is raised here
except interrupt.Interrupted as _stop:
    print(f"ming: interrupted ({_stop})", file=sys.stderr)
    sys.exit(_stop.exit_code)

EXIT_MISSED = 1
EXIT_USAGE = 2
EXIT_DEADLOCK = 3
EXIT_PORT_CONFLICT = 3
EXIT_DIFFERS = 3  # the C-simulation differs from ming reference, or ming reference from the framework


class _HelpFormatter(argparse.HelpFormatter):
    """Every option's default at the end of its help ("(default: kv260)"), unless the help states it already or
    the option has none (None, a flag's False, an empty list)."""

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if default is None or default is False or default == [] or default == argparse.SUPPRESS or \
                "%(default)" in text or "default:" in text:
            return text
        return f"{text} (default: %(default)s)"


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line, like every other error; help shows the defaults (`_HelpFormatter`)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _HelpFormatter)  # the subcommands' parsers are _Parsers too
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"ming: error: {message}; see `{self.prog} --help`\n")


MODEL_HELP = "the model: an int8-quantized ONNX file (QDQ or QOperator) or an int8 .tflite file"
BUILD_HELP = "the output directory (OUT) of `ming build`"
INPUT_HELP = ("the input .npy in the model's input shape: float32 images (a model whose input is int8 or uint8 "
              "quantizes them with its input's scale and zero point, as TFLite does), or such a model's own "
              "int8/uint8 values")
OUTPUT_HELP = ("where to write the output .npy (float32, or int8/uint8 for a model with such an output); once per "
               "model output, in the model's order, or one .npz path for all (keys: the output names)")

def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ming", description=__doc__)
    parser.add_argument("--version", action="version", version=f"ming {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    analyze = commands.add_parser("analyze", help="lift a model and classify every kernel")
    analyze.add_argument("model", type=Path, help=MODEL_HELP)
    analyze.add_argument("--json", action="store_true", help="print a JSON list instead of a table")

    reference = commands.add_parser("reference", help="run the golden integer model on one image or N stacked")
    reference.add_argument("model", type=Path, help=MODEL_HELP)
    reference.add_argument("--input", required=True, type=Path, help=INPUT_HELP + ": one image or N stacked on a "
                           "first axis (N results, stacked likewise)")
    reference.add_argument("--output", required=True, type=Path, action="append", help=OUTPUT_HELP)
    reference.add_argument("--dump", type=Path, metavar="DIR",
                           help="also write every tensor of the golden model for the first image to DIR (new or "
                                "empty) as .npy files named after the model's tensors, with index.json")
    reference.add_argument("--framework", action="store_true",
                           help="with --dump: run the model's framework (onnxruntime, or LiteRT's reference kernels) "
                                "with every tensor exposed and print the first tensor where ming differs (exit "
                                "code 3), or that all shared tensors agree")

    build = commands.add_parser("build", help="compile a model into a Vitis HLS project")
    build.add_argument("model", type=Path, help=MODEL_HELP)
    _design_options(build)
    build.add_argument("--fifo", choices=("sized", "minimal"), default="sized",
                       help="sized: skip FIFOs hold the line-buffer lag, others two pixels; minimal: the least "
                            "depths that keep the simulated latency (default: %(default)s)")
    build.add_argument("-o", "--output", required=True, type=Path, help="output directory: new, empty or a former build, replaced on success; a file in it that "
                            "ming did not write stops the build (ming removes only what it wrote)")
    build.add_argument("--no-verify", action="store_true",
                       help="do not C-simulate the emitted C++ against ming reference before writing OUT (by default "
                            "a difference stops the build with exit code 3 and writes nothing)")
    build.add_argument("--keep-failed", type=Path, metavar="DIR",
                       help="where a build whose C++ differs from ming reference writes its design, for debugging "
                            "(a directory like OUT)")
    build.add_argument("-q", "--quiet", action="store_true", help="no progress output")

    emit = commands.add_parser("emit", help="write a build's files again from its saved design (OUT/design/), "
                                            "verified as `ming build` verifies them")
    emit.add_argument("build_dir", type=Path, help=BUILD_HELP + ", replaced on success as `ming build` replaces it")
    emit.add_argument("--board", help="emit for this board instead of the saved one (the reports then leave out "
                                      "the ILP's estimates)")
    emit.add_argument("--no-verify", action="store_true",
                      help="do not C-simulate the emitted C++ against the saved expected outputs before writing OUT")
    emit.add_argument("--keep-failed", type=Path, metavar="DIR",
                      help="where a design whose C++ differs from the saved expected outputs is written, for "
                           "debugging (a directory like OUT)")
    emit.add_argument("-q", "--quiet", action="store_true", help="no progress output")

    simulate = commands.add_parser("simulate", help="cycle-level simulation of a build's dataflow schedule")
    simulate.add_argument("build_dir", type=Path, help=BUILD_HELP)
    simulate.add_argument("--json", action="store_true", help="print a JSON object")

    sweep = commands.add_parser("sweep", help="explore latency against resource budgets (no C++)")
    sweep.add_argument("model", type=Path, help=MODEL_HELP)
    _design_options(sweep, lists=True)
    sweep.add_argument("-o", "--output", type=Path, default=Path("sweep"),
                       help="directory for sweep.csv/json/png (default: %(default)s; written like a build's OUT: "
                            "a new, empty or former sweep directory, replaced on success)")
    sweep.add_argument("-q", "--quiet", action="store_true", help="no progress output")

    csim = commands.add_parser("csim", help="C-simulate a build with g++ on one image or N stacked")
    csim.add_argument("build_dir", type=Path, help=BUILD_HELP)
    csim.add_argument("--input", required=True, type=Path, help=INPUT_HELP + ": one image or N stacked on a "
                      "first axis (N results, stacked likewise)")
    csim.add_argument("--output", required=True, type=Path, action="append", help=OUTPUT_HELP)
    csim.add_argument("--sequential", action="store_true",
                      help="call the processes one after another over unbounded FIFOs (as Vitis csim does) instead "
                           "of one thread per process over FIFOs of the built depths, which detects deadlocks")
    csim.add_argument("--check-ports", action="store_true",
                      help="also stop (exit code 3) when an iteration of a pipelined loop needs more ports of an "
                           "array or a stream than the array's partition and storage pragmas give")
    csim.add_argument("--trace", action="store_true",
                      help="also C-simulate the first image with every stream recorded and print the first stream "
                           "(in dataflow order) that differs from the golden model (`ming reference`), and the "
                           "process writing it (exit code 3 when one differs)")
    csim.add_argument("--model", type=Path, help="the model the build was made from, for the verdict and --trace, "
                      "where host.json's record of it no longer holds (the file moved or changed)")
    csim.add_argument("-q", "--quiet", action="store_true", help="no progress output")

    deploy = commands.add_parser("deploy", help="run a build's deployment driver (OUT/deploy/run.py) on one image "
                                 "or N stacked")
    deploy.add_argument("build_dir", type=Path, help=BUILD_HELP)
    deploy.add_argument("--input", required=True, type=Path, help=INPUT_HELP + ": one image or N stacked")
    deploy.add_argument("--output", required=True, type=Path, action="append", help=OUTPUT_HELP)
    deploy.add_argument("--backend", choices=("pynq", "xrt", "csim"),
                        help="pynq (Zynq boards), xrt (Alveo) or csim (the C-simulation); default: the board's")
    deploy.add_argument("--batch", type=int, help="images per transfer (default: all)")
    deploy.add_argument("--benchmark", action="store_true", help="print throughput and per-image times")

    compare = commands.add_parser("compare", help="a build's plan against its Vitis HLS and Vivado reports")
    compare.add_argument("build_dir", type=Path, help=BUILD_HELP)
    compare.add_argument("--json", action="store_true", help="print a JSON object instead of a table")
    compare.add_argument("--write-calibration", type=Path, metavar="FILE",
                         help="write per-primitive resource factors fitted to the reports, for `ming build "
                              "--calibration FILE` (a new file, or over a calibration file only)")

    commands.add_parser("boards", help="list the supported boards")
    return parser


def _design_options(parser, lists: bool = False) -> None:
    share = ("comma-separated budgets, e.g. 5%%,20%%,100%%" if lists else
             "N units or P%% of what the board leaves to a design (default: 90%% of DSP, BRAM and URAM, 70%% of "
             "LUT; 100%% lifts it)")
    parser.add_argument("--board", default="kv260", help="target board (see `ming boards`; default: %(default)s)")
    parser.add_argument("--name", help="the design's name: its top function, files, IP, bitstream and plot titles "
                        "(default: the model file's name)")
    for resource in ("dsp", "bram", "uram", "lut"):
        parser.add_argument(f"--{resource}", help=f"{resource.upper()} budget: {share}")
    parser.add_argument("--clock", help="clock in MHz (default: the board's)")
    parser.add_argument("--objective", choices=("frugal", "latency", "sum"), default="frugal",
                        help="frugal: the least resources (largest share of the budget, then the sum of the "
                             "shares) within 10%% of the fastest design's latency; latency: the fastest design; "
                             "sum: MING's sum of process cycles (default: %(default)s)")
    several = "comma-separated targets, one design each, e.g. 100,1000,10000" if lists else None
    parser.add_argument("--target-fps", metavar="F", help=several or "the least-resource design that sustains F "
                        "images per second at the build clock (instead of --objective)")
    parser.add_argument("--target-latency-us", metavar="T", help=several or "the least-resource design that takes "
                        "at most T us per image (instead of --objective)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="pin PROCESS.unroll.LOOP=N, PROCESS.requantizers=N, PROCESS.multipliers=dsp|fabric|"
                             "dsp_pair, PROCESS.line_buffer=bram|uram or CHANNEL.depth=N (repeatable)")
    parser.add_argument("--settings", action="append", default=[], type=Path, metavar="FILE",
                        help="JSON/YAML file of the same KEY: VALUE pins (a build's OUT/settings.yaml is one)")
    parser.add_argument("--calibration", type=Path, metavar="FILE",
                        help="per-primitive resource factors fitted by `ming compare OUT --write-calibration FILE`")


def _limits(args) -> dict[str, str | None]:
    return {"dsp": args.dsp, "bram18k": args.bram, "uram": args.uram, "lut": args.lut}


def _options(args, limits: dict[str, str | None]):
    """The design options, every one checked (the settings' names only after the import)."""
    from .build import BuildOptions
    from .options import check_design, clock_mhz, design_name, target
    from ming_py.ilp.pins import parse_assignments
    from .calibration import load_calibration

    calibration = load_calibration(args.calibration) if args.calibration is not None else None
    single = getattr(args, "fifo", None) is not None  # a build: one target each; a sweep takes lists
    options = BuildOptions(args.board, limits, args.objective, parse_assignments(args.set, args.settings),
                           clock_mhz(args.clock), getattr(args, "fifo", "sized") == "minimal", calibration,
                           target(args.target_fps, "--target-fps") if single else None,
                           target(args.target_latency_us, "--target-latency-us") if single else None,
                           design_name(args.name))
    check_design(options)
    return options


def _build(args) -> None:
    from .build import build
    from .progress import Progress

    build(args.model, args.output, _options(args, _limits(args)), progress=Progress(args.quiet), inputs=_inputs(args),
          verify=not args.no_verify, keep_failed=args.keep_failed)


def _emit(args) -> None:
    from .build import emit_build
    from .progress import Progress

    emit_build(args.build_dir, args.board, progress=Progress(args.quiet), verify=not args.no_verify,
               keep_failed=args.keep_failed)


def _sweep(args) -> None:
    from ming_py.boards import load_board
    from ming_py.ilp.sweep import check_point_count, run_sweep
    from .options import check_budget_lists, check_model, target_list
    from .output import check_output
    from .progress import Progress

    check_point_count(_limits(args), {"fps": args.target_fps, "latency_us": args.target_latency_us})
    options = _options(args, {})
    check_budget_lists(load_board(args.board), _limits(args))
    targets = {"fps": target_list(args.target_fps, "--target-fps"),
               "latency_us": target_list(args.target_latency_us, "--target-latency-us")}
    check_model(args.model)
    check_output(args.output, [args.model, *_inputs(args)])  # before the import; again when it writes
    run_sweep(args.model, options, _limits(args), args.output, Progress(args.quiet), inputs=_inputs(args),
              targets=targets)


def _inputs(args) -> list[Path]:
    """The files a build reads besides the model (settings, calibration), which its output must not hold."""
    return [*args.settings, *([args.calibration] if args.calibration is not None else [])]


def _csim(args) -> int:
    """`ming csim`: the outputs, then the verdict against ming reference (exit code 3 when they differ); with --trace,
    before it, the first stream of the first image that differs from the golden model (exit code 3 too)."""
    from .csim import CsimDeadlock, PortConflict, run_csim
    from .options import build_metadata, check_output_count, check_output_files, load_input, save_outputs
    from .progress import Progress
    from .contract.ming_ports import Port, output_names

    host = build_metadata(args.build_dir)
    x = load_input(args.input, Port.of(host["input"]))
    check_output_files(args.output)
    check_output_count(args.output, output_names(host))
    model, no_verdict = _golden_model(args, host)  # a --model or a --trace without a model is refused here
    progress = Progress(args.quiet)
    y, code = None, 0
    try:
        y = run_csim(args.build_dir, x, progress, concurrent=not args.sequential, check_ports=args.check_ports)
    except (CsimDeadlock, PortConflict) as stop:
        print(f"ming: {stop}", file=sys.stderr)
        code = EXIT_DEADLOCK
    except MingError as failure:  # a failed C-simulation (a stream read while empty) is what the trace explains
        if not args.trace:
            raise
        print(f"ming: error: {failure}", file=sys.stderr)
        code = EXIT_USAGE
    if y is not None:
        save_outputs(args.output, y)
    if model is None:
        print(f"verdict: none ({no_verdict})")
        return code
    graph = _golden_graph(args.build_dir, host, model, progress)
    if args.trace:
        from .trace import trace_build

        divergence = trace_build(args.build_dir, host, graph, x, progress)
        print(f"trace: {divergence}" if divergence else "trace: every stream equals the golden model")
        code = code or (EXIT_DIFFERS if divergence else 0)
    if y is not None:
        from .verdict import golden_outputs, verdict

        result = verdict(y, golden_outputs(graph, x))
        print(result.line())
        code = code or (0 if result.equal else EXIT_DIFFERS)
    return code


def _golden_model(args, host: dict) -> tuple[Path | None, str]:
    """The model a build was made from (--model, or host.json's record of it), or None and why there is none; with
    --model or --trace, a model that cannot be had is an error."""
    from .trace import recorded_model

    if args.model is not None or args.trace:
        return recorded_model(args.build_dir, host, args.model), ""
    try:
        return recorded_model(args.build_dir, host), ""
    except MingError as why:
        return None, str(why)


def _golden_graph(build_dir: Path, host: dict, model: Path, progress):
    """The golden model's graph of `model`, checked to be the model the build was made from."""
    from .pipeline import lift
    from .trace import check_same_channels

    with progress.step(f"importing {model.name} for the golden model"):
        graph = lift(model, host["graph"])
    check_same_channels(build_dir, model, graph)
    return graph


def _deploy(args) -> None:
    """The short form of `python3 OUT/deploy/run.py ...`: the same script, run with this Python."""
    import subprocess

    from .options import check_output_files

    script = args.build_dir / "deploy" / "run.py"
    if not script.is_file():
        raise MingError(f"{args.build_dir}: no deploy/run.py; run `ming build` first")
    check_output_files(args.output)
    command = [sys.executable, str(script), "--input", str(args.input)]
    command += [f"--output={path}" for path in args.output]
    command += [f"--backend={args.backend}"] * bool(args.backend) + [f"--batch={args.batch}"] * (args.batch is not None)
    command += ["--benchmark"] * args.benchmark
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True) as driver:
        try:
            _, stderr = driver.communicate()
        except BaseException:  # Ctrl-C, SIGTERM: the driver cleans up its compile (run.py ends on SIGTERM)
            driver.terminate()
            driver.wait()
            raise
    if driver.returncode != 0:
        last = (stderr.strip().splitlines() or ["(no message)"])[-1]
        raise MingError(last.removeprefix("error: "))


def _simulate(args) -> int:
    from .simulate import as_json, simulate_dir

    if not (args.build_dir / "report.json").is_file():
        raise MingError(f"{args.build_dir}: not a ming build directory (no report.json); run `ming build` first")
    result = simulate_dir(args.build_dir)
    if args.json:
        print(json.dumps(as_json(result), indent=2))
    else:
        _print_simulation(result)
    return EXIT_DEADLOCK if result.deadlock else 0


def _print_simulation(result) -> None:
    if result.deadlock:
        print("deadlock: every process is blocked")
        print("\n".join(result.deadlock))
        return
    print(f"{result.cycles:,} cycles to the last output, {result.first_output_cycles:,} to the first; one image per "
          f"{result.interval_cycles:,} cycles in steady state")
    print(f"{'process':<28} {'busy':>9} {'read stall':>11} {'write stall':>12}")
    for name, stalls in result.stalls.items():
        print(f"{name:<28} {result.busy.get(name, 0):>9,} {stalls['read']:>11,} {stalls['write']:>12,}")
    print(f"{'channel':<40} {'peak':>6}")
    for name, peak in result.fifo_peak.items():
        print(f"{name:<40} {peak:>6}")


def _compare(args) -> int:
    """Exit code 1 when a process missed its planned II or the design missed the clock."""
    from .calibration import write_calibration
    from .compare import calibration_data, compare_build, table

    comparison = compare_build(args.build_dir)
    if args.write_calibration is not None:
        write_calibration(args.write_calibration, calibration_data(comparison))
    if args.json:
        print(json.dumps(comparison.result, indent=2))
    else:
        print(table(comparison))
        if args.write_calibration is not None:
            print(f"calibration: {args.write_calibration}")
    return EXIT_MISSED if comparison.missed else 0


def _boards(args) -> None:
    from ming_py.boards import boards_table, reservations_table

    print(boards_table())
    reservations = reservations_table()
    if reservations:
        print("\nPart of these devices is kept by the platform (an Alveo shell; on a Zynq board the DMA, interconnect\n"
              "and reset of ming's block design; [reserved] in the board file). Budgets (--dsp/--bram/--uram/--lut:\n"
              "100% and the default shares) are taken of what is left to a design:")
        print(reservations)


def _analyze(args) -> None:
    from .pipeline import analyze, lift

    graph = lift(args.model)
    reports = analyze(graph)
    _print_notes(graph)
    if args.json:
        print(json.dumps([r.as_dict() for r in reports], indent=2))
        return
    header = ("kernel", "op", "class", "stride", "dilation", "P", "R", "O", "W", "in", "out", "MACs")
    rows = [header]
    for r in reports:
        d = r.as_dict()
        rows.append((d["name"], d["op"], d["class"], _fmt(d["stride"]), _fmt(d["dilation"]), _fmt(d["P"]),
                     _fmt(d["R"]), "; ".join(d["O"]) or "-", _fmt(d["W"]), "x".join(map(str, d["in_shape"])),
                     "x".join(map(str, d["out_shape"])), f"{d['macs']:,}"))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(header))]
    for row in rows:
        print("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)).rstrip())
    print(f"{len(reports)} kernels, {sum(r.macs for r in reports):,} MACs")


def _print_notes(graph) -> None:
    """What the frontend assumed about the model (a symbolic batch compiled as 1), on stderr."""
    for note in graph.notes:
        print(f"ming: note: {note}", file=sys.stderr)


def _fmt(values) -> str:
    return ",".join(map(str, values)) if values else "-"


def _reference(args) -> int:
    from .options import check_input, check_model, check_output_count, check_output_files, load_input, save_outputs
    from .pipeline import lift
    from .verdict import golden_outputs, stacked

    _check_dump_options(args)
    check_model(args.model)
    x = load_input(args.input)
    check_output_files(args.output)
    graph = lift(args.model)
    check_output_count(args.output, [out.name for out in graph.outputs])
    images = stacked(graph, x)
    for image in x if images else [x]:  # N images stacked on a first axis, as `ming csim` and run.py take them
        check_input(image[None] if images else image, graph.inputs[0])
    _print_notes(graph)  # after the checks: a bad argument is one line
    save_outputs(args.output, golden_outputs(graph, x))
    return _dump(args, graph, x[:1] if images else x)


def _check_dump_options(args) -> None:
    from .dump import check_dump_dir

    if args.framework and args.dump is None:
        raise MingError("--framework compares the tensors --dump writes; add --dump DIR")
    if args.dump is not None:
        check_dump_dir(args.dump)


def _dump(args, graph, x) -> int:
    """--dump: every golden tensor of the image `x` to DIR; --framework: exit code 3 when the framework's differ."""
    if args.dump is None:
        return 0
    from .dump import golden_tensors, write_dump
    from .framework_tensors import compare, float_conv_note, framework_values, model_tensors

    golden = golden_tensors(graph, x)
    named = model_tensors(args.model, graph)
    write_dump(args.dump, graph, golden, named)
    print(f"dump: {len(golden)} tensors of the golden model in {args.dump} (index.json)")
    if not args.framework:
        return 0
    names = sorted({named[t].name for t in golden if t in named})
    framework, theirs = framework_values(args.model, x, names)
    difference, compared, tensor = compare(golden, named, theirs, framework)
    if difference is not None:
        print(f"framework: {difference}")
        note = float_conv_note(args.model, tensor, names) if framework == "onnxruntime" else None
        if note is not None:
            print(f"framework: note: {note}")
        return EXIT_DIFFERS
    print(f"framework: all {compared} tensors shared with {framework} agree")
    return 0


# What each command imports (numpy, scipy, IREE, matplotlib through them), loaded while signals wait
_MODULES = {
    "analyze": ("ming_py.pipeline",),
    "reference": ("ming_py.reference", "ming_py.options", "ming_py.pipeline", "ming_py.verdict"),
    "build": ("ming_py.build", "ming_py.progress", "ming_py.options", "ming_py.ilp.pins"),
    "emit": ("ming_py.build", "ming_py.progress"),
    "sweep": ("ming_py.boards", "ming_py.ilp.sweep", "ming_py.options", "ming_py.output", "ming_py.progress"),
    "csim": ("ming_py.csim", "ming_py.options", "ming_py.progress", "ming_py.contract.ming_cxx", "ming_py.trace",
             "ming_py.verdict"),  # not the frontends: IREE's import, for the golden model, only once the csim ran
    "simulate": ("ming_py.simulate",),
    "compare": ("ming_py.compare", "ming_py.calibration"),
    "deploy": ("ming_py.options",),
    "boards": ("ming_py.boards",),
}


def _escaped(error: UnicodeError):
    """A character the terminal's encoding lacks, shown as an escape; a path's byte that is not UTF-8 (held as
    a lone surrogate) as the byte, \\xff."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    text = error.object[error.start:error.end]
    return "".join(f"\\x{ord(c) - 0xDC00:02x}" if 0xDC80 <= ord(c) <= 0xDCFF else c.encode("ascii", "backslashreplace")
                   .decode() for c in text), error.end


def _printable_streams() -> None:
    """Paths that are not UTF-8 (or not in the locale's encoding) print as escapes instead of failing."""
    codecs.register_error("ming.escape", _escaped)
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="ming.escape")


def main(argv: list[str] | None = None) -> int:
    try:
        interrupt.install()
        _printable_streams()
        args = _parser().parse_args(argv)
        handlers = {"analyze": _analyze, "reference": _reference, "build": _build, "emit": _emit, "sweep": _sweep,
                    "csim": _csim,
                    "simulate": _simulate, "deploy": _deploy, "compare": _compare, "boards": _boards}
        with interrupt.deferred():  # the command's modules, imported whole before a signal is raised (see above)
            for module in _MODULES.get(args.command, ()):
                importlib.import_module(module)
        code = handlers[args.command](args) or 0
        sys.stdout.flush()  # here, so that a reader that left (`ming simulate | head`) is seen below
        return code
    except BrokenPipeError:  # the reader of stdout left: nothing more to say, as other tools end on SIGPIPE
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python exits
        return 128 + signal.SIGPIPE
    except interrupt.Interrupted as stop:
        print(f"ming: interrupted ({stop})", file=sys.stderr)
        return stop.exit_code
    except MingError as exc:
        print(f"ming: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except ValueError as exc:
        if os.environ.get("MING_DEBUG"):
            raise
        print(f"ming: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
