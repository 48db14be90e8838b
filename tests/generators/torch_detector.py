"""Writes tests/data/detectors/torch_face_*.onnx: a small face detector written in PyTorch as such models are
(RetinaFace/UltraFace heads: `conv(x).permute(0, 2, 3, 1).contiguous().view(x.size(0), -1, k)`), exported by
PyTorch's TorchScript exporter (`torch.onnx.export(..., dynamo=False)`, opset 12, a dynamic batch), so the
Shape -> Gather -> Unsqueeze -> Concat -> Reshape subgraphs and Constant nodes are the exporter's own; then
quantized as `detector_models.py` does (vendor-style QDQ, power-of-two scales).

* `torch_face_levels.onnx`: each map's scores and boxes decoded on their own (Sigmoid; centres
  `loc * 0.1 * anchor_wh + anchor_xy`, sizes `Exp(loc * 0.2) * anchor_wh`);
* `torch_face_concat.onnx`: the heads concatenated over the maps first, as RetinaFace does.

    python -m venv /work/torchenv
    /work/torchenv/bin/pip install --index-url https://download.pytorch.org/whl/cpu torch
    /work/torchenv/bin/pip install numpy onnx onnxscript onnxruntime
    /work/torchenv/bin/python tests/generators/torch_detector.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from detector_models import OUT, VENDOR_OPS, _anchors, power_of_two_scales, quantize  # noqa: E402

SIZE, PER_POSITION, SIDES = 32, 2, (8, 4)


class FaceDetector(nn.Module):
    def __init__(self, concatenated: bool):
        super().__init__()
        self.concatenated = concatenated
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, 16, 3, 2, 1), nn.ReLU())
        self.down = nn.Sequential(nn.Conv2d(16, 16, 3, 2, 1), nn.ReLU())
        self.heads = nn.ModuleList(nn.ModuleDict({"scores": nn.Conv2d(16, PER_POSITION, 1),
                                                  "centres": nn.Conv2d(16, PER_POSITION * 2, 1),
                                                  "sizes": nn.Conv2d(16, PER_POSITION * 2, 1)}) for _ in SIDES)
        for side in SIDES:
            xy, wh = _anchors((side,), PER_POSITION, SIZE)
            self.register_buffer(f"xy{side}", torch.from_numpy(xy))
            self.register_buffer(f"wh{side}", torch.from_numpy(wh))
        xy, wh = _anchors(SIDES, PER_POSITION, SIZE)
        self.register_buffer("xy", torch.from_numpy(xy))
        self.register_buffer("wh", torch.from_numpy(wh))

    @staticmethod
    def flatten(y: torch.Tensor, k: int) -> torch.Tensor:
        return y.permute(0, 2, 3, 1).contiguous().view(y.size(0), -1, k)

    def decode(self, scores, centres, sizes, xy, wh):
        return torch.sigmoid(scores), centres * 0.1 * wh + xy, torch.exp(sizes * 0.2) * wh

    def forward(self, x):
        first = self.stem(x)
        maps = (first, self.down(first))
        heads = [{name: self.flatten(conv(feature), 1 if name == "scores" else 2) for name, conv in head.items()}
                 for head, feature in zip(self.heads, maps)]
        if self.concatenated:
            return self.decode(*(torch.cat([h[name] for h in heads], 1) for name in ("scores", "centres", "sizes")),
                               self.xy, self.wh)
        outputs = []
        for head, side in zip(heads, SIDES):
            outputs += self.decode(head["scores"], head["centres"], head["sizes"], getattr(self, f"xy{side}"),
                                   getattr(self, f"wh{side}"))
        return tuple(outputs)


def export(concatenated: bool) -> onnx.ModelProto:
    torch.manual_seed(5)
    model = FaceDetector(concatenated).eval()
    names = ["scores", "centres", "sizes"] if concatenated else \
        [f"{n}{side}" for side in SIDES for n in ("scores", "centres", "sizes")]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "float.onnx"
        torch.onnx.export(model, torch.randn(1, 3, SIZE, SIZE), str(path), dynamo=False, opset_version=12,
                          input_names=["input"], output_names=names,
                          dynamic_axes={name: {0: "batch"} for name in ["input", *names]})
        return onnx.load(str(path))


def main() -> None:
    for concatenated, name in ((False, "torch_face_levels.onnx"), (True, "torch_face_concat.onnx")):
        path = quantize(export(concatenated), OUT / name, VENDOR_OPS)
        power_of_two_scales(path)
        model = onnx.load(str(path))
        print(name, path.stat().st_size, "bytes, opset", model.opset_import[0].version,
              sorted({n.op_type for n in model.graph.node}), file=sys.stderr)


if __name__ == "__main__":
    main()
