"""What runs beside the accelerator, on the board or here: copied verbatim into a build's OUT/deploy/.

`ming_driver` moves batches through an accelerator, `ming_backends` moves the words (PYNQ and an AXI DMA,
XRT and the data-mover kernels, or the C-simulation), `run` is the command line. They import only the
contract (`ming_py.contract`, copied beside them) and need only numpy (and PYNQ or pyxrt on the board),
Python 3.10 or newer: PYNQ 3.0's Python.
"""
