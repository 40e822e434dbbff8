"""Evidence recall: how much of what the agent used in its next step a view still shows.

At each request of a real transcript, the next assistant message (its text and its tool-call arguments)
is what the real agent wrote after seeing the whole history. Its *distinctive tokens* (file paths,
dotted names, identifiers holding a digit, snake_case and camelCase names, numbers of 3+ digits; 4+
characters) that also occur in earlier non-system messages are the evidence it needed.

* **Line recall**: a needed token is kept when at least one whole earlier line holding it (stripped,
  8+ characters) is a line of the view's text. A bag of identifiers does not count; kept lines do.
* **Token recall**: the token occurs anywhere in the view's text.

The metric reads a session the same way whatever shape its host stored it in: a tool call's
arguments in any call shape (`tokens.read_call`), and a tool result that is the JSON of a whole
result object (`{"error": ..., "output": ..., "success": ...}`, as loop-streaming on amplifier-core 2.0.x
stores every result) through to its output and error (`result_text`).

`EvidenceIndex` indexes each distinct text once (by object identity, then by value), so a request
costs about the number of messages in its view plus the text that is new in it, not the whole view.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .tokens import content_text, read_call

MIN_TOKEN = 4
MIN_LINE = 8
_CANDIDATE = re.compile(r"\\[nrt]|[\w][\w./\-]*")
_CAMEL = re.compile(r"[a-z][A-Z]|[A-Z][a-z]+[A-Z]")
_DIGITS3 = re.compile(r"\d{3}")
_LETTER = re.compile(r"[^\W\d_]")


def is_distinctive(tok: str) -> bool:
    """True for a path, dotted name, identifier with a digit, snake/camelCase name or 3+ digit number."""
    if len(tok) < MIN_TOKEN:
        return False
    if tok.isalpha():  # the common case first: a plain word is distinctive only in camelCase
        return not (tok.islower() or tok.isupper()) and _CAMEL.search(tok) is not None
    if _LETTER.search(tok) is None:
        return _DIGITS3.search(tok) is not None
    if "/" in tok:  # a path: several segments, or one with an extension, underscore or digit
        return tok.count("/") >= 2 or "." in tok or "_" in tok or any(c.isdigit() for c in tok)
    if "." in tok or "_" in tok or any(c.isdigit() for c in tok):
        return True  # dotted name, snake_case, identifier holding a digit
    return _CAMEL.search(tok) is not None


def tokens(text: str) -> Iterator[str]:
    """The distinctive tokens of a text, in order (with repeats)."""
    for m in _CANDIDATE.finditer(text):
        tok = m.group()
        if tok[0] == "\\":  # an escaped newline or tab inside the text, not part of a name
            continue
        tok = tok.rstrip(".-/")
        if is_distinctive(tok):
            yield tok


@lru_cache(maxsize=200_000)
def analyse(text: str) -> tuple[tuple[str, frozenset[str]], ...]:
    """Each non-empty stripped line of a text with its distinctive tokens (cached: arms share texts)."""
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        if line:
            out.append((line, frozenset(tokens(line))))
    return tuple(out)


def evidence_lines(text: str) -> Iterator[str]:
    """The lines of a text that can carry evidence: stripped, 8+ characters."""
    for raw in text.splitlines():
        line = raw.strip()
        if len(line) >= MIN_LINE:
            yield line


def arguments_text(arguments: Any) -> str:
    """The readable text of tool-call arguments: the JSON's string values, one per line."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return arguments
    out: list[str] = []
    _strings(arguments, out)
    return "\n".join(out)


def _strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for v in value.values():
            _strings(v, out)
    elif isinstance(value, list):
        for v in value:
            _strings(v, out)
    elif value is not None:
        out.append(str(value))


WRAPPED_KEYS = frozenset({"success", "output", "error", "content"})  # a ToolResult's model_dump()
# A wrapped result's opening (in model_dump()'s order or sorted, as the kernel hands it back), maybe after
# the header a truncated result starts with.
_WRAPPER = re.compile(r'(\[truncated: [^\]\n]*\] )?\{"(success|error|content|output)": ')
_ESCAPE = re.compile(r'\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\(["\\/bfnrt]|u[0-9a-fA-F]{4})')


def result_text(text: str) -> str:
    """A tool result's text, read through a wrapped result object to its output (and error) when it is
    one; any other text as it is. A wrapper cut short by truncation no longer parses: its JSON escapes
    are read as the agent reads them (``\\n`` a line break), so its lines count as they do in a plain
    result cut the same way."""
    if not text.startswith("{") or '"success"' not in text:
        return _cut_wrapper_text(text)
    try:
        obj = json.loads(text)
    except ValueError:
        return _cut_wrapper_text(text)
    if not isinstance(obj, dict) or not {"success", "output"} <= obj.keys() <= WRAPPED_KEYS:
        return text
    error = obj.get("error")
    message = error.get("message") if isinstance(error, dict) else error
    parts = [obj["output"], None if message == obj["output"] else message]  # a failure's output is its message
    return "\n".join(p if isinstance(p, str) else json.dumps(p) for p in parts if p is not None)


def _cut_wrapper_text(text: str) -> str:
    """A wrapped result cut by truncation with its JSON escapes decoded; any other text as it is."""
    if _WRAPPER.match(text) is None or '"output": "' not in text:
        return text
    return _ESCAPE.sub(lambda m: json.loads(f'"{m.group()}"'), text)


def pieces(msg: dict) -> Iterator[tuple[str, Any]]:
    """The raw text-bearing parts of a message: its content ("result" on a tool message, else "content")
    and ("args", arguments) per tool call, whatever the call's shape."""
    yield ("result" if msg.get("role") == "tool" else "content"), msg.get("content")
    for call in msg.get("tool_calls") or []:
        if isinstance(call, dict):
            yield "args", read_call(call)[1]


