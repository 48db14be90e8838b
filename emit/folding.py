"""`OUT/settings.yaml`: the folding a build chose (unroll factors, multipliers, requantizers, line-buffer
memory, weight memory and bands, FIFO depths) in the form `--settings` reads (`ilp.pins`), each process commented with its cycles
and resources. Building with it gives the same design; editing it and rebuilding gives the edited one."""

from __future__ import annotations

import json
import re

from ming_py.array_layout import LUTRAM_DEPTH, LUTRAM_MAX_BITS

from .environment import environment

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*")  # a YAML plain scalar that stays a string


def settings_yaml(data: dict) -> str:
    """The folding file of a build's report data (`emit.reports.report` with a solution)."""
    totals = data["totals"]
    moved = any(_chosen_weight_memory(node) for node in data["nodes"])
    processes = [_process(node, moved) for node in data["nodes"]]
    channels = [{"key": _key(c["name"]), "depth": c["fifo_depth"]} for c in data["channels"]]
    return environment().get_template("settings.yaml.j2").render(
        model=data["model"], board=data["board"], rule=totals["solver"]["rule"], latency=_latency(data),
        processes=processes, channels=channels)


def _latency(data: dict) -> str:
    """The design's simulated latency, and the model's estimate the ILP chose by; or the simulation's deadlock."""
    totals = data["totals"]
    if totals.get("simulated_deadlock"):
        return f"The cycle-level simulation deadlocks: {totals['simulated_deadlock'][0]}."
    return (f"Latency: {totals['cycles']:,} cycles ({totals['latency_us']:g} us at {data['clock_mhz']:g} MHz) in the "
            f"cycle-level simulation; the ILP's model estimated {totals['estimated_cycles']:,}.")


def _process(node: dict, weights_moved: bool) -> dict:
    """`weights_moved`: whether the ILP moved any process's weights from where their size puts a ROM; where it did,
    it could move every process's, so the weights it left in BRAM are pinned there too. Where it moved none, it
    was offered no other memory (`ilp.candidates.loaded_weight_memories`: offered only where the ROMs cannot all
    fit), and the same model and budget offer none again."""
    schedule = node["schedule"]
    choices = []
    if "multipliers" in schedule:
        choices.append(("multipliers", schedule["multipliers"]))
    if node["requantization"] is not None:
        choices.append(("requantizers", schedule.get("requantizers", 0)))
    if schedule.get("storage", {}).get("line_buffer") in ("bram", "uram"):  # small ones sit in LUTRAM either way
        choices.append(("line_buffer", schedule["storage"]["line_buffer"]))
    weights = _chosen_weight_memory(node)
    if weights is None and weights_moved and schedule.get("storage", {}).get("weights") == "bram":
        weights = "bram"
    if weights is not None:
        choices.append(("weights", weights))
    if weights == "ddr":
        choices.append(("bands", schedule.get("bands", 1)))
    figures = (f"{node['cycles']:,} cycles, {node['dsp']} DSP, {node['bram18k']} BRAM18K, {node['uram']} URAM, "
               f"{node['lut']:,} LUT")
    return {"key": _key(node["name"]), "kind": node["kind"], "figures": figures, "choices": choices,
            "unroll": ", ".join(f"{loop}: {factor}" for loop, factor in schedule["unroll"].items())}


def _chosen_weight_memory(node: dict) -> str | None:
    """The weights' memory where the ILP moved them from where their size puts a ROM (URAM, DDR, or LUTRAM for an
    array that would take BRAM: `ming_py.storage.plan_arrays`); None where they stay there."""
    memory = node["schedule"].get("storage", {}).get("weights")
    if memory in ("uram", "ddr"):
        return memory
    plan = next((b for b in node["buffers"] if b["role"] == "weights"), None)
    if memory != "lutram" or plan is None:
        return None
    small = plan["words_per_bank"] * plan["word_bits"] <= LUTRAM_MAX_BITS or plan["words_per_bank"] <= LUTRAM_DEPTH
    return None if small else memory


def _key(name: str) -> str:
    """A process or channel name as a YAML key: plain where YAML reads it back as the same string, else quoted
    (a JSON string is a YAML double-quoted scalar)."""
    plain = _PLAIN.fullmatch(name) and name.lower() not in ("true", "false", "yes", "no", "on", "off", "null")
    return name if plain else json.dumps(name)
