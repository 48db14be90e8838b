"""Driver of an accelerator built by ming: batches of float images in, float outputs out.

`Accelerator(deploy_dir, backend)` reads `accelerator.json` beside this file. `run(x)` does on the host
exactly what `ming reference` does around the integer network: it quantizes the float input
(onnxruntime's QuantizeLinear), lays every image out as 64-bit bus words (`ming_host.pack_images`),
moves the batch through the accelerator in transfers of whole images, unpacks, and runs the float tail
(e.g. Softmax). An image's output record holds every output of the model, each in its own whole words,
in the order of the metadata's "outputs"; `run` splits it by their word counts and gives the outputs by
name, in the model's order. The backends move the words:

* ``pynq``: the bitstream's AXI DMA on a Zynq board, one MM2S and one S2MM transfer per batch (the DMA
  puts TLAST on a transfer's last word; the accelerator closes its output packet there);
* ``xrt``: the data-mover kernels of an Alveo xclbin (memory to stream, stream to memory);
* ``csim``: the C-simulation of the same C++, compiled with g++ on first use. For a Zynq build it models
  the DMA: the beats the MM2S channel would send (TLAST on the transfer's last word) go to the testbench,
  and the beats that come back are taken as S2MM takes them, up to TLAST, checking the length and the
  framing flag. For an Alveo build it runs the data-mover kernels themselves around the accelerator.

Needs numpy, and on the board PYNQ (Zynq) or pyxrt (Alveo); the csim backend needs g++.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

try:
    from . import ming_host  # inside the ming package
except ImportError:
    import ming_host  # in OUT/deploy, beside this file

METADATA = "accelerator.json"
BACKENDS = ("pynq", "xrt", "csim")
DEFAULT_BACKEND = {"zynq_axis_dma": "pynq", "alveo_xrt": "xrt"}
# g++ flags of the C-simulation (MING_CSIM selects ming's stand-ins for the Vitis headers)
CSIM_FLAGS = ("-std=c++17", "-O2", "-DMING_CSIM")
# One beat of the testbench's --axis files: 64-bit data, TKEEP, TLAST, TUSER, padding to 16 bytes.
AXIS_BEAT = np.dtype([("data", "<u8"), ("keep", "u1"), ("last", "u1"), ("user", "u1"), ("pad", "V5")])
DMA_TIMEOUT_SECONDS = 10.0


class DeployError(Exception):
    """A problem a user can fix, stated in one line."""


@dataclass(frozen=True)
class Port:
    """One side of the accelerator: the model's tensor, its quantization and its bus layout."""

    onnx_name: str
    onnx_shape: tuple
    array_shape: tuple  # the accelerator's layout of the tensor
    stream_shape: tuple  # (C, H, W) of the map on the stream
    scale: float
    zero_point: int
    values: int  # int8 values per image
    words: int  # 64-bit bus words per image
    dtype: str = "float32"  # the model's element type here: "float32", "int8" or "uint8"
    permutation: tuple = ()  # the model's array -> the accelerator's layout (ming_host.accelerator_input)
    host_ops: tuple = ()  # the steps after the accelerator (outputs)
    quantizer: str = "onnxruntime"  # whose rounding quantizes a float input (ming_host.QUANTIZERS)
    index: int = 0  # an output's place among the model's outputs

    @classmethod
    def of(cls, data: dict) -> "Port":
        c, h, w = data["stream_shape"]
        return cls(data["onnx_name"], tuple(data["onnx_shape"]), tuple(data["array_shape"]), (c, h, w), data["scale"],
                   data["zero_point"], c * h * w, data["words"], data["dtype"],
                   tuple(data["permutation"]), tuple(map(ming_host.HostOp.of, data.get("host_ops", ()))),
                   data.get("quantizer", "onnxruntime"), data.get("index", 0))

    @property
    def image_shape(self) -> tuple:
        """The shape of one image: the model's shape without its batch dimension of 1."""
        return self.onnx_shape[1:] if len(self.onnx_shape) > 1 and self.onnx_shape[0] == 1 else self.onnx_shape


