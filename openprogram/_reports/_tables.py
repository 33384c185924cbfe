"""Tables that fit the console without cutting a number or an id.

Rich shrinks a table wider than the console by cutting cells ("1,0…"). Here numbers and
ids keep their full width; labels wrap; headers break between words; and a table that still
does not fit is printed as several, each repeating the key columns (which trace, which
policy). A console too narrow even for that (the key columns and one more) gets the
rows as lists instead, one ``column: value`` a line, so an id or a file name is still
whole. The console's width honours ``COLUMNS``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

Kind = Literal["number", "id", "label"]
LABEL_WIDTH = 12
"""Narrowest a wrapping label column gets before the table is split instead."""


@dataclass
class _Column:
    header: str
    kind: Kind
    key: bool


@dataclass
class Grid:
    """A table of strings whose numbers and ids are never cut (see the module)."""

    title: str | None = None
    columns: list[_Column] = field(default_factory=list)
    rows: list[tuple[list[str], str | None]] = field(default_factory=list)
    sections: set[int] = field(default_factory=set)

    def column(self, header: str, kind: Kind = "label", *, key: bool = False) -> None:
        """Add a column; ``key`` columns are repeated in every part of a split table."""
        self.columns.append(_Column(header, kind, key))

    def row(self, *cells: str, style: str | None = None) -> None:
        self.rows.append(([str(c) for c in cells], style))

    def section(self) -> None:
        """A line before the next row."""
        self.sections.add(len(self.rows))

    @property
    def row_count(self) -> int:
        return len(self.rows)

    def _widest(self, index: int) -> int:
        return max(
            (
                Text.from_markup(line).cell_len
                for cells, _ in self.rows
                for line in cells[index].split("\n")
            ),
            default=0,
        )

    def _need(self, index: int) -> int:
        column = self.columns[index]
        widest = self._widest(index)
        word = max((len(w) for w in column.header.split()), default=0)
        if column.kind == "label":
            return max(word, min(widest, LABEL_WIDTH))
        return max(word, widest)

    def _groups(self, width: int) -> Iterator[tuple[list[int], int]]:
        """Column indices per part, and the width each part has to spare."""
        keys = [i for i, c in enumerate(self.columns) if c.key]
        rest = [i for i, c in enumerate(self.columns) if not c.key]
        base = 1 + sum(self._need(i) + 3 for i in keys)
        group: list[int] = []
        used = base
        for index in rest:
            need = self._need(index) + 3
            if group and used + need > width:
                yield keys + group, width - used
                group, used = [], base
            group.append(index)
            used += need
        if group or not rest:
            yield keys + group, width - used

    def too_narrow(self, width: int) -> bool:
        """Whether even the key columns and one more do not fit in ``width``."""
        keys = [i for i, c in enumerate(self.columns) if c.key]
        rest = [i for i, c in enumerate(self.columns) if not c.key]
        base = 1 + sum(self._need(i) + 3 for i in keys)
        return base > width or any(base + self._need(i) + 3 > width for i in rest)

    def listed(self, width: int) -> list[Text]:
        """The rows as lists, one ``column: value`` a line (a value that does not fit
        beside its column's name goes on the next line, indented)."""
        lines = [Text.from_markup(f"[bold]{self.title}[/]")] if self.title else []
        for cells, _ in self.rows:
            lines.append(Text(""))
            for column, cell in zip(self.columns, cells, strict=True):
                if not cell:
                    continue
                values = cell.split("\n")
                name = column.header
                first = Text.from_markup(values[0])
                if len(name) + 2 + first.cell_len <= width:
                    lines.append(Text(f"{name}: ") + first)
                    rest = values[1:]
                else:
                    lines.append(Text(f"{name}:"))
                    rest = values
                lines.extend(Text("  ") + Text.from_markup(value) for value in rest)
        return lines

    def tables(self, width: int) -> list[Table]:
        """The tables this grid prints as in ``width`` columns (one when it fits)."""
        groups = list(self._groups(width))
        found = []
        for part, (indices, spare) in enumerate(groups):
            title = self.title
            if title and len(groups) > 1:
                title = f"{title} ({part + 1} of {len(groups)})"
            table = Table(title=title)
            sizes = {index: self._need(index) for index in indices}
            for index in indices:  # room to spare: labels unwrapped first, then headers
                if self.columns[index].kind == "label" and spare > 0:
                    grown = min(self._widest(index), sizes[index] + spare)
                    spare -= max(0, grown - sizes[index])
                    sizes[index] = max(sizes[index], grown)
            for index in indices:
                wanted = len(self.columns[index].header) - sizes[index]
                if 0 < wanted <= spare:
                    spare -= wanted
                    sizes[index] += wanted
            for index in indices:
                column = self.columns[index]
                size = sizes[index]
                header = textwrap.fill(column.header, size, break_long_words=False)
                table.add_column(
                    header,
                    justify="right" if column.kind == "number" else "left",
                    width=size,
                    overflow="fold",
                    no_wrap=column.kind != "label",
                )
            for position, (cells, style) in enumerate(self.rows):
                table.add_row(*(cells[i] for i in indices), style=style,
                              end_section=position + 1 in self.sections)  # fmt: skip
            found.append(table)
        return found

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        # Cells wrap even on a console that soft-wraps its messages (one line per message
        # when piped, so a path or an id is never broken).
        wrapping = options.update(no_wrap=False, overflow="fold")
        if self.too_narrow(options.max_width):
            for line in self.listed(options.max_width):
                yield from console.render(line, wrapping)
            return
        for table in self.tables(options.max_width):
            yield from console.render(table, wrapping)


def console_width() -> int | None:
    """The width for a console: ``COLUMNS`` when set, the terminal's when there is one
    (``None`` lets rich ask), else 160 — wide enough for our tables when piped."""
    import os
    import sys

    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return None if sys.stdout.isatty() else 160
