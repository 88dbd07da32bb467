"""The layout calculator (``fragmask layout EXPR``; docs/calculator.md)."""

from . import _fragmask


class Layout:
    """The result of a layout-calculator expression.

    ``text`` is what ``fragmask layout`` prints (also ``str(result)``). For a layout
    result ``kind == "layout"`` and ``shape`` / ``stride`` are nested tuples of ints
    (a bare int for a rank-0 mode); for an integer result (``size``, ``cosize``,
    ``rank``, ``depth``, ``eval``) ``kind == "int"``, ``value`` is the int (also
    ``int(result)``) and ``shape`` / ``stride`` are None. ``notes`` are the notes the
    CLI prints on operations where CuTe's implementations disagree.
    """

    __slots__ = ("expr", "text", "kind", "value", "shape", "stride", "notes")

    def __init__(self, expr, text, value, shape, stride, notes):
        self.expr = expr
        self.text = text
        self.kind = "int" if value is not None else "layout"
        self.value = value
        self.shape = shape
        self.stride = stride
        self.notes = list(notes)

    def __str__(self):
        return self.text

    def __repr__(self):
        return f"Layout({self.text!r})"

    def __int__(self):
        if self.value is None:
            raise TypeError(f"{self.text} is a layout, not an integer")
        return self.value

    __index__ = __int__

    def __eq__(self, other):
        if isinstance(other, Layout):
            return self.text == other.text
        return NotImplemented

    def __hash__(self):
        return hash(self.text)


def layout(expr):
    """Evaluates a CuTe layout-algebra expression, e.g.
    ``layout("composition((6,2):(8,2),(4,3):(3,1))").text == "((2,2),3):((24,2),8)"``.

    A malformed expression raises ValueError with the CLI's message (column, then the
    expression with a caret).
    """
    if not isinstance(expr, str):
        raise TypeError(f"layout expression must be a str, not {type(expr).__name__}")
    text, value, shape, stride, notes = _fragmask.layout(expr)
    return Layout(expr, text, value, shape, stride, notes)
