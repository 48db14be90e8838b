"""LUTs and LUT levels of a window process's loop control, as the emitted C++ computes it and as it did with
32-bit ints, measured with yosys (`synth_xilinx -family xcup`, the UltraScale+ fabric of the KV260).

    python benchmarks/control_luts.py            # needs yosys on the PATH; not part of CI

Each model is the control of `emit/templates/process/window.cpp.j2` (its `ming::WindowCursor`, ming_window.h, and
tile counters) for one conv geometry written in
Verilog, every register of it (the next values only; the MACs, memories and streams are not modelled):
`exact` follows the emitted code (registers of the width of their range, every next value computed from
this iteration's registers), `int32` the code before (32-bit ints; the next position's predicates
computed from the counters updated earlier in the same iteration). The LUT levels are the LUTs on the
longest path between registers of the mapped netlist, the cells on the path those and the carry chain and
MUXF7/F8 cells on the longest path counting them too.
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Conv:
    name: str
    h_in: int
    w_in: int
    pad: int
    kernel: int
    stride: int
    tokens_in: int  # input channels / lanes
    tokens_out: int  # output channels / lanes
    unroll_k: int = 1  # window elements per iteration (a whole row or less)

    @property
    def padded(self) -> tuple[int, int]:
        return self.h_in + 2 * self.pad, self.w_in + 2 * self.pad

    @property
    def out(self) -> tuple[int, int]:
        return tuple((p - self.kernel) // self.stride + 1 for p in self.padded)

    @property
    def k_tiles(self) -> int:
        return self.kernel * self.kernel // self.unroll_k

    @property
    def fold(self) -> int:
        return self.tokens_out * self.tokens_in * self.k_tiles


CONVS = (
    Conv("tiny_cnn conv1 (16x16, 3 -> 8 channels)", 16, 16, 1, 3, 1, 3, 8),
    Conv("224x224 stride 2 (3 -> 32 channels, 8 lanes out)", 224, 224, 1, 3, 2, 3, 4),
)


def bits(maximum: int) -> int:
    return max(maximum.bit_length(), 1)


def after(first: int, register: str) -> str:
    """`register + 1 >= first`, compared with the constant as the emitted code does."""
    return f"{register} >= {first - 1}" if first > 0 else "1'b1"


def exact_model(c: Conv) -> str:
    """The emitted control: registers of their range's width, next values from this iteration's registers."""
    (ph, pw), (ho, wo) = c.padded, c.out
    span, rows = c.kernel - 1, c.kernel
    kw_tile = c.unroll_k  # columns of a k tile (unroll_k <= kernel)
    last_col, last_row = c.kernel - kw_tile, c.kernel - 1
    spacing = c.fold // c.tokens_in
    first_slot = (rows - c.pad % rows) % rows
    first_phase = (c.stride - span % c.stride) % c.stride
    regs = {"pr": bits(ph), "pc": bits(pw - 1), "row_slot": bits(rows - 1), "row_phase": bits(c.stride - 1),
            "col_phase": bits(c.stride - 1), "step": bits(c.fold - 1), "token": bits(c.tokens_in - 1),
            "gap": bits(spacing - 1), "top": bits((ho - 1) * c.stride), "left": bits((wo - 1) * c.stride),
            "top_slot": bits(rows - 1), "row_offset": bits(last_row), "col_offset": bits(last_col),
            "ic_tile": bits(c.tokens_in - 1), "oc_tile": bits(c.tokens_out - 1)}
    flags = ("arrives", "window", "position_last", "read")
    declarations = "\n".join(f"  output reg [{w - 1}:0] {n};" for n, w in regs.items())
    declarations += "\n" + "\n".join(f"  output reg {n};" for n in flags)
    return f"""
