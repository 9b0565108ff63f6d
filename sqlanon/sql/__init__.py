"""SQL generation: Jinja templates with quoting filters and bound parameters."""

from .render import Rendered, fold_name, ident, literal, render

__all__ = ["Rendered", "fold_name", "ident", "literal", "render"]
