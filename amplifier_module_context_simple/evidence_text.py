"""Text analysis for the evidence ledger: distinctive tokens, informative lines, tool-call arguments.

A *distinctive token* is what a later step is likely to need verbatim: a file path, a dotted name, an
identifier holding a digit, a snake_case or camelCase name, or a number of 3+ digits (4+ characters),
the same definition as the evaluation's evidence metric. Priority lines (errors and tracebacks,
``file:line`` references, test summaries, non-zero exits) are worth keeping even when every token in
them is known.
"""

from __future__ import annotations

import re

from . import calls
from .calls import arguments_value, message_calls

CHARS_PER_TOKEN = 4
MIN_LINE_CHARS = 8  # shorter lines carry too little to pay for their place
PRIORITY_BONUS = 3  # an error, a file:line or a summary line outranks three fresh identifiers

_CANDIDATE = re.compile(r"\\[nrt]|\w[\w./\-]*")
_CAMEL = re.compile(r"[a-z][A-Z]|[A-Z][a-z]+[A-Z]")
_DIGITS3 = re.compile(r"\d{3}")
_LETTER = re.compile(r"[^\W\d_]")
_PRIORITY = re.compile(
    r"Traceback|Error\b|Exception\b|\bFAIL|\bERROR\b|error:|warning:|\bpassed\b|\bfailed\b|"
    r"\bexit (?:code|status)|<returncode>[1-9]|Ran \d+ tests?|^OK\b|\.\w+:\d+|line \d+",
    re.IGNORECASE,
)
# What every priority line holds once lowered, searched first: the full pattern is slow per line (its word
# boundaries, any case), and most lines hold none of this.
_PRIORITY_HINT = re.compile(
    r"traceback|error|exception|fail|warning:|passed|exit (?:code|status)|<returncode>[1-9]|ran \d|^ok|\.\w+:\d|line \d"
)


def _is_distinctive(token: str) -> bool:
    """A path, a dotted name, an identifier holding a digit, a snake/camelCase name or a 3+ digit number."""
    if len(token) < 4:
        return False
    if token.isalpha():
        return not (token.islower() or token.isupper()) and _CAMEL.search(token) is not None
    if _LETTER.search(token) is None:
        return _DIGITS3.search(token) is not None
    if "/" in token:
        return token.count("/") >= 2 or "." in token or "_" in token or any(c.isdigit() for c in token)
    if "." in token or "_" in token or any(c.isdigit() for c in token):
        return True
    return _CAMEL.search(token) is not None


def distinctive_tokens(text: str) -> set[str]:
    """The tokens a later step is likely to need verbatim (4+ characters)."""
    found: set[str] = set()
    for match in _CANDIDATE.finditer(text):
        token = match.group()
        if token[0] == "\\":  # an escaped newline or tab, not part of a name
            continue
        token = token.rstrip(".-/")
        if _is_distinctive(token):
            found.add(token)
    return found


def is_priority(line: str) -> bool:
    """An error or traceback line, a ``file:line`` reference, a test summary or an exit line."""
    return _PRIORITY_HINT.search(line.lower()) is not None and _PRIORITY.search(line) is not None


def _strings(value: object, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, out)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out)


def argument_texts(message: dict) -> list[str]:
    """The string values of a message's tool-call arguments (JSON decoded when it parses), every shape
    and each call once (calls.py)."""
    out: list[str] = []
    for call in message_calls(message):
        _strings(arguments_value(call), out)
    return out


def content_texts(content: object) -> list[str]:
    """The text a model reads in a content value: a string, or the text of its blocks (a list of blocks
    is what hosts store for pastes and rich tool output; thinking and tool-call blocks are not read)."""
    return calls.content_texts(content)


def readable_texts(message: dict) -> list[str]:
    """The text a model reads in a message's content; a tool result stored as a wrapped result object
    reads as its output (calls.unwrap_result)."""
    return calls.message_texts(message)


def message_text(message: dict) -> str:
    """The text a model reads in a message: its content and its tool calls' argument values."""
    return "\n".join(readable_texts(message) + argument_texts(message))
