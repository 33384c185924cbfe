"""A JSONL trace read as it grows: each read parses only the lines appended since the last.

The format's line parser (``LINE_FORMATS``) is kept between reads, with the byte offset of
the last complete line and the records those lines made final. A read returns the whole
trace as ``parse_trace`` would now: those records, then the ones a copy of the parser still
holds at the end of the file (with a last line not yet ended by a newline, when it is whole
JSON), so importing it is the same as importing a file read from scratch. A half-written
last line is left for the next read. When the bytes already read are gone (the file was
replaced, truncated or rewritten: its inode, its size and the last 4 KiB read are checked),
``read`` raises ``Rewritten``, and the caller starts over.
"""

from __future__ import annotations

import copy
import hashlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec

from openprogram.importers._driver import ParsedTrace, chain_of, chain_on
from openprogram.importers._model import Imported
from openprogram.importers._reading import LineParser, Reading, decode_lines

__all__ = ["GrowingTrace", "Rewritten"]

CHECKED_BYTES = 4_096
"""Bytes before the offset compared on every read: the file still begins as it did."""


class Rewritten(Exception):
    """The bytes a growing trace already read are no longer in the file."""


class GrowingTrace:
    """The trace at ``path`` (a JSONL ``format``), parsed where it grew since the last read."""

    def __init__(self, path: Path, format: str, lines: Callable[[Reading], LineParser]) -> None:
        self.path = Path(path)
        self.format = format
        self.reading = Reading(self.path, _no_records)
        """Skipped records, warnings and the trace's id, over every read."""
        self.parser = lines(self.reading)
        self.inode: int | None = None
        self.offset = 0
        """Bytes of the complete lines parsed so far."""
        self.lines = 0
        self.records: list[Imported] = []
        """What the complete lines parsed so far made final (no later line changes them)."""
        self._hash = hashlib.sha256()
        self._checked = b""
        self._source: str | None = None
        self._chain: list[str] = []

    def read(self) -> ParsedTrace:
        """The trace as it is now, parsing only what was appended since the last read.

        Raises ``Rewritten`` when the file is another one, shorter than what was read, or no
        longer ends what was read with the same bytes; and the reader's errors (a
        ``TraceFormatError``) for a malformed line, after which this object is spent.
        """
        with self.path.open("rb") as file:
            inode = os.fstat(file.fileno()).st_ino
            if self.inode is not None and inode != self.inode:
                raise Rewritten(f"{self.path} is another file now")
            file.seek(self.offset - len(self._checked))
            data = file.read()
        if not data.startswith(self._checked):
            short = len(data) < len(self._checked)
            raise Rewritten(f"{self.path} {'shrank' if short else 'was rewritten'}")
        self.inode = inode
        grown = data[len(self._checked) :]
        end = grown.rfind(b"\n") + 1
        complete, partial = grown[:end], grown[end:]
        new = complete.split(b"\n")[:-1]
        for number, record in decode_lines(new, self.reading, self.lines + 1):
            self.records.extend(self.parser.feed(number, record))
        self.lines += len(new)
        self.offset += len(complete)
        self._hash.update(complete)
        self._checked = (self._checked + complete)[-CHECKED_BYTES:]
        held = self._held(partial)
        return ParsedTrace(
            self.path,
            self.format,
            self._digest(partial),
            [*self.records, *held],
            self.reading,
            self._chained(held),
        )

    def _held(self, partial: bytes) -> list[Imported]:
        """The records the parser would still give if the file ended here (a copy ends)."""
        spare = copy.deepcopy(self.parser, {id(self.reading): self.reading})
        held: list[Imported] = []
        if partial.strip() and _whole(partial):
            for number, record in decode_lines([partial], self.reading, self.lines + 1):
                held.extend(spare.feed(number, record))
        held.extend(spare.end())
        return held

    def _chained(self, held: list[Imported]) -> list[str]:
        source = f"{self.format}:{self.reading.session_id or self.path.name}"
        if source != self._source:  # the trace's id was read only now: chain it again
            self._source = source
            self._chain = chain_of(source, self.records)
        else:
            self._chain += chain_on(self._chain[-1], self.records[len(self._chain) - 1 :])
        return [*self._chain, *chain_on(self._chain[-1], held)]

    def _digest(self, partial: bytes) -> str:
        whole = self._hash.copy()
        whole.update(partial)
        return whole.hexdigest()


def _whole(line: bytes) -> bool:
    """Whether a line not yet ended by a newline is whole JSON (a torn one is not)."""
    try:
        msgspec.json.decode(line)
    except msgspec.DecodeError:
        return False
    except RecursionError:
        return True  # whole, and too deep: the reader reports it
    return True


def _no_records(path: Path, reading: Reading) -> Iterator[Imported]:
    return iter(())
