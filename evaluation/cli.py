"""One argument style for every evaluation command: shared options, range checks, one-line errors.

Each command builds a `Parser`, adds the shared options it uses (`--workload PATH`, repeatable;
`--window-fraction`; `--jobs`; `--out`; `--no-tiktoken`) and wraps its body in `guard`, so a bad
option or input prints one line `prog: error: ...` and exits 2 before any work starts.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from .wording import plural
from .workloads import SHIPPED_DIR as SHIPPED
from .workloads import Workload, WorkloadError, load_path, read_messages, session_files

DEFAULT_OUT = Path(__file__).resolve().parent / "out"
TESTS_WORKLOADS = Path(__file__).resolve().parent.parent / "tests" / "data" / "workloads"


class UsageError(Exception):
    """A bad option or input, said in one line; the command exits 2."""


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the docstring's layout and shows every meaningful default."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        flag = action.nargs == 0  # --x / --no-x: the help says what it does
        if flag or "%(default)" in text or action.default in (None, argparse.SUPPRESS, []):
            return text
        default = action.default
        if isinstance(default, list | tuple):
            shown = " ".join(str(d) for d in default)
        elif isinstance(default, Path):
            shown = short_path(default)
        else:
            shown = str(default)
        shown = shown.replace("%", "%%")
        return f"{text} (default: {shown})" if text else f"(default: {shown})"


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and exit 2."""

    def __init__(self, prog: str, doc: str | None = None, **kwargs: Any) -> None:
        if kwargs.get("epilog"):
            kwargs["epilog"] = _fold(kwargs["epilog"])
        description = _fold(doc) if doc else doc
        super().__init__(
            prog=prog, description=description, formatter_class=HelpFormatter, allow_abbrev=False, **kwargs
        )

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


HELP_WIDTH = 100


def _fold(text: str) -> str:
    """A docstring's lines kept as laid out, a line wider than the help's width folded (same indent)."""
    import textwrap

    out = []
    for line in text.splitlines():
        indent = line[: len(line) - len(line.lstrip())] + ("  " if line.lstrip().startswith(("- ", "* ")) else "")
        out += textwrap.wrap(line, HELP_WIDTH, subsequent_indent=indent) if len(line) > HELP_WIDTH else [line]
    return "\n".join(out)


def guard(prog: str, body: Callable[[], int | None]) -> int:
    """Run a command body; a UsageError or WorkloadError becomes one line on stderr and exit 2.

    argparse's own exits (--help, a bad option) become the returned code, so `main(argv)` returns.
    """
    try:
        return body() or 0
    except (UsageError, WorkloadError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1


def _number(text: str, kind: type) -> float:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def fraction(text: str) -> float:
    """A share in (0, 1]."""
    value = _number(text, float)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text} is out of range: must be > 0 and <= 1")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1."""
    value = int(_number(text, int))
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is out of range: must be >= 1")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0."""
    value = int(_number(text, int))
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is out of range: must be >= 0")
    return value


def non_negative_float(text: str) -> float:
    """A finite number >= 0."""
    value = _number(text, float)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is out of range: must be >= 0")
    return value


def add_workload(p: argparse.ArgumentParser, default_note: str) -> None:
    """`--workload PATH`, repeatable (old spelling `--workloads` kept as a hidden alias)."""
    help_text = f"a .jsonl session or a folder of them; repeatable (default: {default_note})"
    p.add_argument("--workload", action="append", metavar="PATH", help=help_text)
    p.add_argument("--workloads", action="append", dest="workload", help=argparse.SUPPRESS)


def add_window_fraction(p: argparse.ArgumentParser, default: float | list[float], what: str) -> None:
    """`--window-fraction X` (several values when the default is a list); `--fraction(s)` hidden aliases."""
    many = isinstance(default, list)
    kw: dict[str, Any] = {"type": fraction, "default": default, "nargs": "+" if many else None}
    p.add_argument("--window-fraction", metavar="X", help=f"{what}; 0 < X <= 1", **kw)
    for alias in ("--fraction", "--fractions"):
        p.add_argument(alias, dest="window_fraction", help=argparse.SUPPRESS, **kw)


def add_jobs(p: argparse.ArgumentParser, help_text: str = "worker processes") -> None:
    """`--jobs N`, N >= 1."""
    p.add_argument("--jobs", type=positive_int, metavar="N", help=help_text)


def add_out(p: argparse.ArgumentParser, default: Path, help_text: str) -> None:
    """`--out PATH`."""
    p.add_argument("--out", type=Path, default=default, metavar="PATH", help=help_text)


def add_no_tiktoken(p: argparse.ArgumentParser) -> None:
    """`--no-tiktoken`: true tokens by the fallback counter."""
    p.add_argument("--no-tiktoken", action="store_true", help="count true tokens with the fallback counter")


