"""`did_you_mean`: the suggestion a person gets for a name runwatch does not know (a
command, a flag, a rule id, a config table or key)."""

from __future__ import annotations

from collections.abc import Iterable


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The choice most like `word`, when one is alike enough to be what was meant."""
    import difflib  # (only a mistake asks: not at every command's start)

    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return found[0] if found else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """` (did you mean X?)`, or nothing when no choice is close."""
    found = closest(word, choices)
    return f" (did you mean {found}?)" if found else ""
