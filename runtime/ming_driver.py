"""Driver of an accelerator built by ming: batches of float images in, float outputs out.

`Accelerator(deploy_dir, backend)` reads `accelerator.json` beside this file. `run(x)` does on the host
exactly what `ming reference` does around the integer network: it quantizes the float input
(onnxruntime's QuantizeLinear), lays every image out as 64-bit bus words (`ming_host.pack_images`),
moves the batch through the accelerator in transfers of whole images, unpacks, and runs the float tail
(e.g. Softmax) on all the images of a transfer at once (`batch_outputs`). An image's output record holds
every output of the model, each in its own whole words, in the order of the metadata's "outputs"; `run`
splits it by their word counts and gives the outputs by name, in the model's order. The backends move the words:

* ``pynq``: the bitstream's AXI DMA on a Zynq board, one MM2S and one S2MM transfer per batch (the DMA
  puts TLAST on a transfer's last word; the accelerator closes its output packet there);
* ``xrt``: the data-mover kernels of an Alveo xclbin (memory to stream, stream to memory);
* ``csim``: the C-simulation of the same C++, compiled with g++ on first use. For a Zynq build it models
  the DMA: the beats the MM2S channel would send (TLAST on the transfer's last word) go to the testbench,
  and the beats that come back are taken as S2MM takes them, up to TLAST, checking the length and the
  framing flag. For an Alveo build it runs the data-mover kernels themselves around the accelerator.

The backends are in `ming_backends`; what the driver shares with ming (the host numerics, the metadata's
schema, the files of a model's values) is in the contract modules beside it. Needs numpy, and on the board PYNQ (Zynq) or pyxrt (Alveo); the csim backend needs g++.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

try:  # inside the ming package
    from ..contract import ming_host
    from ..contract.accelerator_schema import METADATA, REBUILD, accelerator_problem
    from ..contract.ming_errors import DeployError
    from ..contract.ming_json import read_json
    from ..contract.ming_ports import Port, input_images
    from . import ming_backends
except ImportError:  # in OUT/deploy, beside this file
    import ming_backends
    import ming_host
    from accelerator_schema import METADATA, REBUILD, accelerator_problem
    from ming_errors import DeployError
    from ming_json import read_json
    from ming_ports import Port, input_images

BACKENDS = tuple(ming_backends.BACKENDS)
DEFAULT_BACKEND = {"zynq_axis_dma": "pynq", "alveo_xrt": "xrt"}
# int8 values of an output the host tail takes at once: all the images of a transfer for a classifier, a few
# for a large map, whose int64 temporaries then stay in the CPU's cache and below glibc's 128 KiB mmap
# threshold (larger ones are fresh pages, zeroed by the kernel at every call: slower than a loop over images)
TAIL_CHUNK_VALUES = 1 << 14


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
        self.backend = ming_backends.BACKENDS[name](self)
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
        return input_images(x, self.input)

    def run(self, x: np.ndarray, batch: int | None = None) -> dict[str, np.ndarray]:
        """The model's outputs (by name, in the model's order) for the images in `x`, `batch` images per
        transfer (all of them by default): float, or int8 where the model's output is int8."""
        images = self.images(x)
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
        outputs = batch_outputs(words_out.reshape(len(images), self.record_words), self.outputs)
        self.timing.add(len(images), packed - start, moved - packed, time.perf_counter() - moved)
        return outputs


def batch_outputs(records: np.ndarray, ports: list[Port]) -> dict[str, np.ndarray]:
    """The outputs of a batch (by name, each with the images on axis 0) from its output records (images x
    record words): each output's words in turn (`ports` in the record's order), unpacked and run through the
    host tail many images at once, as many as make TAIL_CHUNK_VALUES values (at least one)."""
    outputs, first = {}, 0
    for port in ports:
        words = records[:, first:first + port.words]
        step = max(1, TAIL_CHUNK_VALUES // port.values)
        outputs[port.onnx_name] = np.concatenate([_outputs_of_images(words[i:i + step], port)
                                                  for i in range(0, len(words), step)])
        first += port.words
    return outputs


def _outputs_of_images(words: np.ndarray, port: Port) -> np.ndarray:
    """The output `port` of the images whose words are `words` (images x the port's words), stacked on axis 0,
    each in the model's shape without its batch dimension."""
    maps = ming_host.unpack_images(words, port.stream_shape)
    q = maps.reshape((len(maps),) + port.array_shape)
    return ming_host.model_output_of_images(q, port).reshape((len(maps),) + port.image_shape)



def read_metadata(deploy_dir: Path) -> dict:
    """The build's `accelerator.json` in `deploy_dir`, every field checked (`accelerator_problem`): the
    metadata is data, and a damaged or edited value stops here, before anything runs."""
    deploy_dir = Path(deploy_dir)
    try:
        meta = read_json(deploy_dir / METADATA)
    except OSError as exc:
        raise DeployError(f"{deploy_dir / METADATA}: cannot read the build's metadata ({exc.strerror or exc})") \
            from None
    except ValueError as exc:
        raise DeployError(f"{deploy_dir / METADATA}: cannot read the build's metadata ({' '.join(str(exc).split())})") \
            from None
    problem = accelerator_problem(meta, deploy_dir)
    if problem:
        raise DeployError(f"{deploy_dir / METADATA}: {problem}; the metadata was damaged or edited: {REBUILD}")
    return meta



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
