"""What a container's command does, read deterministically: the simulated kubelet's one model of a workload.

A command is either an argv (`["sleep", "5"]`) or a shell script (`sh -c "…"`, `bash -c "…"`) of statements
joined by `;`, newlines, `&&` and `||`. The statements understood are:

- `echo [-n] [-e] ARGS…` and `printf FORMAT ARGS…` (`%s %d %i %b %c %x %o %%`; `\\n \\t \\\\` escapes),
  written to stdout, or to stderr after `>&2` / `1>&2`; output redirected to a file (`> file`) goes nowhere.
- `sleep N[smhd]` advances the container's time; `sleep infinity` never returns.
- `exit [N]`, `true`, `false`, `:`; and `set`, `export`, `cd`, `unset`, `umask` as successful no-ops.
- Memory growth: `tail /dev/zero` (also `cat /dev/zero | tail`, `tail < /dev/zero`) grows without bound;
  `stress`/`stress-ng --vm N --vm-bytes SIZE` grows to N * SIZE and holds it (`--timeout T` then exits 0).
- Anything else (`python train.py`) is the workload itself: it runs until the pod is deleted and keeps its
  GPU busy. No variables are expanded (`$HOME` prints as written), no loops, and a pipeline runs only its
  last command, except for the memory-growth pipelines above.

The outcome is a `Program`: timed output chunks and how the container ends. Nothing here knows the clock:
the kubelet plays a program from a container's start time.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

STDOUT, STDERR = "stdout", "stderr"
SHELLS = ("sh", "bash", "ash", "dash")
NO_OPS = ("set", "export", "cd", "unset", "umask")
STRESS = ("stress", "stress-ng")
STRESS_DEFAULT_BYTES = 256 * 1024 * 1024
"""stress's default --vm-bytes (256M)."""


@dataclass(frozen=True)
class Chunk:
    at: float
    """Seconds after the container started."""
    stream: str
    text: str


@dataclass(frozen=True)
class Growth:
    at: float
    """Seconds after start when the memory growth begins."""
    bytes: float
    """How far it grows; `math.inf` for `tail /dev/zero`."""


@dataclass(frozen=True)
class Program:
    chunks: tuple[Chunk, ...] = ()
    ends_at: float | None = None
    """Seconds after start when it exits by itself; None runs until stopped (or out of memory)."""
    exit_code: int = 0
    growth: Growth | None = None
    busy: bool = False
    """Whether it reaches a real workload, which keeps its GPU busy; sleeping and printing do not."""
    ignores_sigterm: bool = False
    """`sleep` as PID 1 has no SIGTERM handler, so deleting it takes the full grace period."""