module control(input clk, input rst,
{declarations.replace(';', ',').rstrip(',')}
);
  wire spaced = !window || gap == {spacing - 1};
  wire row_end = pc == {pw - 1};
  wire emits = pr >= {span} && pr < {span + ho * c.stride} && row_phase == 0 && pc >= {span} &&
               pc < {span + wo * c.stride} && col_phase == 0;
  wire next_arrives = (!row_end && pr >= {c.pad} && pr < {c.pad + c.h_in} && {after(c.pad, 'pc')} &&
                       pc < {c.pad + c.w_in - 1}) || (row_end && {int(c.pad == 0)} && {after(c.pad, 'pr')} &&
                       pr < {c.pad + c.h_in - 1});
  always @(posedge clk) begin
    if (rst) begin
      pr <= 0; pc <= 0; row_slot <= {first_slot}; row_phase <= {first_phase}; col_phase <= {first_phase};
      arrives <= {int(c.pad == 0)}; window <= 0; step <= 0; position_last <= {int(c.pad != 0 or c.tokens_in == 1)};
      read <= {int(c.pad == 0)}; token <= 0; gap <= 0; top <= 0; left <= 0; top_slot <= 0;
      row_offset <= 0; col_offset <= 0; ic_tile <= 0; oc_tile <= 0;
    end else begin
      if (window) begin
        if (col_offset != {last_col}) col_offset <= col_offset + {kw_tile};
        else begin
          col_offset <= 0;
          if (row_offset != {last_row}) row_offset <= row_offset + 1;
          else begin
            row_offset <= 0;
            if (ic_tile != {c.tokens_in - 1}) ic_tile <= ic_tile + 1;
            else begin
              ic_tile <= 0;
              oc_tile <= oc_tile != {c.tokens_out - 1} ? oc_tile + 1 : 0;
            end
          end
        end
      end
      if (read) token <= token != {c.tokens_in - 1} ? token + 1 : 0;
      gap <= spaced ? 0 : gap + 1;
      if (position_last) begin
        arrives <= next_arrives;
        window <= emits;
        read <= next_arrives;
        position_last <= emits ? {int(c.fold == 1)} : !next_arrives || {int(c.tokens_in == 1)};
        step <= 0;
        if (emits) begin
          top <= pr - {span};
          left <= pc - {span};
          top_slot <= row_slot >= {span} ? row_slot - {span} : row_slot + {rows - span};
        end
        if (row_end) begin
          pc <= 0; col_phase <= {first_phase}; pr <= pr + 1;
          row_slot <= row_slot != {rows - 1} ? row_slot + 1 : 0;
          row_phase <= row_phase != {c.stride - 1} ? row_phase + 1 : 0;
        end else begin
          pc <= pc + 1;
          col_phase <= col_phase != {c.stride - 1} ? col_phase + 1 : 0;
        end
      end else begin
        read <= arrives && spaced;
        position_last <= window ? step == {c.fold - 2} : step == {c.tokens_in - 2};
        step <= step + 1;
      end
    end
  end
