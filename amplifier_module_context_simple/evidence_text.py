"""Text analysis for the evidence ledger: distinctive tokens, informative lines, tool-call arguments.

A *distinctive token* is what a later step is likely to need verbatim: a file path, a dotted name, an
identifier holding a digit, a snake_case or camelCase name, or a number of 3+ digits (4+ characters),
the same definition as the evaluation's evidence metric. Priority lines (errors and tracebacks,
``file:line`` references, test summaries, non-zero exits) are worth keeping even when every token in
them is known. A tool call of several arguments reads as one line, ``name(key=value, ...)``
(:func:`call_lines`), cut around its distinctive tokens when it is long.
"""

from __future__ import annotations

import json
import re

from . import calls
from .calls import arguments_value, call_name, message_calls
from .recall_text import is_recall_call

CHARS_PER_TOKEN = 4
MIN_LINE_CHARS = 8  # shorter lines carry too little to pay for their place
PRIORITY_BONUS = 3  # an error, a file:line or a summary line outranks three fresh identifiers
# A tool call's own line, `name(key=value, ...)`, is cut to this many characters (a typical command
# is about 100): the head (a third) and tail (a sixth) of its arguments, then the words around each
# distinctive token, as many as fit.
CALL_LINE_CHARS = 240
CALL_LINE_CONTEXT = 24  # of a cut call line, the characters shown each side of a distinctive token
# Of a long call, the cut looks at the first CLIP_SCAN_TOKENS candidate tokens of its first
# CLIP_SCAN_CHARS characters (and its tail): bounded work whatever the arguments hold.
CLIP_SCAN_TOKENS = 2_000
CLIP_SCAN_CHARS = 100_000
ELISION = " … "

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
    for call in evidence_calls(message):
        _strings(arguments_value(call), out)
    return out


def evidence_calls(message: dict) -> list:
    """A message's tool calls but ``context_recall``'s: its query words are what the agent asked for,
    not what it did or saw, and its results are copies of other messages."""
    return [call for call in message_calls(message) if not is_recall_call(call)]


def _value_text(value: object) -> str:
    """An argument value as a call line shows it: a string as itself, newlines written ``\\n``; any
    other value as compact JSON."""
    if isinstance(value, str):
        if len(value) > 2 * CLIP_SCAN_CHARS:  # what a cut can show of it: the head it scans and the tail
            value = value[:CLIP_SCAN_CHARS] + ELISION + value[-CALL_LINE_CHARS:]
        return value.replace("\r\n", "\n").replace("\n", "\\n")
    return json.dumps(value, ensure_ascii=False, default=str)


def _arguments_shown(value: object) -> str:
    """The inside of a call line's parentheses: ``key=value, ...`` for an object, else the value."""
    if isinstance(value, dict):
        return ", ".join(f"{key}={_value_text(item)}" for key, item in value.items())
    return "" if value is None else _value_text(value)


def _keys(value: object, out: set[str]) -> None:
    if isinstance(value, dict):
        out.update(map(str, value))
        for item in value.values():
            _keys(item, out)
    elif isinstance(value, list):
        for item in value:
            _keys(item, out)


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters: its head and tail, then the words around each
    distinctive token, in order of first appearance, as many as fit; each gap marked with an elision.
    Pure, and its work is bounded whatever the text's length."""
    if len(text) <= limit:
        return text
    kept = _merged([(0, limit // 3), _around(text, len(text) - limit // 6, len(text))])
    seen: set[str] = set()
    for scanned, match in enumerate(_CANDIDATE.finditer(text, limit // 3, CLIP_SCAN_CHARS)):
        if limit - _shown_length(kept) < 2 * len(ELISION) or scanned >= CLIP_SCAN_TOKENS:
            break
        if match.end() - match.start() > limit:
            continue  # no room for it whatever is cut
        token = match.group().rstrip(".-/")
        if token in seen or token[0] == "\\" or not _is_distinctive(token):
            continue
        seen.add(token)
        trial = _merged([*kept, _around(text, match.start(), match.start() + len(token))])
        if _shown_length(trial) <= limit:
            kept = trial
    return ELISION.join(text[start:end].strip() for start, end in kept)


def _around(text: str, start: int, end: int) -> tuple[int, int]:
    """The span of ``CALL_LINE_CONTEXT`` characters each side of ``text[start:end]``, cut to whole words."""
    left, right = max(0, start - CALL_LINE_CONTEXT), min(len(text), end + CALL_LINE_CONTEXT)
    space = text.find(" ", left, start)
    left = left if space == -1 or left == 0 else space + 1
    space = text.rfind(" ", end, right)
    right = right if space == -1 or right == len(text) else space
    return left, right


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Spans sorted and joined where they overlap or the gap is no longer than its elision."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1] + len(ELISION):
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _shown_length(spans: list[tuple[int, int]]) -> int:
    return sum(end - start for start, end in spans) + (len(spans) - 1) * len(ELISION)


def call_lines(message: dict) -> list[tuple[str, frozenset[str]]]:
    """The line of each tool call of a message with several arguments, ``name(key=value, ...)`` (cut
    by :func:`clip` past ``CALL_LINE_CHARS``), with the distinctive tokens of the argument values it
    shows (the tool's name and the keys are no evidence a view could lack). A call with one string
    argument (a command, a path, a query) has none: that argument's lines read as themselves. Every
    call shape reads the same (calls.py)."""
    out = []
    for call in evidence_calls(message):
        value = arguments_value(call)
        if _reads_as_itself(value):
            continue
        name = call_name(call) or "tool"
        inside = clip(_arguments_shown(value), max(CALL_LINE_CHARS // 2, CALL_LINE_CHARS - len(name) - 2))
        names = {name}
        _keys(value, names)
        tokens = distinctive_tokens(inside)
        if names_in_line := distinctive_tokens(" ".join(names)) & tokens:
            values: list[str] = []
            _strings(value, values)
            tokens -= {token for token in names_in_line if not any(token in text for text in values)}
        out.append((f"{name}({inside})", frozenset(tokens)))
    return out


def _reads_as_itself(value: object) -> bool:
    """No arguments, a string, or an object of one string value: its lines need no call line."""
    if isinstance(value, dict) and len(value) == 1:
        value = next(iter(value.values()))
    return value is None or isinstance(value, str) or value == {}


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