def workloads(paths: Sequence[str] | None, default: str | Path) -> list[Workload]:
    """Every named workload (or the default folder's), checked in full before any work; names unique."""
    loads = [w for path in (paths or [default]) for w in load_path(path)]
    seen: dict[str, str] = {}
    for w in loads:
        if w.name in seen:
            raise UsageError(f"two sessions named {w.name!r} ({seen[w.name]} and {w.source}); the report keys by name")
        seen[w.name] = w.source
    return loads


def real_workloads(paths: Sequence[str] | None, all_workloads: bool, split: str | None = None) -> list[Workload]:
    """The shipped sessions, or only the named ones; with ``all_workloads`` the 26 test transcripts
    (after the named ones, if any); with ``split`` one half of the 26 (see `split_half`): the choice
    every harness command makes the same way."""
    if split is not None:
        if paths:
            raise UsageError("--split picks a half of the 26 transcripts of tests/data/workloads; drop --workload")
        return split_half(workloads([str(TESTS_WORKLOADS)], SHIPPED), split)
    loads = workloads(paths, SHIPPED)
    if all_workloads:
        loads = (loads if paths else []) + workloads([str(TESTS_WORKLOADS)], SHIPPED)
    return loads


SPLITS = ("tune", "report")


def split_half(loads: list[Workload], half: str) -> list[Workload]:
    """One half of the sessions, sorted by file name and taken alternately: positions 0, 2, 4, ... are
    "tune" (tune on them), 1, 3, 5, ... "report" (report on them), so each half mixes every source."""
    if half not in SPLITS:
        raise UsageError(f"--split {half!r}: expected one of {', '.join(SPLITS)}")
    ordered = sorted(loads, key=lambda w: Path(w.source).name or w.name)
    return ordered[SPLITS.index(half) :: 2]


def add_split(p: argparse.ArgumentParser) -> None:
    """`--split tune|report`: one half of the 26 test transcripts (tune on one, report the other)."""
    p.add_argument(
        "--split",
        choices=SPLITS,
        help="one half of the 26 transcripts of tests/data/workloads, sorted by file name and taken "
        "alternately: tune = positions 0, 2, 4, ...; report = 1, 3, 5, ... (tune on one, report the other)",
    )


def sessions(paths: Sequence[str] | None, default: str | Path) -> dict[str, list[dict]]:
    """Raw checked messages (every key kept) by file stem, for the commands that drive the module directly."""
    files = [f for path in (paths or [default]) for f in session_files(path)]
    return {f.stem: read_messages(f) for f in files}


def check_out_dir(path: Path) -> None:
    """An output folder that exists or can be made; checked before the work."""
    if path.exists() and not path.is_dir():
        raise UsageError(f"--out {path}: exists and is not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {path}: cannot create the folder ({exc.strerror or exc})") from None


def check_new_file(option: str, path: Path) -> None:
    """A file to be written: its folder must exist and the path must not be a folder."""
    if path.is_dir():
        raise UsageError(f"{option} {path}: is a folder; give a file name")
    if not path.parent.is_dir():
        raise UsageError(f"{option} {path}: folder {path.parent} does not exist")


def unknown(kind: str, name: str, known: Iterable[str]) -> UsageError:
    """`unknown arm 'x' (did you mean 'y'?); known: ...`."""
    known = list(known)
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return UsageError(f"unknown {kind} {name!r}{hint}; known: {', '.join(known) or 'none'}")


def check_module_config(option: str, config: Any) -> None:
    """A configuration for the module that it takes without a single warning; else one UsageError line.

    The module itself runs odd values with a warning (a drop-in accepts what the original accepts);
    a sweep that measured such a configuration would report numbers nobody meant to ask for.
    """
    from amplifier_module_context_simple.config import collected_warnings, parse_config

    if not isinstance(config, dict):
        raise UsageError(f"{option}: expected a JSON object of module keys, got {json.dumps(config)[:40]}")
    with collected_warnings() as warned:  # every warning, even one this process said before
        try:
            parse_config(config)
        except ValueError as exc:
            warned.append(str(exc))
    seen = [text.removeprefix("context-simple: ") for text in warned]
    if seen:
        raise UsageError(f"{option}: {seen[0]}")


def named_configs(texts: Iterable[str], checked: bool = True) -> list[tuple[str, dict[str, Any]]]:
    """``--config NAME=JSON`` options as (name, config) pairs; a malformed one is one UsageError line.
    ``checked``: each config must also run without a warning (:func:`check_module_config`)."""
    named = []
    for text in texts:
        name, sep, body = text.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--config {text!r}: expected NAME=JSON")
        try:
            config = json.loads(body)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--config {name}: bad JSON ({exc.msg})") from None
        if checked:
            check_module_config(f"--config {name}", config)
        named.append((name.strip(), config))
    return named


