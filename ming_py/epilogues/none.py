"""No epilogue: the kernel's result is the int8 output (a max pooling's maximum; a process that moves
values)."""

from __future__ import annotations

from .base import EpilogueRule, EpilogueValues, register


@register
class Plain(EpilogueRule):
    ir_type = type(None)

    def golden(self, e, result, context):
        return result

    def reads_inputs(self):
        return False

    def arrays(self, e, spec):
        return {}

    def datapath(self, e):
        return None

    def emit(self, e, view, constant):
        if view.kind in ("maxpool", "global_maxpool"):
            return EpilogueValues("max")  # the running maximum is the output (emit/templates/epilogues/max.j2)
        return None
