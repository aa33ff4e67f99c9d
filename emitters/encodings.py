"""An output's bytes as UTF-8, whatever the program or shell that wrote them chose.

Every reader takes UTF-8 (a broken byte becomes U+FFFD). One other encoding reaches users'
log files often enough to matter: Windows PowerShell 5's `>` writes a program's output as
UTF-16 LE after its byte order mark, and read as bytes such a file holds no line any reader
knows. Its mark says what it is, so the text is decoded and written out again as UTF-8 --
`runwatch diagnose` (and every command that reads files) and `runwatch watch` alike.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable

#: UTF-16's byte order marks, little-endian first (PowerShell's)
UTF16_MARKS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
#: UTF-32's: its little-endian mark begins with UTF-16's (`FF FE 00 00`), so two more bytes
#: decide after that one
UTF32_MARKS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)
_UTF32_STARTS = frozenset(mark[:2] for mark in UTF32_MARKS)


class AsUtf8:
    """One output's bytes, fed in pieces, as UTF-8: as they are unless they begin with a
    UTF-16 or UTF-32 byte order mark, then its text (a broken code unit as U+FFFD)."""

    __slots__ = ("_decode", "_head", "_plain")

    def __init__(self) -> None:
        self._head = b""  # the first byte, until a second one decides
        self._plain = False
        self._decode: Callable[[bytes, bool], str] | None = None

    def feed(self, data: bytes, final: bool = False) -> bytes:
        """The UTF-8 of `data`, the next piece of the output (`final`: its end)."""
        if self._plain:
            return data
        if self._decode is None:
            head = self._head + data
            undecided = len(head) < 2 or (head[:2] in _UTF32_STARTS and len(head) < 4)
            if undecided and not final:
                self._head = head
                return b""
            self._head = b""
            if head[:4] in UTF32_MARKS:
                encoding = "utf-32"
            elif head[:2] in UTF16_MARKS:
                encoding = "utf-16"
            else:
                self._plain = True
                return head
            self._decode = codecs.getincrementaldecoder(encoding)(errors="replace").decode
            data = head
        return self._decode(data, final).encode()
