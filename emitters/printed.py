"""A console line as its program printed it (issue 41): what a terminal, a collector or a paste
put around it, taken off once, before any reader of failures looks at it (emitters/failures.py).
"""

from __future__ import annotations

import re

from runwatch.emitters.logparse import tqdm_bar

#: a tqdm bar's last refresh, which a traceback printed to the same terminal or file follows
#: on the same line (stdout and stderr in one: `...| 2/8 [00:00<00:01, 4.74it/s]Traceback`)
_BAR_METER = r"\|\s*[\d.]+[kMGT]?(?:/[\d.]+[kMGT]?|/\?)?\s*\[[^\]]*\]"
BAR_BEFORE = re.compile(_BAR_METER + r"\s*$")
#: the same refresh's counter and times, with what was written after them (a terminal's
#: padding may have split the bar itself off: `| 331/1063 [01:06<03:59,  3.06it/s]Killed`)
_BAR_GLUED = re.compile(_BAR_METER + r"(?=\S)")
#: a paste's markdown around a whole line: a quote's `>`s before it, and emphasis or code
#: marks (`**`, `__`, `` ` ``) on both its ends, no more of them inside (glog's and abseil's
#: `*** SIGABRT received ... ***` is the program's own)
_MARKUP = re.compile(r"^\s*(?:>\s?)+|^\s*(\*\*|__|`)(?=[^\s*_`])(?P<body>.*[^\s*_`])\1\s*$")
#: a markdown code fence glued to a line's text, before it or after it (```` ```Killed ````)
_FENCE = re.compile(r"^\s*`{3,}(?=\S)|(?<=\S)`{3,}\s*$")
#: an inline code span a paste opened on an earlier line and closes at this one's end (one
#: backtick in the line, glued to its last word: "run.sh: line 66: 777016 Killed`"), or opens
#: here and closes later ("`Traceback (most recent call last):"): markdown's span may run over
#: lines, so its two marks stand on different ones
_SPAN_END = re.compile(r"^(?P<body>[^`]*\S)`\s*$|^\s*`(?P<rest>[^`\s][^`]*)$")
#: the time a collector stores before each line (RFC 3339: `kubectl logs --timestamps`,
#: `docker logs -t`, CI logs), or a Rust `tracing` logger writes (text-generation-inference)
_COLLECTOR = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d) +(?=\S)")


def printed(line: str) -> tuple[str, str]:
    """(the line as its program printed it, what a terminal wrote before it on the same line:
    a tqdm bar's last refresh, else ""). What a terminal, a collector or a paste put around a
    line is taken off, in any order and nesting: a bar's refresh -- a bar has no line end, so
    the next thing written (a shell's `Killed`, a traceback's head) starts on the bar's line;
    or only its counter and times, when a terminal's padding split the bar off --, a
    collector's time, and the markdown a paste wraps a line in (a quote's `>`, `**Killed**`,
    a code fence glued to it, a lone code span's mark at its end or start). A line that is
    nothing but such things is its own."""
    text, bar = line, ""
    while True:
        start = text
        if "|" in text:
            if (found := tqdm_bar(text)) is not None:
                bar, text = text[: found[1]], text[found[1] :]
            elif (meter := _BAR_GLUED.search(text)) is not None:
                bar, text = text[: meter.end()], text[meter.end() :]
        if text[:1].isdigit():
            text = _COLLECTOR.sub("", text, count=1)
        if text.lstrip()[:1] in _WRAPS:
            while (m := _MARKUP.match(text)) is not None:
                text = m.group("body") if m.group("body") is not None else text[m.end() :]
        if "```" in text:
            text = _FENCE.sub("", text)
        elif "`" in text and (span := _SPAN_END.match(text)) is not None:
            body = span.group("body")
            text = body if body is not None else span.group("rest")
        if text == start:
            break
    if text == line or not text.strip():
        return line, ""
    return text, bar


_WRAPS = (">", "*", "_", "`")


def as_printed(line: str) -> str | None:
    """The line as its program printed it (`printed`), None when nothing was put around it."""
    text, _ = printed(line)
    return None if text == line else text