class Accelerator:
    """The accelerator of one build, driven through one backend."""

    def __init__(self, deploy_dir: str | Path | None = None, backend: str | None = None):
        self.deploy_dir = Path(deploy_dir or Path(__file__).resolve().parent)
        self.meta = read_metadata(self.deploy_dir)
        self.input = Port.of(self.meta["input"])
        self.outputs = [Port.of(data) for data in self.meta["outputs"]]  # in the order of the output record
        self.record_words = sum(port.words for port in self.outputs)
        name = backend or DEFAULT_BACKEND[self.meta["interface"]]
        if name not in BACKENDS:
            raise DeployError(f"--backend {name}: choose one of {', '.join(BACKENDS)}")
        self.backend_name = name
        self.backend = _BACKENDS[name](self)
        self.timing = Timing()

    @property
    def max_images_per_transfer(self) -> int:
        limit = self.meta.get("max_transfer_bytes")
        words = max(self.input.words, self.record_words)
        return max(1, limit // (8 * words)) if limit else 1 << 30

    def images_per_transfer(self, images: int, batch: int | None) -> int:
        """`batch` (default: all `images`) within the DMA's transfer limit."""
        if batch is not None and batch < 1:
            raise DeployError(f"--batch {batch}: give a positive number of images per transfer")
        return min(batch or images, self.max_images_per_transfer)

    def images(self, x: np.ndarray) -> np.ndarray:
        """`x` as (images, *image shape): the model's own shape is one image."""
        x = np.asarray(x)
        shape = self.input.image_shape
        if x.shape == self.input.onnx_shape:
            return x.reshape((1,) + shape)
        if x.shape[1:] == shape and x.shape[0] > 0:
            return x
        raise DeployError(f"input has shape {x.shape}; the model takes {self.input.onnx_shape} (one image) or "
                          f"(N, {', '.join(map(str, shape))}) for N images")

    def run(self, x: np.ndarray, batch: int | None = None) -> dict[str, np.ndarray]:
        """The model's outputs (by name, in the model's order) for the images in `x`, `batch` images per
        transfer (all of them by default): float, or int8 where the model's output is int8."""
        images = self.images(x)
        if self.input.dtype == "float32" and not np.isfinite(images.astype(np.float32)).all():
            raise DeployError("input holds NaN or infinite values")
        batch = self.images_per_transfer(len(images), batch)
        batches = [self._run_batch(images[i:i + batch]) for i in range(0, len(images), batch)]
        one_image = np.asarray(x).shape == self.input.onnx_shape
        outputs = {}
        for port in sorted(self.outputs, key=lambda port: port.index):
            y = np.concatenate([outputs_of_batch[port.onnx_name] for outputs_of_batch in batches])
            outputs[port.onnx_name] = y.reshape(port.onnx_shape) if one_image else y
        return outputs

    def _run_batch(self, images: np.ndarray) -> dict[str, np.ndarray]:
        start = time.perf_counter()
        try:
            q = ming_host.accelerator_input(images, self.input)
        except ValueError as exc:
            raise DeployError(f"input: {exc}") from None
        words_in, words_out = self.backend.buffers(len(images))
        ming_host.pack_images(q.reshape((len(images),) + self.input.stream_shape), self.input.stream_shape, words_in)
        packed = time.perf_counter()
        self.backend.run(len(images))
        moved = time.perf_counter()
        records = words_out.reshape(len(images), self.record_words)
        outputs, first = {}, 0
        for port in self.outputs:
            y = ming_host.unpack_images(records[:, first:first + port.words], port.stream_shape)
            outputs[port.onnx_name] = np.stack([self._tail(y[i], port) for i in range(len(images))])
            first += port.words
        self.timing.add(len(images), packed - start, moved - packed, time.perf_counter() - moved)
        return outputs

    @staticmethod
    def _tail(y: np.ndarray, port: Port) -> np.ndarray:
        """One image's output, as `ming reference` gives it (then without the batch dimension)."""
        return ming_host.model_output(y.reshape(port.array_shape), port).reshape(port.image_shape)


def read_metadata(deploy_dir: Path) -> dict:
    """The build's `accelerator.json` in `deploy_dir`."""
    try:
        return json.loads((deploy_dir / METADATA).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DeployError(f"{deploy_dir / METADATA}: cannot read the build's metadata ({exc})") from None


def output_names(meta: dict) -> list[str]:
    """The model's outputs in its own order (the metadata lists them in the order of the output record)."""
    return [data["onnx_name"] for data in sorted(meta["outputs"], key=lambda data: data["index"])]


class Timing:
    """Seconds spent packing (quantize, pack), in the accelerator (transfer to completion) and unpacking
    (unpack, float tail), over `images` images."""

    def __init__(self):
        self.images, self.pack, self.accelerator, self.unpack = 0, 0.0, 0.0, 0.0

    def add(self, images: int, pack: float, accelerator: float, unpack: float) -> None:
        self.images += images
        self.pack += pack
        self.accelerator += accelerator
        self.unpack += unpack


class PynqBackend:
    """The bitstream's AXI DMA (no scatter-gather): one MM2S and one S2MM transfer per batch."""

    def __init__(self, accelerator: Accelerator):
        try:
            from pynq import Overlay, allocate
        except ImportError:
            raise DeployError(f"the pynq backend needs PYNQ ({accelerator.meta['target']}); on this machine "
                              "use --backend csim") from None
        bitstream = accelerator.deploy_dir / accelerator.meta["bitstream"]
        if not bitstream.is_file() or not bitstream.with_suffix(".hwh").is_file():
            raise DeployError(f"{bitstream.name} and {bitstream.with_suffix('.hwh').name} must be in "
                              f"{accelerator.deploy_dir}: run vivado/build_bitstream.tcl on the build machine and "
                              "copy deploy/ to the board")
        self.overlay = Overlay(str(bitstream))
        self.dma = getattr(self.overlay, accelerator.meta["dma"])
        self.allocate = allocate
        self.input_words, self.record_words = accelerator.input.words, accelerator.record_words
        self.images = 0

    def buffers(self, images: int):
        if images != self.images:  # physically contiguous buffers, kept while the batch size stays
            self.words_in = self.allocate(shape=(images * self.input_words,), dtype=np.uint64)
            self.words_out = self.allocate(shape=(images * self.record_words,), dtype=np.uint64)
            self.images = images
        return self.words_in, self.words_out

    def run(self, images: int) -> None:
        channels = ((self.dma.sendchannel, "MM2S (input)", images * self.input_words),
                    (self.dma.recvchannel, "S2MM (output)", images * self.record_words))
        self.dma.recvchannel.transfer(self.words_out)  # S2MM first: the accelerator may answer at once
        self.dma.sendchannel.transfer(self.words_in)  # flushes the buffer from the CPU caches
        for channel, name, words in channels:
            _wait(channel, name, words)
        received = self.dma.recvchannel.transferred  # the S2MM length register: bytes up to TLAST
        if received != self.words_out.nbytes:
            raise DeployError(f"the accelerator's output packet ended after {received} of {self.words_out.nbytes} "
                              "bytes: the bitstream is not this build's, or its input was framed wrongly")


def _wait(channel, name: str, words: int) -> None:
    """PYNQ's wait (error check, cache invalidation, received length) once the channel is idle, with a time
    limit instead of PYNQ's endless wait for a transfer that never finishes."""
    deadline = time.monotonic() + DMA_TIMEOUT_SECONDS
    while not channel.idle and not channel.error:
        if time.monotonic() > deadline:
            raise DeployError(f"the DMA's {name} transfer of {words} words did not finish in "
                              f"{DMA_TIMEOUT_SECONDS:g} s: the accelerator stalled (is the bitstream this build's? "
                              "reload the overlay)")
    try:
        channel.wait()
    except RuntimeError as exc:
        raise DeployError(f"the DMA's {name} transfer failed: {exc}") from None


class XrtBackend:
    """The xclbin's data movers on an Alveo card: memory to stream, the free-running accelerator, stream to
    memory; one run of each per batch."""

    def __init__(self, accelerator: Accelerator):
        try:
            import pyxrt
        except ImportError:
            raise DeployError("the xrt backend needs XRT's Python bindings (source /opt/xilinx/xrt/setup.sh); on "
                              "this machine use --backend csim") from None
        xclbin = accelerator.deploy_dir / accelerator.meta["xclbin"]
        if not xclbin.is_file():
            raise DeployError(f"{xclbin.name} is not in {accelerator.deploy_dir}: run `make` in vitis/ first")
        kernels = accelerator.meta["kernels"]
        self.pyxrt = pyxrt
        self.device = pyxrt.device(int(os.environ.get("MING_XRT_DEVICE", "0")))
        uuid = self.device.load_xclbin(pyxrt.xclbin(str(xclbin)))
        self.mm2s = pyxrt.kernel(self.device, uuid, kernels["mm2s"])
        self.s2mm = pyxrt.kernel(self.device, uuid, kernels["s2mm"])
        self.input_words, self.record_words = accelerator.input.words, accelerator.record_words
        self.images = 0

    def buffers(self, images: int):
        if images != self.images:
            self.bo_in = self.pyxrt.bo(self.device, images * self.input_words * 8, self.pyxrt.bo.normal,
                                       self.mm2s.group_id(0))
            self.bo_out = self.pyxrt.bo(self.device, images * self.record_words * 8, self.pyxrt.bo.normal,
                                        self.s2mm.group_id(1))
            self.words_in = np.frombuffer(self.bo_in.map(), dtype=np.uint64)
            self.words_out = np.frombuffer(self.bo_out.map(), dtype=np.uint64)
            self.images = images
        return self.words_in, self.words_out

    def run(self, images: int) -> None:
        sync = self.pyxrt.xclBOSyncDirection
        self.bo_in.sync(sync.XCL_BO_SYNC_BO_TO_DEVICE)
        receive = self._start(self.s2mm, {1: self.bo_out, 2: images})
        send = self._start(self.mm2s, {0: self.bo_in, 2: images})
        send.wait()
        receive.wait()
        self.bo_out.sync(sync.XCL_BO_SYNC_BO_FROM_DEVICE)

    def _start(self, kernel, args: dict):
        run = self.pyxrt.run(kernel)
        for index, value in args.items():  # the stream argument is the platform's, not the host's
            run.set_arg(index, value)
        run.start()
        return run


class CsimBackend:
    """The C-simulation of this build's C++ in place of the hardware (see the module doc)."""

    def __init__(self, accelerator: Accelerator):
        self.input_words, self.record_words = accelerator.input.words, accelerator.record_words
        self.csim = accelerator.meta["csim"]
        self.binary = compile_csim(accelerator.deploy_dir, self.csim)
        self.images = 0

    def buffers(self, images: int):
        if images != self.images:
            self.words_in = np.zeros(images * self.input_words, dtype=np.uint64)
            self.words_out = np.zeros(images * self.record_words, dtype=np.uint64)
            self.images = images
        return self.words_in, self.words_out

    def run(self, images: int) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            sent, received = Path(tmp) / "in", Path(tmp) / "out"
            if self.csim["mode"] == "axis":
                mm2s_beats(self.words_in).tofile(sent)
                self._simulate(["--axis", str(sent), str(received)])
                self.words_out[:] = s2mm_words(np.fromfile(received, dtype=AXIS_BEAT), len(self.words_out))
            else:  # the data-mover kernels are in the simulation: it takes and gives device memory
                self.words_in.astype("<u8").tofile(sent)
                self._simulate([str(sent), str(received), str(images)])
                words = np.fromfile(received, dtype="<u8")
                if len(words) != len(self.words_out):
                    raise DeployError(f"the C-simulation wrote {len(words)} words, not {len(self.words_out)}")
                self.words_out[:] = words

    def _simulate(self, args: list) -> None:
        result = subprocess.run([str(self.binary), *args], capture_output=True, text=True)
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise DeployError(f"the C-simulation failed: {last}")


def check_output_paths(paths: list, names: list[str]) -> None:
    """`--output` once per model output, in the model's order (`names`), or once as an .npz archive."""
    if len(paths) == len(names) or (len(paths) == 1 and str(paths[0]).endswith(".npz")):
        return
    listed = ", ".join(repr(name) for name in names)
    raise DeployError(f"--output given {len(paths)} times; the model has {len(names)} outputs ({listed}): give "
                      "--output once per output in this order, or one .npz path")


def save_outputs(paths: list, outputs: dict[str, np.ndarray]) -> None:
    """Each output (by name, in the model's order) to its own .npy path, or all of them to one .npz archive
    whose keys are the output names (what numpy.load of it gives)."""
    if len(paths) == 1 and str(paths[0]).endswith(".npz"):
        with zipfile.ZipFile(paths[0], "w") as archive:  # numpy.savez's layout; any name is a key
            for name, y in outputs.items():
                with archive.open(f"{name}.npy", "w") as member:
                    np.lib.format.write_array(member, np.asanyarray(y), allow_pickle=False)
        return
    for path, y in zip(paths, outputs.values()):
        np.save(path, y)


def mm2s_beats(words: np.ndarray) -> np.ndarray:
    """The beats an AXI DMA MM2S transfer of `words` sends: whole words, TLAST on the transfer's last."""
    beats = np.zeros(len(words), dtype=AXIS_BEAT)
    beats["data"] = words
    beats["keep"] = 0xFF
    beats["last"][-1] = 1
    return beats


def s2mm_words(beats: np.ndarray, length: int) -> np.ndarray:
    """What an AXI DMA S2MM transfer of `length` words stores from `beats`, or the error it would end in."""
    ends = np.flatnonzero(beats["last"][:length])
    if len(ends) == 0:
        raise DeployError(f"no TLAST in the first {length} output words: the S2MM transfer would never finish")
    if ends[0] != length - 1:
        raise DeployError(f"TLAST after {ends[0] + 1} of {length} output words: the S2MM transfer would end early")
    if len(beats) != length:
        raise DeployError(f"the accelerator sent {len(beats)} words for a transfer of {length}")
    if (beats["keep"] != 0xFF).any():
        raise DeployError("an output word is not whole (TKEEP): the DMA would store it short")
    if beats["user"].any():
        raise DeployError("the accelerator flagged wrongly framed input (TUSER): TLAST in the middle of an image")
    return beats["data"]


def compile_csim(deploy_dir: Path, csim: dict) -> Path:
    """The C-simulation binary named in the metadata, compiled when missing or older than a source."""
    binary = deploy_dir / csim["binary"]
    sources = [deploy_dir / s for s in csim["sources"]]
    headers = [h for d in csim["include"] for h in sorted((deploy_dir / d).glob("*.h"))]
    missing = [str(s) for s in sources if not s.is_file()]
    if missing:
        raise DeployError(f"the C-simulation needs {missing[0]}: copy the whole build directory, not deploy/ alone")
    if binary.is_file() and all(binary.stat().st_mtime >= p.stat().st_mtime for p in sources + headers):
        return binary
    compile_program(sources, [deploy_dir / d for d in csim["include"]], CSIM_FLAGS, binary)
    return binary


def compile_program(sources: list, includes: list, flags: tuple, binary: Path) -> None:
    """g++ (or $CXX) `sources` into `binary`, atomically: whoever runs it meanwhile finds no binary or a
    complete one, and a failed or interrupted compile leaves none."""
    compiler = shutil.which(os.environ.get("CXX", "g++"))
    if compiler is None:
        raise DeployError("no C++ compiler found; install g++ (or set CXX)")
    binary.parent.mkdir(parents=True, exist_ok=True)
    staging = binary.with_name(f".{binary.name}.{os.getpid()}")
    try:
        result = subprocess.run([compiler, *flags, *(f"-I{d}" for d in includes), *map(str, sources), "-o",
                                 str(staging)], capture_output=True, text=True)
        if result.returncode != 0:
            first = next((line for line in result.stderr.splitlines() if "error" in line), result.stderr[:200])
            raise DeployError(f"the generated C++ did not compile: {first.strip()}")
        staging.replace(binary)
    finally:
        staging.unlink(missing_ok=True)


_BACKENDS = {"pynq": PynqBackend, "xrt": XrtBackend, "csim": CsimBackend}
