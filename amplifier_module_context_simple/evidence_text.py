"""Text analysis for the evidence ledger: distinctive tokens, informative lines, tool-call arguments.

A *distinctive token* is what a later step is likely to need verbatim: a file path, a dotted name, an
identifier holding a digit, a snake_case or camelCase name, or a number of 3+ digits (4+ characters),
the same definition as the evaluation's evidence metric. Priority lines (errors and tracebacks,
``file:line`` references, test summaries, non-zero exits) are worth keeping even when every token in
them is known.
"""

from __future__ import annotations

import json
import re

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
    """The string values of a message's tool-call arguments (JSON decoded when it parses)."""
    out: list[str] = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        arguments = function.get("arguments") if isinstance(function, dict) else None
        if isinstance(arguments, str):
            try:
                _strings(json.loads(arguments), out)
            except ValueError:
                out.append(arguments)
        else:
            _strings(arguments, out)
    return out


def content_texts(content: object) -> list[str]:
    """The text a model reads in a content value: a string, or the text of its text blocks (a list of
    blocks is what hosts store for pastes and rich tool output; thinking blocks are not read)."""
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)]
    return []


def message_text(message: dict) -> str:
    """The text a model reads in a message: its content and its tool calls' argument values."""
    return "\n".join(content_texts(message.get("content")) + argument_texts(message))
