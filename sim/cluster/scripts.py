"""What a container's command does, read deterministically: the simulated kubelet's one model of a workload.

A command is either an argv (`["sleep", "5"]`) or a shell script (`sh -c "…"`, `bash -c "…"`) of statements
joined by `;`, newlines, `&&` and `||`. The statements understood are:

- `echo [-n] [-e] ARGS…` and `printf FORMAT ARGS…` (`%s %d %i %b %c %x %o %%`; `\\n \\t \\\\` escapes),
  written to stdout, or to stderr after `>&2` / `1>&2`; output redirected to a file (`> file`) goes nowhere.
- `seq [-f FORMAT] [-s SEP] [-w] [FIRST [INCR]] LAST`, integers only, for output of any length in a short
  command (at most `MAX_SEQ_NUMBERS` numbers).
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
from datetime import datetime
from typing import Any

from sim.cluster import entrypoints, shell

STDOUT, STDERR = "stdout", "stderr"
SHELLS = ("sh", "bash", "ash", "dash")
NO_OPS = ("set", "export", "cd", "unset", "umask")
STRESS = ("stress", "stress-ng")
STRESS_DEFAULT_BYTES = 256 * 1024 * 1024
"""stress's default --vm-bytes (256M)."""
MAX_SEQ_NUMBERS = 100_000
"""Where `seq` stops short: the sim keeps every line in memory (a real node rotates a container's log at
10 MiB, so even there the oldest lines of a long run are gone)."""


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


def read(
    container: dict[str, Any], *, hostname: str = "", seed: str = "", started: datetime | None = None
) -> Program:
    """`hostname` (the pod's name), `seed` (its uid) and `started` only shape what an image's own
    entrypoint prints (`entrypoints`); how a program runs and ends never depends on them."""
    argv = [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
    if not argv and entrypoints.is_jupyter(str(container.get("image", ""))):
        lines = entrypoints.jupyter_log(hostname=hostname, seed=seed, started=started)
        return Program(tuple(Chunk(at, STDERR, f"{text}\n") for at, text in lines))
    if not argv:
        return Program(busy=True)  # the image's own entrypoint: a real workload
    if len(argv) >= 3 and _program(argv[0]) in SHELLS and re.fullmatch(r"-[a-z]*c", argv[1]):
        try:
            statements = shell.parse(argv[2])
        except ValueError:  # unbalanced quotes: sh would refuse it; keep it running, as any command
            return Program(busy=True)
        return _Run().program(statements)
    program = _Run().program([("", [shell.Command(argv, [])])])
    if _program(argv[0]) == "sleep":
        return Program(program.chunks, program.ends_at, program.exit_code, ignores_sigterm=True)
    return program


# -- running ---------------------------------------------------------------------------------------


@dataclass
class _Run:
    """A script's progress: its time, last exit status, output so far, and whether it did real work."""

    t: float = 0.0
    status: int = 0
    chunks: list[Chunk] = field(default_factory=list)
    busy: bool = False
    growth: Growth | None = None

    def program(self, statements: list[shell.Statement]) -> Program:
        for connector, pipeline in statements:
            if (connector == "&&" and self.status != 0) or (connector == "||" and self.status == 0):
                continue
            ended = self.pipeline(pipeline)
            if ended is not None:
                return ended
        return self.end(self.t, self.status)

    def end(self, at: float | None, code: int = 0) -> Program:
        return Program(tuple(self.chunks), at, code, self.growth, self.busy)

    def pipeline(self, pipeline: shell.Pipeline) -> Program | None:
        if _grows_without_bound(pipeline):
            self.grow(math.inf)
            return self.end(None)
        return self.command(pipeline[-1])

    def grow(self, size: float) -> None:
        """Memory grows from now to `size`; only the first growth counts (the container dies of it or not)."""
        self.growth = self.growth or Growth(self.t, size)

    def command(self, command: shell.Command) -> Program | None:
        argv = command.argv
        name = _program(argv[0]) if argv else ""
        if name in ("echo", "printf"):
            self.write(command, echo(argv[1:]) if name == "echo" else printf(argv[1:]))
        elif name == "seq":
            try:
                self.write(command, seq(argv[1:]))
            except ValueError as err:  # seq's own complaint, on stderr whatever the redirects
                self.chunks.append(Chunk(self.t, STDERR, f"seq: {err}\n"))
                self.status = 1
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

    def write(self, command: shell.Command, text: str) -> None:
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


def _grows_without_bound(pipeline: shell.Pipeline) -> bool:
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


_SEQ_FORMAT = re.compile(r"%[-+ 0#]*\d*(?:\.\d+)?[eEfFgG]")


def seq(args: list[str]) -> str:
    """GNU seq over integers: FIRST (1) to LAST by INCR (1); `-f` a printf float format such as
    `'step %g'`, `-s` the separator (a newline still ends the output), `-w` pads with zeros to one width.
    ValueError carries seq's message for what it refuses."""
    fmt, sep, equal, operands = "", "\n", False, []
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg[:1].isdigit() or arg[:1] == "+" or (arg.startswith("-") and arg[1:2].isdigit()):
            operands.append(arg)
        elif arg in ("-f", "--format", "-s", "--separator"):
            if not rest:
                raise ValueError(f"option requires an argument -- '{arg.lstrip('-')[0]}'")
            value = rest.pop(0)
            fmt, sep = (value, sep) if arg in ("-f", "--format") else (fmt, value)
        elif arg.startswith(("-f", "--format=")):
            fmt = arg.removeprefix("--format=") if arg.startswith("--") else arg[2:]
        elif arg.startswith(("-s", "--separator=")):
            sep = arg.removeprefix("--separator=") if arg.startswith("--") else arg[2:]
        elif arg in ("-w", "--equal-width"):
            equal = True
        elif arg.startswith("-") and arg != "-":
            raise ValueError(f"invalid option -- '{arg[1:2]}'")
        else:
            operands.append(arg)
    numbers = _seq_numbers(operands)
    if fmt and len(_SEQ_FORMAT.findall(fmt.replace("%%", ""))) != 1:
        raise ValueError(
            f"format '{fmt}' has no % directive" if "%" not in fmt else f"invalid format '{fmt}'"
        )
    width = max((len(str(n)) for n in numbers), default=0) if equal else 0
    shown = (fmt % float(n) if fmt else str(n).zfill(width) for n in numbers)
    return sep.join(shown) + ("\n" if numbers else "")


def _seq_numbers(operands: list[str]) -> range:
    if not operands:
        raise ValueError("missing operand")
    if len(operands) > 3:
        raise ValueError(f"extra operand '{operands[3]}'")
    values: list[int] = []
    for operand in operands:
        if not re.fullmatch(r"[+-]?\d+", operand):
            raise ValueError(f"invalid floating point argument: '{operand}' (the sim reads integers only)")
        values.append(int(operand))
    first, incr, last = (1, 1, values[0]) if len(values) == 1 else (values[0], 1, values[-1])
    if len(values) == 3:
        incr = values[1]
    if incr == 0:
        raise ValueError(f"invalid Zero increment value: '{operands[1]}'")
    numbers = range(first, last + (1 if incr > 0 else -1), incr)
    return numbers[:MAX_SEQ_NUMBERS]


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
