"""Can `context_recall` give back what the view lost? One call per query an agent might write.

At a request, the evidence metric names tokens the agent's next step used whose earlier lines the view
lost (evidence.py). For a sample of them the probe finds the lost line in the stored history (the newest
line holding the token) and asks the module's `context_recall` tool, through its public `execute`, with
each kind of query below. A query *finds* the token when the tool's output, which the tool bounds to
about 2,000 tokens, contains it.

* `exact`: the lost token itself (an agent that remembers the very word).
* `line_cue`: another distinctive word of the same line (the first that holds a letter and neither holds
  the token nor is held by it): the agent remembers a name next to the detail.
* `call_cue`: for a line of a tool result, the call that produced it: the first path in its arguments,
  else their first distinctive word, else the command's first line (cut to 60 characters).
* `three_words`: three consecutive words of the line (the longest such run without the token, quotes
  and brackets around each word taken off), joined by single spaces: a fragment of the line.

A kind that does not apply (a line with no other distinctive word, a line not from a tool result) is not
counted. `recall_rates` pools a run's (or several runs') counts per kind.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .evidence import MIN_LINE, analyse, arguments_text, piece_text, pieces, tokens
from .tokens import read_call

QUERY_KINDS = ("exact", "line_cue", "call_cue", "three_words")
QUERY_LABELS = {  # what each figure's query is, in the reader's words
    "exact": "the exact lost word",
    "line_cue": "another distinctive word of its line",
    "call_cue": "the path or command of the call whose result held it",
    "three_words": "three words of its line",
}
SHORT_LABELS = {"exact": "exact word", "line_cue": "word of the line", "call_cue": "call", "three_words": "3 words"}
COMMAND_CHARS = 60
EDGE_PUNCTUATION = "\"'`,;:()[]{}<>*"


def lost_line(messages: list[dict], token: str) -> tuple[str, dict | None] | None:
    """(the newest stored line holding `token`, the call whose result held it or None), or None."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") == "system":
            continue
        for kind, raw in pieces(message):
            for line, toks in analyse(piece_text(kind, raw)):
                if len(line) >= MIN_LINE and token in toks:
                    call = producing_call(messages, index) if kind != "args" else None
                    return line, call
    return None


def producing_call(messages: list[dict], index: int) -> dict | None:
    """The tool call a tool result answers (the latest earlier call with its id), or None."""
    message = messages[index]
    call_id = message.get("tool_call_id") if message.get("role") == "tool" else None
    if not call_id:
        return None
    for earlier in reversed(messages[:index]):
        for call in earlier.get("tool_calls") or ():
            if isinstance(call, dict) and call.get("id") == call_id:
                return call
    return None


def _apart(cue: str, token: str) -> bool:
    """A cue that neither holds the token nor is held by it (else it is the exact query in disguise)."""
    a, b = cue.lower(), token.lower()
    return a not in b and b not in a


def line_cue(line: str, token: str) -> str | None:
    """The first other distinctive word of the line that holds a letter (a name rather than a line
    number), else the first other one."""
    words = [t for t in tokens(line) if _apart(t, token)]
    named = [t for t in words if any(c.isalpha() for c in t)]
    return (named or words or [None])[0]


def call_cue(call: dict | None, token: str) -> str | None:
    """The first path in the call's arguments, else their first distinctive word, else the command."""
    if not call:
        return None
    args = arguments_text(read_call(call)[1])
    words = [t for t in tokens(args) if _apart(t, token)]
    paths = [t for t in words if "/" in t or "." in t.strip(".")]
    if paths or words:
        return (paths or words)[0]
    first = next((s.strip() for s in args.splitlines() if s.strip()), "")
    command = first[:COMMAND_CHARS].rsplit(" ", 1)[0] if len(first) > COMMAND_CHARS else first
    return command if len(command) >= 4 and _apart(command, token) else None


def three_words(line: str, token: str) -> str | None:
    """The longest run of three consecutive words of the line (quotes and brackets around a word taken
    off), none holding the token, joined by single spaces."""
    words = [w.strip(EDGE_PUNCTUATION) for w in line.split()]
    runs = [
        words[i : i + 3]
        for i in range(len(words) - 2)
        if all(len(w) >= 2 and any(c.isalnum() for c in w) and _apart(w, token) for w in words[i : i + 3])
    ]
    if not runs:
        return None
    return " ".join(max(runs, key=lambda run: sum(len(w) for w in run)))


def queries(messages: list[dict], token: str) -> dict[str, str]:
    """Each kind's query for one lost token (kinds that do not apply left out)."""
    out = {"exact": token}
    found = lost_line(messages, token)
    if found is None:
        return out
    line, call = found
    cues = {
        "line_cue": line_cue(line, token),
        "call_cue": call_cue(call, token),
        "three_words": three_words(line, token),
    }
    out.update({kind: q for kind, q in cues.items() if q})
    return out


async def probe(ctx: Any, missed: Iterable[str]) -> dict[str, list[int]]:
    """{kind: [queries asked, tokens found]} for the missed tokens, asked of this module's recall tool
    over its stored history; other engines (no stored history or no recall text cache) are not asked."""
    messages = getattr(ctx, "messages", None)
    missed = list(missed)
    if not missed or not isinstance(messages, list) or not hasattr(ctx, "_recall_texts"):
        return {}
    from amplifier_module_context_simple.recall import RecallTool

    tool = ctx.__dict__.setdefault("_evaluation_recall", RecallTool(ctx))  # its text cache lives per run
    counts: dict[str, list[int]] = {}
    for token in missed:
        for kind, query in queries(messages, token).items():
            result = await tool.execute({"query": query})
            found = bool(result.success) and token.lower() in str(result.output).lower()
            tally = counts.setdefault(kind, [0, 0])
            tally[0] += 1
            tally[1] += found
    return counts


def recall_rates(runs: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """Per query kind, pooled over the runs' requests: {"queries", "found", "rate" (None if none asked)}."""
    pooled = {kind: [0, 0] for kind in QUERY_KINDS}
    for run in runs:
        if not getattr(run, "available", True):
            continue
        for request in run.requests:
            for kind, (asked, found) in (getattr(request, "recall", None) or {}).items():
                tally = pooled.setdefault(kind, [0, 0])
                tally[0] += asked
                tally[1] += found
    return {k: {"queries": a, "found": f, "rate": f / a if a else None} for k, (a, f) in pooled.items()}
