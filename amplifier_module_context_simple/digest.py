"""Tool-result digests: the few lines of a result that carry information, kept verbatim in its place.

A digest is a pure function of the result's text and a tuple of kept line indices, so a decision
recorded as ``(kind, indices)`` re-renders the same bytes on every later request and after a resume.
Which lines to keep is decided once, at the compaction boundary: error and traceback lines,
``file:line`` references, test summaries and exit lines first, then lines holding distinctive tokens
(paths, dotted names, snake_case / camelCase identifiers, identifiers with digits, long numbers) that
appear nowhere else in the view, within a small per-result token budget.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

DIGEST = "digest"
SUPERSEDED = "superseded"
DEDUPED = "deduped"
NARRATION = "narration"  # an assistant message's own text, shortened (its tool calls stay whole)
KINDS = (DIGEST, SUPERSEDED, DEDUPED, NARRATION)

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


def _line_cost(line: str) -> int:
    return len(line) // CHARS_PER_TOKEN + 1


def select_lines(text: str, elsewhere: Iterable[str] | set[str], budget_tokens: int) -> tuple[int, ...]:
    """Indices of the lines to keep: informative lines first, within ``budget_tokens``.

    ``elsewhere`` holds the tokens the rest of the view already shows; a line that only repeats them
    earns nothing. Greedy and deterministic (ties go to the earlier line).
    """
    known = elsewhere if isinstance(elsewhere, set) else set(elsewhere)
    lines = text.split("\n")
    max_chars = budget_tokens * CHARS_PER_TOKEN
    candidates = []
    for index, line in enumerate(lines):
        stripped = line.strip()
        if len(stripped) < MIN_LINE_CHARS or len(stripped) > max_chars:
            continue
        tokens = distinctive_tokens(stripped) - known
        bonus = PRIORITY_BONUS if _PRIORITY.search(stripped) else 0
        if tokens or bonus:
            candidates.append((index, stripped, tokens, bonus))
    candidates.sort(key=lambda c: (-(len(c[2]) + c[3]), c[0]))  # one pass: linear in the result's lines
    chosen: list[int] = []
    covered: set[str] = set()
    seen_lines: set[str] = set()
    left = budget_tokens
    for index, stripped, tokens, bonus in candidates:
        cost = _line_cost(stripped)
        if cost > left or stripped in seen_lines or not (tokens - covered or bonus):
            continue
        chosen.append(index)
        covered |= tokens
        seen_lines.add(stripped)
        left -= cost
    return tuple(sorted(chosen))


def repeated_line_indices(text: str, later_lines: set[str]) -> tuple[int, ...]:
    """Indices of the lines of ``text`` to keep when lines shown verbatim in a later result go."""
    return tuple(
        i
        for i, line in enumerate(text.split("\n"))
        if len(line.strip()) < MIN_LINE_CHARS or line.strip() not in later_lines
    )


def informative_lines(text: str) -> set[str]:
    """The stripped lines of ``text`` long enough to count as evidence."""
    return {s for line in text.split("\n") if len(s := line.strip()) >= MIN_LINE_CHARS}


def render(text: str, kind: str, indices: tuple[int, ...], original_tokens: int, recovery: str) -> str:
    """The digest text: a header saying what happened, then the kept lines verbatim, in order."""
    lines = text.split("\n")
    kept = [lines[i] for i in indices if 0 <= i < len(lines)]
    if kind == SUPERSEDED:
        header = f"[superseded: ~{original_tokens:,} tokens - the same call was made again later; see its result]"
    elif kind == NARRATION:
        header = f"[earlier reasoning shortened: {len(kept)} of {len(lines)} lines kept]"
    elif kind == DEDUPED:
        omitted = len(lines) - len(kept)
        header = f"[{omitted:,} lines omitted that a later result repeats verbatim - {recovery}]"
    else:
        header = f"[digest: ~{original_tokens:,} tokens, {len(kept)} of {len(lines)} lines kept - {recovery}]"
    return "\n".join([header, *kept])


def is_priority(line: str) -> bool:
    """An error or traceback line, a ``file:line`` reference, a test summary or an exit line."""
    return _PRIORITY.search(line) is not None


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


def message_text(message: dict) -> str:
    """The text a model reads in a message: its content and its tool calls' argument values."""
    content = message.get("content")
    if isinstance(content, str):
        parts = [content]
    elif isinstance(content, list):
        parts = [b.get("text", "") for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)]
    else:
        parts = []
    return "\n".join(parts + argument_texts(message))
