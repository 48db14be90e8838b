"""The one Jinja environment every emitter renders emit/templates/ with: undefined values are errors, and
`md` escapes a value for a Markdown table cell."""

from __future__ import annotations

import jinja2

from .identifiers import TEMPLATES, markdown_cell

__all__ = ["TEMPLATES", "environment"]


def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, trim_blocks=False, lstrip_blocks=False)
    env.filters["md"] = lambda value: markdown_cell(str(value))
    return env
