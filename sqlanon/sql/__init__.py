"""SQL generation: Jinja templates with quoting filters and bound parameters."""

from .render import Rendered, ident, literal, render

__all__ = ["Rendered", "ident", "literal", "render"]