def piece_text(kind: str, raw: Any) -> str:
    """The text a model reads in one piece."""
    if kind == "args":
        return arguments_text(raw)
    text = content_text(raw)
    return result_text(text) if kind == "result" else text


def message_text(msg: dict) -> str:
    """Everything readable in a message: content and decoded tool-call arguments."""
    return "\n".join(piece_text(k, r) for k, r in pieces(msg))


@dataclass(frozen=True)
class Score:
    """Evidence of one request: tokens needed, kept by line, kept anywhere; was the view complete."""

    needed: int
    line_kept: int
    token_kept: int
    complete: bool
    missed: tuple[str, ...] = ()


class EvidenceIndex:
    """Earlier lines and tokens of one session, and which indexed texts hold each line and token."""

    def __init__(self) -> None:
        self._by_obj: dict[tuple[str, int], int] = {}
        self._alive: list[Any] = []  # holds raw objects so their ids stay unique while indexed
        self._by_text: dict[str, int] = {}
        self._texts: list[str] = []
        self._line_owners: dict[str, set[int]] = defaultdict(set)
        self._token_owners: dict[str, set[int]] = defaultdict(set)
        self._earlier: dict[str, set[str]] = defaultdict(set)
        self._history: set[int] = set()

    def add(self, msg: dict) -> None:
        """Record a message of the transcript (system messages are not earlier evidence)."""
        if msg.get("role") == "system":
            return
        for kind, raw in pieces(msg):
            key = self._key(kind, raw)
            if key in self._history:
                continue
            self._history.add(key)
            for line, toks in analyse(self._texts[key]):
                if len(line) >= MIN_LINE:
                    for tok in toks:
                        self._earlier[tok].add(line)

    def needed(self, answer: dict) -> list[str]:
        """Distinctive tokens of the next assistant message found in earlier non-system lines."""
        return sorted({t for t in tokens(message_text(answer)) if t in self._earlier})

    def score(self, view: Iterable[dict], answer: dict, keep_missed: int = 0) -> Score:
        """How much of `answer`'s needed evidence `view` keeps, by line and anywhere."""
        shown = {self._key(kind, raw) for msg in view for kind, raw in pieces(msg)}
        need = self.needed(answer)
        line_kept = token_kept = 0
        missed: list[str] = []
        for tok in need:
            if self._line_shown(tok, shown):
                line_kept += 1
                token_kept += 1
                continue
            token_kept += self._token_shown(tok, shown)
            if len(missed) < keep_missed:
                missed.append(tok)
        return Score(len(need), line_kept, token_kept, self._history <= shown, tuple(missed))

    def _line_shown(self, tok: str, shown: set[int]) -> bool:
        owners = self._line_owners
        return any(not owners[line].isdisjoint(shown) for line in self._earlier[tok] if line in owners)

    def _token_shown(self, tok: str, shown: set[int]) -> bool:
        if not self._token_owners.get(tok, set()).isdisjoint(shown):
            return True
        return any(tok in self._texts[k] for k in shown)  # a cut token is still the token text

    def _key(self, kind: str, raw: Any) -> int:
        """The index of a piece's text, indexing it the first time it is seen."""
        obj = (kind, id(raw))
        key = self._by_obj.get(obj) if isinstance(raw, str) else None  # only an immutable text by identity
        if key is not None:
            return key
        text = piece_text(kind, raw)
        key = self._by_text.get(text)
        if key is None:
            key = self._index(text)
        if isinstance(raw, str):
            self._by_obj[obj] = key
            self._alive.append(raw)
        return key

    def _index(self, text: str) -> int:
        key = len(self._texts)
        self._texts.append(text)
        self._by_text[text] = key
        for line, toks in analyse(text):
            if len(line) >= MIN_LINE:
                self._line_owners[line].add(key)
            for tok in toks:
                self._token_owners[tok].add(key)
        return key


def pooled(scores: Iterable[Score]) -> dict[str, Any]:
    """Evidence counts and miss rates over the requests from the first incomplete view (compaction) on."""
    after = False
    needed = line_kept = token_kept = requests = 0
    for s in scores:
        after = after or not s.complete
        if not after:
            continue
        requests += 1
        needed, line_kept, token_kept = needed + s.needed, line_kept + s.line_kept, token_kept + s.token_kept
    return {
        "evidence_requests": requests,
        "evidence_needed": needed,
        "evidence_line_kept": line_kept,
        "evidence_token_kept": token_kept,
        "evidence_line_miss": _miss(line_kept, needed, requests),
        "evidence_token_miss": _miss(token_kept, needed, requests),
    }


def _miss(kept: int, needed: int, requests: int) -> float | None:
    """1 - recall over the requests from the first compaction on; None (shown n/a) when there were none
    (the view was always the whole history: nothing to measure, not a miss of 0) or they needed no evidence."""
    return 1 - kept / needed if requests and needed else None


def pool_totals(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Pool the per-run evidence counts of `pooled` over runs (sums, then rates)."""
    rows = list(rows)
    out = {k: sum(r[k] for r in rows) for k in COUNTS}
    out["evidence_line_miss"] = _miss(out["evidence_line_kept"], out["evidence_needed"], out["evidence_requests"])
    out["evidence_token_miss"] = _miss(out["evidence_token_kept"], out["evidence_needed"], out["evidence_requests"])
    if not rows:
        out["evidence_line_miss"] = out["evidence_token_miss"] = None
    return out


COUNTS = ("evidence_requests", "evidence_needed", "evidence_line_kept", "evidence_token_kept")
