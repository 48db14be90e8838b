"""The backends that move an accelerator's words: ``pynq`` (the bitstream's AXI DMA on a Zynq board), ``xrt``
(the data-mover kernels of an Alveo xclbin) and ``csim`` (the C-simulation of the same C++, compiled with g++
on first use; see `ming_driver`). Each takes the `ming_driver.Accelerator` it serves, gives the word buffers of
a batch (`buffers`) and moves them through (`run`).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

try:  # inside the ming package
    from ..contract.ming_cxx import compile_csim, open_stamped, stamp_path
    from ..contract.ming_errors import DeployError
except ImportError:  # in OUT/deploy, beside this file
    from ming_cxx import compile_csim, open_stamped, stamp_path
    from ming_errors import DeployError

# One beat of the testbench's --axis files: 64-bit data, TKEEP, TLAST, TUSER, padding to 16 bytes.
AXIS_BEAT = np.dtype([("data", "<u8"), ("keep", "u1"), ("last", "u1"), ("user", "u1"), ("pad", "V5")])
DMA_TIMEOUT_SECONDS = 10.0
# Where weights stream from DDR the accelerator kernel is started once per image (ap_ctrl_chain, AMD UG1393
# "Execution Modes"): at most this many runs are queued, each restarted when it ends, so a batch of many images
# holds a bounded number of run objects.
RUNS_IN_FLIGHT = 32


def weight_words(accelerator) -> np.ndarray | None:
    """The words of deploy/weights.bin where the build keeps weights in URAM (accelerator.json's "weights"):
    the accelerator's weight port takes them once after the bitstream is loaded. None without weights in URAM."""
    weights = accelerator.meta.get("weights")
    if not weights:
        return None
    path = accelerator.deploy_dir / weights["file"]
    try:
        data = path.read_bytes()
    except OSError:
        raise DeployError(f"{path} is missing: copy the whole deploy/ directory of the build") from None
    if len(data) != weights["bytes"] or hashlib.sha256(data).hexdigest() != weights["sha256"]:
        raise DeployError(f"{path} is not this build's weights (its size or sha256 differs from accelerator.json)")
    return np.frombuffer(data, dtype="<u8")


def streamed_weights(accelerator) -> bytes | None:
    """The bytes of deploy/weights_ddr.bin where the build streams weights from DDR (accelerator.json's
    "weights_ddr"), checked against its size and sha256; None otherwise."""
    streamed = accelerator.meta.get("weights_ddr")
    if not streamed:
        return None
    path = accelerator.deploy_dir / streamed["file"]
    try:
        data = path.read_bytes()
    except OSError:
        raise DeployError(f"{path} is missing: copy the whole deploy/ directory of the build") from None
    if len(data) != streamed["bytes"] or hashlib.sha256(data).hexdigest() != streamed["sha256"]:
        raise DeployError(f"{path} is not this build's weights (its size or sha256 differs from accelerator.json)")
    return data


# The block-level control register of a Vitis HLS s_axilite interface (AMD UG1399, "S_AXILITE Control Register
# Map"): offset 0x00, bit 0 ap_start, bit 7 auto_restart (the block starts again each time it finishes).
CONTROL_OFFSET = 0x00
AP_START, AUTO_RESTART = 1 << 0, 1 << 7


def pointer_registers(registers: dict, port: str) -> tuple[int, int | None]:
    """The offsets of the (low, high) 32-bit registers of the m_axi pointer `port` among the accelerator's
    `registers` (PYNQ's `overlay.ip_dict[name]["registers"]`, read from the .hwh, name -> {"address_offset", ...},
    the map `ip.register_map` shows): a 64-bit pointer is `<port>_1` (bits 31..0) and `<port>_2` (bits 63..32); a
    pointer of 32 bits is one register `<port>` (high None)."""
    if f"{port}_1" in registers and f"{port}_2" in registers:
        return registers[f"{port}_1"]["address_offset"], registers[f"{port}_2"]["address_offset"]
    if port in registers:
        return registers[port]["address_offset"], None
    raise DeployError(f"the accelerator's register map has no register of the weights pointer {port} (its "
                      f"registers: {', '.join(registers)}): the bitstream is not this build's")


def pointer_writes(registers: dict, streamed: dict, base: int) -> list[tuple[int, int]]:
    """(register offset, value) of every streamed port's pointer: the buffer's physical address `base` plus the
    port's offset in weights_ddr.bin, split into 32-bit halves where the pointer is 64-bit."""
    writes = []
    for array in streamed["arrays"]:
        address = base + array["offset_bytes"]
        low, high = pointer_registers(registers, array["port"])
        if high is None and address >> 32:
            raise DeployError(f"the weights buffer lies at {address:#x}, above the 32-bit pointer {array['port']}")
        writes.append((low, address & 0xFFFF_FFFF))
        if high is not None:
            writes.append((high, address >> 32))
    return writes


class PynqBackend:
    """The bitstream's AXI DMA (no scatter-gather): one MM2S and one S2MM transfer per batch."""

    def __init__(self, accelerator):
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
        self._load_weights(accelerator)
        self._start_streaming(accelerator)
        self.input_words, self.record_words = accelerator.input.words, accelerator.record_words
        self.images = 0

    def _start_streaming(self, accelerator) -> None:
        """Where weights stream from DDR: one contiguous buffer filled once with weights_ddr.bin (kept for the
        overlay's life: the accelerator reads it every image), each port's pointer registers, then ap_start with
        auto_restart so the accelerator takes image after image like a free-running one. The registers are
        found by the pointers' names in the register map PYNQ reads from the .hwh (`pointer_registers`), not
        computed from Vitis HLS's layout: the .hwh holds the map of this very bitstream, whatever the HLS version
        laid out (reserved words, argument order)."""
        data = streamed_weights(accelerator)
        if data is None:
            return
        streamed = accelerator.meta["weights_ddr"]
        self.weights_buffer = self.allocate(shape=(len(data),), dtype=np.uint8)
        self.weights_buffer[:] = np.frombuffer(data, dtype=np.uint8)
        self.weights_buffer.flush()  # the accelerator reads DDR, not the CPU's caches
        ip = getattr(self.overlay, streamed["accelerator"])
        registers = self.overlay.ip_dict[streamed["accelerator"]]["registers"]
        for offset, value in pointer_writes(registers, streamed, self.weights_buffer.physical_address):
            ip.write(offset, value)
        ip.write(CONTROL_OFFSET, AP_START | AUTO_RESTART)

    def _load_weights(self, accelerator) -> None:
        """The weights in URAM through the weight DMA, once after the bitstream is loaded (which resets them)."""
        words = weight_words(accelerator)
        if words is None:
            return
        dma = getattr(self.overlay, accelerator.meta["weights"]["dma"])
        buffer = self.allocate(shape=(len(words),), dtype=np.uint64)
        buffer[:] = words
        dma.sendchannel.transfer(buffer)
        _wait(dma.sendchannel, "MM2S (weights)", len(words))
        buffer.freebuffer()

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
    memory; one run of each per batch. Where weights stream from DDR the accelerator is a kernel with AXI masters
    (ap_ctrl_chain, Vitis's default): each port's part of weights_ddr.bin is a buffer in its memory bank, filled
    once, and the accelerator runs once per image (its top function takes one image a call): up to
    RUNS_IN_FLIGHT runs queued on the compute unit, the movers started before any is waited for, and
    ap_ctrl_chain lets the next start while the previous drains (AMD UG1393, "Execution Modes"); auto-restart
    would need the kernel compiled with Vitis HLS's auto-restart counter and is not used. A run that does not
    complete within DMA_TIMEOUT_SECONDS, or ends in another state, stops the batch with an error."""

    def __init__(self, accelerator):
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
        self._load_weights(accelerator, uuid)
        self._load_streamed(accelerator, uuid)

    def _load_streamed(self, accelerator, uuid) -> None:
        """Where weights stream from DDR: the accelerator kernel, and per streamed port a buffer in the bank of
        its argument holding its part of weights_ddr.bin, synced to the card once."""
        self.accelerator_kernel, self.streamed_args = None, {}
        data = streamed_weights(accelerator)
        if data is None:
            return
        streamed = accelerator.meta["weights_ddr"]
        self.accelerator_kernel = self.pyxrt.kernel(self.device, uuid, streamed["kernel"])
        for array in streamed["arrays"]:
            part = np.frombuffer(data, dtype=np.uint8, count=16 * array["words"], offset=array["offset_bytes"])
            bo = self.pyxrt.bo(self.device, part.nbytes, self.pyxrt.bo.normal,
                               self.accelerator_kernel.group_id(array["argument"]))
            np.frombuffer(bo.map(), dtype=np.uint8)[:] = part
            bo.sync(self.pyxrt.xclBOSyncDirection.XCL_BO_SYNC_BO_TO_DEVICE)
            self.streamed_args[array["argument"]] = bo

    def _load_weights(self, accelerator, uuid) -> None:
        """The weights in URAM through the weights' mover kernel, once after the xclbin is loaded."""
        words = weight_words(accelerator)
        if words is None:
            return
        mover = self.pyxrt.kernel(self.device, uuid, accelerator.meta["weights"]["kernel"])
        bo = self.pyxrt.bo(self.device, words.nbytes, self.pyxrt.bo.normal, mover.group_id(0))
        np.frombuffer(bo.map(), dtype=np.uint64)[:] = words
        bo.sync(self.pyxrt.xclBOSyncDirection.XCL_BO_SYNC_BO_TO_DEVICE)
        self._finish(self._start(mover, {0: bo, 2: len(words)}), "the weights' mover")

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
        started = min(images, RUNS_IN_FLIGHT) if self.accelerator_kernel else 0
        computes = [self._start(self.accelerator_kernel, self.streamed_args) for _ in range(started)]
        send = self._start(self.mm2s, {0: self.bo_in, 2: images})
        for image in range(started, images if computes else 0):  # each later image reuses the oldest run
            compute = computes[image % RUNS_IN_FLIGHT]
            self._finish(compute, "the accelerator")
            compute.start()
        self._finish(send, "mm2s (input)")
        for compute in computes:
            self._finish(compute, "the accelerator")
        self._finish(receive, "s2mm (output)")
        self.bo_out.sync(sync.XCL_BO_SYNC_BO_FROM_DEVICE)

    def _finish(self, run, name: str) -> None:
        state = run.wait(int(DMA_TIMEOUT_SECONDS * 1000))
        if state != self.pyxrt.ert_cmd_state.ERT_CMD_STATE_COMPLETED:
            raise DeployError(f"the run of {name} did not complete within {DMA_TIMEOUT_SECONDS:g} s (XRT: {state}); "
                              f"reload the xclbin and check the card with xbutil examine")

    def _start(self, kernel, args: dict):
        run = self.pyxrt.run(kernel)
        for index, value in args.items():  # the stream argument is the platform's, not the host's
            run.set_arg(index, value)
        run.start()
        return run


class CsimBackend:
    """The C-simulation of this build's C++ in place of the hardware (see the module doc)."""

    def __init__(self, accelerator):
        self.input_words, self.record_words = accelerator.input.words, accelerator.record_words
        self.csim = accelerator.meta["csim"]
        # the binary, and its inputs' sha256: what every run checks the stamp against
        self.binary, self.inputs = compile_csim(accelerator.deploy_dir, self.csim)
        self.images = 0
        self.environment = None  # the testbench's weights.bin (in URAM) and weights_ddr.bin (streamed from DDR)
        files = {}
        if weight_words(accelerator) is not None:
            files["MING_WEIGHTS_FILE"] = accelerator.deploy_dir / accelerator.meta["weights"]["file"]
        if streamed_weights(accelerator) is not None:
            files["MING_WEIGHTS_DDR_FILE"] = accelerator.deploy_dir / accelerator.meta["weights_ddr"]["file"]
        if files:
            self.environment = os.environ | {name: str(path.resolve()) for name, path in files.items()}

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
        """Runs the very bytes that were verified against the stamp (`open_stamped`)."""
        fd = open_stamped(self.binary, self.inputs)
        if fd is None:
            raise DeployError(f"{self.binary} or its sources changed since it was compiled (they differ from its "
                              f"stamp {stamp_path(self.binary).name}); run again to compile it anew")
        try:
            how = {"executable": f"/proc/self/fd/{fd}", "pass_fds": (fd,)} if os.path.isdir("/proc/self/fd") else {}
            result = subprocess.run([str(self.binary), *args], capture_output=True, text=True, env=self.environment,
                                    **how)
        finally:
            os.close(fd)
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise DeployError(f"the C-simulation failed: {last}")



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



BACKENDS = {"pynq": PynqBackend, "xrt": XrtBackend, "csim": CsimBackend}