endmodule
"""


def int32_model(c: Conv) -> str:
    """The control as it was: 32-bit ints, the next position's predicates from the counters just updated."""
    (ph, pw), (ho, wo) = c.padded, c.out
    span, rows = c.kernel - 1, c.kernel
    last_col, last_row = c.kernel - c.unroll_k, c.kernel - 1
    spacing = c.fold // c.tokens_in
    first_slot = (rows - c.pad % rows) % rows
    first_phase = (c.stride - span % c.stride) % c.stride
    names = ("pr", "pc", "step", "steps", "token", "spacing", "wait_", "row_slot", "row_phase", "col_phase",
             "top", "left", "top_slot", "row_offset", "col_offset", "oc_tile", "ic_tile")
    outputs = ",\n".join([f"  output reg signed [31:0] {n}" for n in names] + ["  output reg window"])
    nexts = "\n".join(f"  reg signed [31:0] n_{n};" for n in names) + "\n  reg n_window;\n  reg signed [31:0] r, cc, nr, nc;"
    return f"""
module control(input clk, input rst,
{outputs}
);
{nexts}
  always @* begin
    {' '.join(f'n_{n} = {n};' for n in names)} n_window = window;
    r = pr - {c.pad}; cc = pc - {c.pad};
    if (n_wait_ > 0) n_wait_ = n_wait_ - 1;
    else if (pr < {ph} && r >= 0 && r < {c.h_in} && cc >= 0 && cc < {c.w_in} && n_token < {c.tokens_in}) begin
      n_token = n_token + 1;
      n_wait_ = n_spacing - 1;
    end
    if (window) begin
      if (n_col_offset < {last_col}) n_col_offset = n_col_offset + {c.unroll_k};
      else if (n_row_offset < {last_row}) begin n_col_offset = 0; n_row_offset = n_row_offset + 1; end
      else begin
        n_col_offset = 0; n_row_offset = 0;
        n_ic_tile = n_ic_tile + 1;
        if (n_ic_tile == {c.tokens_in}) begin n_ic_tile = 0; n_oc_tile = n_oc_tile + 1; end
      end
    end
    n_step = n_step + 1;
    if (n_step == n_steps) begin
      n_step = 0; n_oc_tile = 0;
      n_top = n_pr - {span + c.pad};
      n_left = n_pc - {span + c.pad};
      n_top_slot = n_row_slot >= {span} ? n_row_slot - {span} : n_row_slot + {rows - span};
      n_window = n_pr >= {span} && n_pc >= {span} && n_row_phase == 0 && n_col_phase == 0 &&
                 n_pr < {span + ho * c.stride} && n_pc < {span + wo * c.stride};
      n_pc = n_pc + 1;
      if (n_pc == {pw}) begin
        n_pc = 0; n_col_phase = {first_phase}; n_pr = n_pr + 1;
        n_row_slot = n_row_slot == {rows - 1} ? 0 : n_row_slot + 1;
        n_row_phase = n_row_phase == {c.stride - 1} ? 0 : n_row_phase + 1;
      end else n_col_phase = n_col_phase == {c.stride - 1} ? 0 : n_col_phase + 1;
      nr = n_pr - {c.pad}; nc = n_pc - {c.pad};
      n_steps = n_window ? {c.fold} : (n_pr < {ph} && nr >= 0 && nr < {c.h_in} && nc >= 0 && nc < {c.w_in}) ? {c.tokens_in} : 1;
      n_spacing = n_window ? {spacing} : 1;
      n_token = 0; n_wait_ = 0;
    end
  end
  always @(posedge clk) begin
    if (rst) begin
      {' '.join(f'{n} <= 0;' for n in names)} window <= 0;
      steps <= {c.tokens_in if c.pad == 0 else 1}; spacing <= 1; row_slot <= {first_slot};
      row_phase <= {first_phase}; col_phase <= {first_phase};
    end else begin
      {' '.join(f'{n} <= n_{n};' for n in names)} window <= n_window;
    end
  end
endmodule
"""


def measure(verilog: str) -> tuple[int, int, int]:
    """(LUTs, LUT levels on the longest path between registers, cells on the longest path counting carry chain
    and MUXF7/F8 cells too) after synth_xilinx -family xcup."""
    with tempfile.TemporaryDirectory() as tmp:
        source, netlist = Path(tmp) / "control.v", Path(tmp) / "control.json"
        source.write_text(verilog)
        script = f"read_verilog {source}; synth_xilinx -family xcup -top control -flatten; write_json {netlist}"
        run = subprocess.run(["yosys", "-q", "-p", script], capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(run.stderr[-2000:])
        module = json.loads(netlist.read_text())["modules"]["control"]
    cells = module["cells"].values()
    luts = sum(c["type"].startswith("LUT") for c in cells)
    driver = {}  # net bit -> the combinational cell driving it
    for cell in cells:
        if not cell["type"].startswith("FD"):
            for port, direction in cell["port_directions"].items():
                if direction == "output":
                    driver.update((bit, id(cell)) for bit in cell["connections"][port])
    by_id = {id(c): c for c in cells}

    @functools.lru_cache(maxsize=None)
    def depth(cell_id: int, only_luts: bool) -> int:  # cells on the longest path from a register to its output
        cell = by_id[cell_id]
        inputs = [bit for port, direction in cell["port_directions"].items() if direction == "input"
                  for bit in cell["connections"][port]]
        before = max((depth(driver[bit], only_luts) for bit in inputs if bit in driver), default=0)
        return before + (cell["type"].startswith("LUT") or not only_luts)

    sys.setrecursionlimit(100_000)
    logic = [i for i in by_id if not by_id[i]["type"].startswith("FD")]
    return luts, max(depth(i, True) for i in logic), max(depth(i, False) for i in logic)


def main() -> int:
    if shutil.which("yosys") is None:
        print("yosys is not on the PATH (apt-get install yosys)", file=sys.stderr)
        return 1
    print(f"{'conv':50} {'control':8} {'LUTs':>6} {'LUT levels':>11} {'cells on path':>14}")
    for conv in CONVS:
        for name, model in (("int32", int32_model), ("exact", exact_model)):
            luts, levels, cells = measure(model(conv))
            print(f"{conv.name:50} {name:8} {luts:6} {levels:11} {cells:14}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
