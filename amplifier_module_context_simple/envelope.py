"""The ``<system-reminder source="...">`` envelopes this module writes, and the text it puts inside.

The evidence ledger, the last-user replay and the summary copy text the module does not control (tool
output, the assistant's notes, the user's words, a model's summary) into a user-role envelope. A
copied ``</system-reminder>`` would end the envelope early, and what follows would reach the model as
the user's own words; a copied opener would forge one of our envelopes. So every body placed in an
envelope has its envelope tags neutralized: the tag's ``<`` becomes ``&lt;``, in any case, with any
spacing, ``_`` or ``-`` between the words, invisible format characters, or a fullwidth bracket. The
line stays readable and the rewrite is a pure function of the text (the same bytes on every request).
"""

from __future__ import annotations

import re

# A separator a reader may not see or may read past: whitespace, format characters (zero-width space,
# joiners, direction marks, word joiner, byte order mark, soft hyphen). Possessive: a long run of them
# is read once, never backtracked into (the text is untrusted).
_GAP = r"[\s\u00ad\u200b-\u200f\u2060\ufeff]*+"
# `<` or a bracket that reads as one (fullwidth, small), an optional `/`, "system", an optional `-` or
# `_`, "reminder"; any case, gaps anywhere between.
ENVELOPE_TAG = re.compile(
    rf"[<\uff1c\ufe64]{_GAP}(?:[/\uff0f]{_GAP})?system{_GAP}(?:[-_]{_GAP})?reminder",
    re.IGNORECASE,
)
ESCAPED_BRACKET = "&lt;"


def _escaped(match: re.Match[str]) -> str:
    return ESCAPED_BRACKET + match.group()[1:]


def neutralize(text: str) -> str:
    """``text`` with every envelope tag's opening bracket escaped (idempotent: an escaped tag is no tag)."""
    if "<" not in text and "\uff1c" not in text and "\ufe64" not in text:
        return text  # no bracket, no tag: most lines, checked in C
    return ENVELOPE_TAG.sub(_escaped, text)


# The start of a tag cut by the end of a line: in a ledger, the next kept line could complete it.
_OPENING_AT_END = re.compile(
    rf"[<\uff1c\ufe64]{_GAP}(?:[/\uff0f]{_GAP})?(?:system{_GAP}(?:[-_]{_GAP})?)?\Z",
    re.IGNORECASE,
)


def neutralize_line(line: str) -> str:
    """One line of a body joined by newlines (the ledger's): :func:`neutralize`, and the bracket of a
    tag's start at its very end escaped too, so no two lines joined can form a tag."""
    if "<" not in line and "\uff1c" not in line and "\ufe64" not in line:
        return line
    return _OPENING_AT_END.sub(_escaped, neutralize(line))


def wrap(source: str, body: str) -> str:
    """``body`` in a reminder envelope naming ``source``; nothing in the body can end or forge one."""
    return f'<system-reminder source="{source}">\n{neutralize(body)}\n</system-reminder>'