def read(container: dict[str, Any]) -> Program:
    argv = [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
    if not argv:
        return Program(busy=True)  # the image's own entrypoint: a real workload
    if len(argv) >= 3 and _program(argv[0]) in SHELLS and re.fullmatch(r"-[a-z]*c", argv[1]):
        try:
            statements = parse(argv[2])
        except ValueError:  # unbalanced quotes: sh would refuse it; keep it running, as any command
            return Program(busy=True)
        return _Run().program(statements)
    program = _Run().program([("", [Command(argv, [])])])
    if _program(argv[0]) == "sleep":
        return Program(program.chunks, program.ends_at, program.exit_code, ignores_sigterm=True)
    return program


# -- parsing ---------------------------------------------------------------------------------------


@dataclass
class Command:
    argv: list[str]
    redirects: list[str] = field(default_factory=list)
    """`FD>TARGET` with FD 0, 1, 2 or `&` (both), TARGET a path or `&N`; `0<PATH` for input."""


Pipeline = list[Command]
Statement = tuple[str, Pipeline]
"""The connector before it (`""`, `;`, `&&`, `||`) and the pipeline."""


def parse(script: str) -> list[Statement]:
    statements: list[Statement] = []
    connector, pipeline, command = "", [], Command([])
    for kind, text in tokenize(script):
        if kind == "word":
            command.argv.append(text)
        elif kind == "redirect":
            command.redirects.append(text)
        elif text == "|":
            pipeline.append(command)
            command = Command([])
        else:
            pipeline.append(command)
            statements.append((connector, pipeline))
            connector, pipeline, command = text, [], Command([])
    pipeline.append(command)
    statements.append((connector, pipeline))
    return [(c, p) for c, p in statements if any(cmd.argv or cmd.redirects for cmd in p)]


def tokenize(script: str) -> list[tuple[str, str]]:
    """Words (quotes removed), operators (`;` for `;`, `&` and newlines; `&&`, `||`, `|`) and redirects."""
    return _Lexer(script).tokens()


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text, self.i = text, 0
        self.out: list[tuple[str, str]] = []
        self.word: list[str] = []
        self.quoted = False

    def tokens(self) -> list[tuple[str, str]]:
        while self.i < len(self.text):
            self._step(self.text[self.i])
        self._flush()
        return self.out

    def _step(self, ch: str) -> None:
        if ch == "'":
            end = self.text.index("'", self.i + 1)
            self.word.append(self.text[self.i + 1 : end])
            self.quoted, self.i = True, end + 1
        elif ch == '"':
            self._double_quoted()
        elif ch == "\\":
            following = self.text[self.i + 1 : self.i + 2]
            self.word.append("" if following == "\n" else following)
            self.i += 2
        elif ch in " \t\r":
            self._flush()
            self.i += 1
        elif ch == "#" and not self.word and not self.quoted:
            end = self.text.find("\n", self.i)
            self.i = len(self.text) if end < 0 else end
        elif ch in "<>" or (ch == "&" and self.text.startswith("&>", self.i)):
            self._redirect()
        elif ch in ";\n&|":
            self._operator(ch)
        else:
            self.word.append(ch)
            self.i += 1

    def _double_quoted(self) -> None:
        self.quoted, self.i = True, self.i + 1
        while True:
            if self.i >= len(self.text):
                raise ValueError("unterminated double quote")
            ch = self.text[self.i]
            if ch == '"':
                self.i += 1
                return
            if ch == "\\" and self.text[self.i + 1 : self.i + 2] in ('"', "\\", "$", "`", "\n"):
                following = self.text[self.i + 1]
                self.word.append("" if following == "\n" else following)
                self.i += 2
                continue
            self.word.append(ch)
            self.i += 1

    def _operator(self, ch: str) -> None:
        self._flush()
        pair = self.text[self.i : self.i + 2]
        if pair in ("&&", "||"):
            self.out.append(("op", pair))
            self.i += 2
            return
        self.out.append(("op", "|" if ch == "|" else ";"))
        self.i += 1

    def _redirect(self) -> None:
        fd = ""
        if self.word in (["0"], ["1"], ["2"]) and not self.quoted:
            fd = self.word[0]
            self.word = []
        self._flush()
        match = re.compile(r"&>>?|>>?&?|<").match(self.text, self.i)
        assert match is not None
        op = match.group()
        self.i = match.end()
        target = self._next_word()
        if op.startswith("&"):
            self.out.append(("redirect", f"&>{target}"))
        elif op == "<":
            self.out.append(("redirect", f"0<{target}"))
        else:
            self.out.append(("redirect", f"{fd or '1'}>{'&' if op.endswith('&') else ''}{target}"))

    def _next_word(self) -> str:
        while self.text[self.i : self.i + 1] in (" ", "\t"):
            self.i += 1
        start = len(self.out)
        while self.i < len(self.text) and self.text[self.i] not in " \t\r\n;&|<>":
            self._step(self.text[self.i])
        self._flush()
        words = [text for _, text in self.out[start:]]
        del self.out[start:]
        return "".join(words)

    def _flush(self) -> None:
        if self.word or self.quoted:
            self.out.append(("word", "".join(self.word)))
        self.word, self.quoted = [], False


# -- running ---------------------------------------------------------------------------------------


@dataclass
class _Run:
    """A script's progress: its time, last exit status, output so far, and whether it did real work."""

    t: float = 0.0
    status: int = 0
    chunks: list[Chunk] = field(default_factory=list)
    busy: bool = False
    growth: Growth | None = None

    def program(self, statements: list[Statement]) -> Program:
        for connector, pipeline in statements:
            if (connector == "&&" and self.status != 0) or (connector == "||" and self.status == 0):
                continue
            ended = self.pipeline(pipeline)
            if ended is not None:
                return ended
        return self.end(self.t, self.status)

    def end(self, at: float | None, code: int = 0) -> Program:
        return Program(tuple(self.chunks), at, code, self.growth, self.busy)

    def pipeline(self, pipeline: Pipeline) -> Program | None:
        if _grows_without_bound(pipeline):
            self.grow(math.inf)
            return self.end(None)
        return self.command(pipeline[-1])

    def grow(self, size: float) -> None:
        """Memory grows from now to `size`; only the first growth counts (the container dies of it or not)."""
        self.growth = self.growth or Growth(self.t, size)

    def command(self, command: Command) -> Program | None:
        argv = command.argv
        name = _program(argv[0]) if argv else ""
        if name in ("echo", "printf"):
            self.write(command, echo(argv[1:]) if name == "echo" else printf(argv[1:]))
        elif name == "sleep":
            seconds = duration(argv[1] if len(argv) > 1 else "")
            if seconds is None:
                return self.end(None)
            self.t += seconds
            self.status = 0
        elif name == "exit":
            return self.end(self.t, _exit_status(argv[1:], self.status))
        elif name in STRESS:
            return self.stress(argv[1:])
        elif name in ("true", ":", "", *NO_OPS):
            self.status = 0
        elif name == "false":
            self.status = 1
        else:
            self.busy = True
            return self.end(None)
        return None

    def write(self, command: Command, text: str) -> None:
        stream: str | None = STDOUT
        for redirect in command.redirects:
            if redirect in ("1>&2", "&>&2"):
                stream = STDERR
            elif redirect.startswith(("1>", "&>")) and redirect not in ("1>&1", "&>&1"):
                stream = None
        if stream is not None and text:
            self.chunks.append(Chunk(self.t, stream, text))
        self.status = 0

    def stress(self, args: list[str]) -> Program | None:
        workers = int(_option(args, "--vm", "1") or 1)
        size = _bytes(_option(args, "--vm-bytes", "")) or STRESS_DEFAULT_BYTES
        timeout = duration(_option(args, "--timeout", "") or "infinity")
        if "--vm" in args:
            self.grow(float(workers * size))
        if timeout is None:
            return self.end(None)
        self.t += timeout
        self.status = 0
        return None


def _grows_without_bound(pipeline: Pipeline) -> bool:
    zero_fed = False
    for command in pipeline:
        name = _program(command.argv[0]) if command.argv else ""
        reads_zero = "/dev/zero" in command.argv[1:] or "0</dev/zero" in command.redirects
        if name == "tail" and (reads_zero or zero_fed) and not any(a.startswith("-c") for a in command.argv):
            return True
        zero_fed = name == "cat" and reads_zero
    return False


def _program(arg: str) -> str:
    return arg.rsplit("/", 1)[-1]


def _exit_status(args: list[str], last: int) -> int:
    if not args:
        return last
    return int(args[0]) & 0xFF if args[0].isdigit() else 2


def _option(args: list[str], name: str, default: str) -> str:
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return default


def duration(text: str) -> float | None:
    """`sleep`'s operand in seconds; None is forever (`infinity`); anything unreadable is 0, as an error."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd]?)", text)
    if not match:
        return None if text in ("infinity", "inf") else 0.0
    scale = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]
    return float(match.group(1)) * scale


def _bytes(text: str) -> int:
    """stress's sizes: `250M`, `1G`, `512K`, `100` (bytes), powers of 1024."""
    match = re.fullmatch(r"(\d+)([bBkKmMgG]?)", text)
    if not match:
        return 0
    scale = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[match.group(2).lower()]
    return int(match.group(1)) * scale


# -- echo and printf -------------------------------------------------------------------------------

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "a": "\a", "b": "\b", "f": "\f", "v": "\v", '"': '"'}
_DIRECTIVE = re.compile(r"%(?:%|([-+ 0#]*\d*(?:\.\d+)?)([sdibcxXo]))")


def unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), text)


def echo(args: list[str]) -> str:
    newline, escapes = True, False
    while args and re.fullmatch(r"-[neE]+", args[0]):
        newline = newline and "n" not in args[0]
        escapes = "e" in args[0] or (escapes and "E" not in args[0])
        args = args[1:]
    text = " ".join(args)
    return (unescape(text) if escapes else text) + ("\n" if newline else "")


def printf(args: list[str]) -> str:
    """The shell's printf: the format is reused while arguments remain; missing ones are empty or 0."""
    if not args:
        return ""
    fmt, rest = unescape(args[0]), args[1:]
    out = [_format_once(fmt, rest)]
    used = len(_DIRECTIVE.findall(fmt)) - fmt.count("%%")
    while used > 0 and len(rest) > used:
        rest = rest[used:]
        out.append(_format_once(fmt, rest))
    return "".join(out)


def _format_once(fmt: str, args: list[str]) -> str:
    out, last, index = [], 0, 0
    for match in _DIRECTIVE.finditer(fmt):
        out.append(fmt[last : match.start()])
        last = match.end()
        if match.group(0) == "%%":
            out.append("%")
            continue
        arg = args[index] if index < len(args) else ""
        index += 1
        out.append(_directive(match.group(1), match.group(2), arg))
    out.append(fmt[last:])
    return "".join(out)


def _directive(flags: str, verb: str, arg: str) -> str:
    if verb == "b":
        return unescape(arg)
    if verb == "s":
        return ("%" + flags + "s") % arg
    if verb == "c":
        return arg[:1]
    try:
        number = int(arg or "0", 0)
    except ValueError:
        number = 0
    return ("%" + flags + ("d" if verb == "i" else verb)) % number