class StageProgress:
    """Progress on stderr, so a redirected stdout keeps only the results: a transient bar on a terminal,
    else one line when a stage starts and one when it ends. The runner calls total() and advance()."""

    def __init__(self, stage: str) -> None:
        self.stage, self.done, self.count = stage, 0, 0
        self.bar: Any = None
        self.task: Any = None
        self.started = 0.0

    def __enter__(self) -> StageProgress:
        import time

        self.started = time.perf_counter()
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import Progress

            self.bar = Progress(console=Console(stderr=True), transient=True)
            self.bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        import time

        if self.bar is not None:
            self.bar.__exit__(*exc)
        elif self.count and exc[0] is None:
            took = f"{time.perf_counter() - self.started:.1f} s"
            print(f"{self.stage}: {plural(self.done, 'run')} done in {took}", file=sys.stderr)

    def total(self, n: int) -> None:
        self.count = n
        if self.bar is not None:
            self.task = self.bar.add_task(self.stage, total=n)
        else:
            print(f"{self.stage}: {plural(n, 'run')}...", file=sys.stderr, flush=True)

    def advance(self, label: str) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.update(self.task, advance=1, description=label[:50])


def short_path(path: Path) -> str:
    """A path relative to the working folder when it is below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def main_parser() -> Parser:
    """The options of `python -m evaluation` (the main run); the epilog lists the arms."""
    from .arms import ARMS

    epilog = "arms (--arms NAME,NAME):\n" + "\n".join(f"  {a.name:<18} {a.notes}" for a in ARMS)
    epilog += "\n\nsubcommand: python -m evaluation identity --help (byte-identity check)"
    p = Parser("python -m evaluation", "Replay transcripts through every arm and write the report.", epilog=epilog)
    add_workload(p, "the shipped sessions plus the generated scenarios")
    p.add_argument(
        "--all-workloads", action="store_true", help="also replay the 26 transcripts in tests/data/workloads/"
    )
    add_split(p)
    s = p.add_mutually_exclusive_group()
    s.add_argument(
        "--scenario",
        action="store_true",
        default=None,
        help="add the generated scenarios (default: only without --workload)",
    )
    s.add_argument("--no-scenario", dest="scenario", action="store_false", help="leave the generated scenarios out")
    p.add_argument("--seed", type=int, default=7, help="first seed of the scenarios")
    p.add_argument("--arms", metavar="NAMES", help="comma-separated arm names (default: all; listed below)")
    p.add_argument(
        "--engine",
        action="append",
        default=[],
        metavar="NAME",
        help="another installed context module (entry-point name; repeatable)",
    )
    add_window_fraction(p, 0.3, "the module's budget as a share of each session's true size")
    p.add_argument(
        "--max-output-tokens", type=non_negative_int, default=1024, metavar="N", help="the provider's max_output_tokens"
    )
    p.add_argument(
        "--request-overhead",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="tokens of tool schemas etc. per request",
    )
    for name, default in (("input", 1.0), ("cache-write", 1.25), ("cache-read", 0.1)):
        p.add_argument(
            f"--price-{name}",
            type=non_negative_float,
            default=default,
            metavar="P",
            help=f"price per {name.replace('-', ' ')} token",
        )
    add_jobs(p, "worker processes (default: the cores, at most 4)")
    add_no_tiktoken(p)
    p.add_argument("--no-plots", action="store_true", help="write no PNG plots")
    p.add_argument(
        "--no-shaped", action="store_true", help="skip the Amplifier-shaped replays (hook injections, blocks, thinking)"
    )
    p.add_argument(
        "--no-host",
        action="store_true",
        help="skip the host-shaped replay (the real sessions as loop-streaming stores them, side by side)",
    )
    p.add_argument(
        "--no-tight", action="store_true", help="skip the tight-window scenario (runs with the generated scenarios)"
    )
    add_out(p, DEFAULT_OUT, "output folder")
    return p


def check_main(args: argparse.Namespace) -> argparse.Namespace:
    """Check the main run's options: arm and engine names are known, --out is usable."""
    if args.arms is not None:
        args.arms = ",".join(check_arms(args.arms))
    for i, engine in enumerate(args.engine):
        check_engine(engine)
        if engine in args.engine[:i]:
            raise UsageError(f"--engine {engine!r} named twice")
    check_out_dir(args.out)
    return args


def check_arms(text: str) -> list[str]:
    """The arm names of `--arms`, each known."""
    from .arms import ARMS

    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UsageError(f"--arms {text!r}: no arm named")
    known = [a.name for a in ARMS]
    for i, name in enumerate(names):
        if name not in known:
            raise unknown("arm", name, known)
        if name in names[:i]:
            raise UsageError(f"--arms: {name!r} named twice")
    return names


def check_engine(name: str) -> None:
    """An engine that can be loaded: an in-harness one or an installed Amplifier module."""
    from importlib.metadata import entry_points

    from .arms import LOCAL_ENGINES, load_engine

    try:
        load_engine(name)
    except LookupError:
        installed = sorted({ep.name for ep in entry_points(group="amplifier.modules")} | set(LOCAL_ENGINES))
        raise unknown("engine", name, installed) from None
    except Exception as exc:
        raise UsageError(f"engine {name!r} could not be loaded: {type(exc).__name__}: {exc}") from None
