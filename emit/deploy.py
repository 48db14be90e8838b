"""The deployment package OUT/deploy/: the host driver (ming_py.runtime and the contract modules it imports,
copied verbatim), the metadata it reads (`accelerator.json`, checked against the schema the driver checks it
with) and a README for the board.

Where weights stream from DDR (`ming_py.weights_ddr`), deploy/weights_ddr.bin is written beside and
accelerator.json's "weights_ddr" tells the driver where each streamed port's part of it starts.

The hardware files join it later: `vivado/build_bitstream.tcl` copies `<model>.bit` and `<model>.hwh` here
(Zynq boards), `make` in `vitis/` copies `<model>.xclbin` (Alveo boards).
"""

from __future__ import annotations

import json
from importlib import resources

from ming_py import __version__
from ming_py.boards import Board
from ming_py.dataflow import StreamGraph
from ming_py.contract import accelerator_schema
from ming_py.contract.ming_host import LAYOUT_STEPS
from ming_py.contract.ming_ports import output_names

from .environment import environment
from .identifiers import cpp_names
from .reports import host_data
from .alveo import alveo_kernels
from .vivado import ACCELERATOR, DMA, LENGTH_BITS, WEIGHT_DMA

RUNTIME_FILES = ("ming_driver.py", "ming_backends.py", "run.py")
# what the runtime imports (flat, beside it on the board)
CONTRACT_FILES = ("ming_host.py", "ming_errors.py", "ming_json.py", "ming_ports.py", "ming_npy.py", "ming_cxx.py",
                  "accelerator_schema.py")
# An Alveo batch's two buffers share one memory bank; an HBM pseudo-channel holds 256 MB.
ALVEO_TRANSFER_BYTES = 2 ** 27


def deploy_files(graph: StreamGraph, board: Board, weights: dict | None = None, streamed: dict | None = None,
                 streamed_image: bytes = b"") -> dict[str, str | bytes]:
    """The files of OUT/deploy/, as {relative path: text}; `weights`: the weight load where weights are in URAM
    (`ming_py.weights_load.load_report`; deploy/weights.bin is written beside); `streamed`: the report's
    "weights_ddr" where weights stream from DDR, `streamed_image` the bytes of weights_ddr.bin (written here)."""
    files = {f"deploy/{name}": resources.files(package).joinpath(name).read_text(encoding="utf-8")
             for package, names in (("ming_py.runtime", RUNTIME_FILES), ("ming_py.contract", CONTRACT_FILES))
             for name in names}
    meta = accelerator_metadata(graph, board, weights, streamed)
    if streamed:
        files[f"deploy/{streamed['file']}"] = streamed_image
    problem = accelerator_schema.written_problem(meta)
    if problem:
        raise AssertionError(f"ming would write an {accelerator_schema.METADATA} its driver refuses: {problem}")
    files["deploy/accelerator.json"] = json.dumps(meta, indent=2) + "\n"
    files["deploy/README.md"] = environment().get_template("deploy/README.md.j2").render(
        meta=meta, board=board, version=__version__, output_names=output_names(meta),
        layout=input_layout(meta["input"]))
    return files


def input_layout(port: dict) -> str | None:
    """The axis order of an image input as the README states it: NHWC when the model's input is transposed to
    channels first on the host, NCHW for a 4-D input taken as it is, None for other shapes."""
    if len(port["onnx_shape"]) != 4 or any(op["kind"] in LAYOUT_STEPS for op in port.get("host_ops", ())):
        return None  # not an image, or the model's own steps reorder it
    if list(port["permutation"]) == [0, 3, 1, 2]:
        return "N, H, W, C: channels last"
    return "N, C, H, W: channels first" if not port["permutation"] else None


def accelerator_metadata(graph: StreamGraph, board: Board, weights: dict | None = None,
                         streamed: dict | None = None) -> dict:
    """What the driver needs: host.json's quantization and layouts (and the weight load, and the weights in
    DDR), and how to reach the hardware."""
    model = cpp_names(graph).model
    meta = host_data(graph, board, weights) | {"clock_mhz": board.clock_mhz}
    if weights and board.interface == "zynq_axis_dma":
        meta["weights"] = weights | {"dma": WEIGHT_DMA}
    elif weights:
        meta["weights"] = weights | {"kernel": alveo_kernels(graph).mm2s_weights}
    if streamed:
        meta["weights_ddr"] = streamed_metadata(streamed, board, graph, weights is not None)
    if board.interface == "zynq_axis_dma":
        meta |= {"target": board.zynq.pynq, "bitstream": f"{model}.bit", "dma": DMA,  # the overlay's attribute
                 "max_transfer_bytes": 2 ** LENGTH_BITS - 1,
                 "csim": {"mode": "axis", "sources": [f"../hls/{model}.cpp", f"../hls/{model}_tb.cpp"],
                          "include": ["../hls"], "binary": f"csim/{model}_csim"}}
    else:
        kernels = alveo_kernels(graph)
        meta |= {"target": f"XRT 2022.2 or newer, platform {board.platform}", "xclbin": f"{model}.xclbin",
                 "kernels": {"mm2s": kernels.mm2s, "s2mm": kernels.s2mm}, "max_transfer_bytes": ALVEO_TRANSFER_BYTES,
                 "csim": {"mode": "memory",
                          "sources": ["../vitis/mm2s.cpp", "../vitis/s2mm.cpp", "../vitis/system_tb.cpp",
                                      f"../hls/{model}.cpp"] + (["../vitis/mm2s_weights.cpp"] if weights else []),
                          "include": ["../hls", "../vitis"], "binary": f"csim/{model}_system_csim"}}
    return meta


def streamed_metadata(streamed: dict, board: Board, graph: StreamGraph, loaded: bool) -> dict:
    """accelerator.json's "weights_ddr": the file the driver reads, per streamed port its bundle and where its part
    starts, and how the host reaches the accelerator: on a Zynq board the overlay's name of it (its control
    registers: one buffer, a pointer per port); on an Alveo card its kernel and each port's argument index (the
    top function's pointers follow its streams: s_axis, m_axis and, where weights are in URAM, s_axis_weights)."""
    arrays = [{"process": array["process"], "port": array["port"], "bundle": array["bundle"],
               "offset_bytes": array["offset_bytes"], "words": array["words"]} for array in streamed["arrays"]]
    reach = {"accelerator": ACCELERATOR}
    if board.interface != "zynq_axis_dma":
        first_pointer = 3 if loaded else 2
        arrays = [array | {"argument": first_pointer + index} for index, array in enumerate(arrays)]
        reach = {"kernel": alveo_kernels(graph).accelerator}
    return {"file": streamed["file"], "bytes": streamed["bytes"], "sha256": streamed["sha256"],
            "bytes_per_image": streamed["bytes_per_image"], **reach, "arrays": arrays}
