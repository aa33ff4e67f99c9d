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


class AsUtf8:
    """One output's bytes, fed in pieces, as UTF-8: as they are unless its first two bytes
    are a UTF-16 byte order mark, then its text (a broken code unit as U+FFFD)."""

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
            if len(head) < 2 and not final:
                self._head = head
                return b""
            self._head = b""
            if head[:2] not in UTF16_MARKS:
                self._plain = True
                return head
            self._decode = codecs.getincrementaldecoder("utf-16")(errors="replace").decode
            data = head
        return self._decode(data, final).encode()
