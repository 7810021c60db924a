"""`/gpu …` text → a typed command, or a UsageError that says what is wrong and what to type instead.

Pure and total: any text gives an answer and none raises, so a handler can ack with the result at once.
Words are split with shell-like quoting rules, but nothing here (or anywhere in gpubot) runs a shell.
"""

from __future__ import annotations

import difflib
import html
import re
import shlex
from collections.abc import Callable, Sequence
from typing import TypeVar

from bot.core import images, labels, models, quantities, warm

MAX_GPUS_PER_POD = 16
MIN_HOURS, MAX_HOURS = 0.05, 720.0
"""Sanity bounds only (3 minutes … 30 days); the configured lease policy is checked later, in quota."""
MIN_CPU_MILLIS, MAX_CPU_MILLIS = 100, 256_000
MIN_MEMORY, MAX_MEMORY = 64 * 1024**2, 4 * 1024**4
MAX_TEXT_LENGTH = 4000
"""Longer `/gpu` text is refused unread: Slack's advice for a message, and the pod records the text whole
(an annotation clipped at 4,096). Shell-style splitting grows quadratically with a word's length."""
MAX_PORTS = 8
"""Ports one run may name with `--port`; each is a line of the thread's Connect section."""
RESERVED_NAMES = frozenset({"all"})
"""`/gpu release all` must never be ambiguous, so no workload may be named `all`."""

RUN_USAGE = (
    "/gpu run IMAGE [--gpus N] [--type PROFILE] [--hours H] [--cpu C] [--memory M] [--name NAME] "
    "[--port P]… [-- command args…]"
)
USAGES = {
    "run": RUN_USAGE,
    "status": "/gpu status [all]",
    "usage": "/gpu usage [week|month] [@user]",
    "release": "/gpu release [NAME|all]",
    "extend": "/gpu extend [NAME] [HOURS]",
    "logs": "/gpu logs [NAME] [--tail N]",
    "warm": "/gpu warm [POOL min N DAYS HH:MM-HH:MM TIMEZONE | remove N]",
    "doctor": "/gpu doctor",
    "help": "/gpu help [COMMAND]",
}
EXAMPLE_VALUES = {
    "--gpus": "1",
    "--type": "t4",
    "--hours": "4",
    "--cpu": "2",
    "--memory": "8Gi",
    "--name": "my-training",
    "--port": "8888",
}
REPEATABLE = frozenset({"--port"})
"""Options that may be given more than once; their values are kept comma-joined (`--port 8888,6006`)."""
SYNONYMS = {
    **dict.fromkeys(("start", "launch", "submit", "create", "new", "request"), "run"),
    **dict.fromkeys(("ls", "list", "ps", "show", "info", "jobs"), "status"),
    **dict.fromkeys(("stop", "kill", "delete", "rm", "cancel", "terminate", "free", "end"), "release"),
    **dict.fromkeys(("renew", "more", "prolong", "keep"), "extend"),
    **dict.fromkeys(("log", "output", "tail"), "logs"),
    **dict.fromkeys(("spend", "spent", "cost", "costs", "bill", "billing"), "usage"),
}
_BARE_COMMANDS = {name: f"/gpu {name}" for name in USAGES} | {"run": f"/gpu run {images.EXAMPLE_IMAGE}"}
SHORT_OPTIONS = {"-g": "--gpus", "-t": "--type", "-c": "--cpu", "-m": "--memory", "-n": "--name"}
"""Not accepted (one spelling keeps help short), but recognised so the refusal names the long form."""
HELP_FLAGS = frozenset({"-h", "--help", "?"})

_SLACK_LINK = re.compile(r"<([^<>|]*)\|([^<>]*)>|<((?:https?|mailto):[^<>|]*)>")
_CURLY_QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'"})
_HOURS = re.compile(r"([0-9]{1,4}(?:\.[0-9]{1,3})?|\.[0-9]{1,3})h?|([0-9]{1,5})m(?:in)?", re.IGNORECASE)
_COUNT = re.compile(r"[0-9]{1,4}")
_PORT = re.compile(r"[0-9]{1,5}")
_LOOSE_MEMORY = re.compile(r"([0-9]{1,12}(?:\.[0-9]{1,6})?)\s*([kmgtp])(?:i?b)?", re.IGNORECASE)
_PROFILE_NAME = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?")

Options = dict[str, str]


def _unwrap_link(match: re.Match[str]) -> str:
    label, bare = match.group(2), match.group(3)
    if bare is not None:
        return bare.split("://", 1)[-1]
    return label


def normalize_slack_text(text: str) -> str:
    """Undo Slack's formatting: `&amp;`-style escapes, auto-links (`<http://x.io/a|x.io/a>`), smart quotes."""
    unlinked = _SLACK_LINK.sub(_unwrap_link, text)
    return html.unescape(unlinked).translate(_CURLY_QUOTES).strip()


def split_words(text: str) -> list[str] | models.UsageError:
    """Shell-like word splitting (quotes, backslashes) without ever invoking a shell."""
    try:
        return shlex.split(text, comments=False, posix=True)
    except ValueError:
        return models.UsageError(
            "A quote is not closed (or a `\\` ends the line).",
            "/gpu run IMAGE -- python -c \"print('hello')\"",
        )


def parse_gpu_command(text: str) -> models.GpuCommand | models.UsageError:
    """Parse what the user typed after `/gpu`."""
    if len(text) > MAX_TEXT_LENGTH:
        return models.UsageError(
            f"That is {len(text):,} characters; `/gpu` takes at most {MAX_TEXT_LENGTH:,}. "
            "Put a long script in the image, and run it after `--`.",
            "/gpu help run",
        )
    words = split_words(normalize_slack_text(text))
    if isinstance(words, models.UsageError):
        return words
    if not words or words[0].lower() in HELP_FLAGS:
        return models.HelpRequest()
    verb, args = words[0].lower(), words[1:]
    parse = _PARSERS.get(verb)
    if parse is None:
        return _unknown_command(words[0], args)
    return parse(args, text.strip())


def _unknown_command(word: str, args: Sequence[str]) -> models.UsageError:
    shown = word[:40]
    meant = SYNONYMS.get(word.lower())
    if meant is None and ("/" in word or ":" in word):
        return models.UsageError(
            f"`{shown}` is not a command; to start a workload, say `run` first.", f"/gpu run {word}"
        )
    if meant is None:
        close = difflib.get_close_matches(word.lower(), USAGES, n=1)
        meant = close[0] if close else None
    if meant is None:
        return models.UsageError(
            f"`{shown}` is not a `/gpu` command. Commands: {', '.join(USAGES)}.", "/gpu help"
        )
    suggestion = shlex.join(["/gpu", meant, *args]) if args else _BARE_COMMANDS[meant]
    return models.UsageError(f"`{shown}` is not a `/gpu` command; did you mean `{meant}`?", suggestion)


# --- /gpu run --------------------------------------------------------------------------------------------


def _suggest_run(image: str, options: Options, command: Sequence[str]) -> str:
    words = ["/gpu", "run", *([image] if image else [])]  # no image: the profile's own
    for option, value in options.items():
        words += [option, value]
    if command:
        words += ["--", *command]
    return shlex.join(words)


def format_run(request: models.RunRequest) -> str:
    """A RunRequest as the command line that would produce it; suggestions are built from this."""
    options: Options = {}
    if request.gpus != 1:
        options["--gpus"] = str(request.gpus)
    if request.profile:
        options["--type"] = request.profile
    if request.hours is not None:
        options["--hours"] = f"{request.hours:g}"
    if request.cpu_millis is not None:
        options["--cpu"] = quantities.format_cpu(request.cpu_millis)
    if request.memory_bytes is not None:
        options["--memory"] = quantities.format_memory(request.memory_bytes)
    if request.name:
        options["--name"] = request.name
    if request.ports:
        options["--port"] = ",".join(str(port) for port in request.ports)
    return _suggest_run(request.image, options, request.command)


class _RunForm:
    """The pieces of a run command as collected, before values are checked; used to build suggestions."""

    def __init__(self, words: Sequence[str]) -> None:
        split_at = words.index("--") if "--" in words else len(words)
        self.head = list(words[:split_at])
        self.command = tuple(words[split_at + 1 :])
        self.options: Options = {}
        self.positionals: list[str] = []

    @property
    def image_hint(self) -> str:
        if self.positionals:
            return self.positionals[0]
        return "" if "--type" in self.options else images.EXAMPLE_IMAGE

    def suggest(self, **fixes: str | None) -> str:
        options = {opt: val for opt, val in self.options.items() if opt.lstrip("-") not in fixes}
        for option, value in fixes.items():
            if value is not None:
                options[f"--{option}"] = value
        return _suggest_run(self.image_hint, options, self.command)

    def refuse(self, problem: str, **fixes: str | None) -> models.UsageError:
        return models.UsageError(problem, self.suggest(**fixes))


def _unknown_option(form: _RunForm, word: str, following: str | None) -> models.UsageError:
    option, has_value, value = word.partition("=")
    close = (
        [SHORT_OPTIONS[option]]
        if option in SHORT_OPTIONS
        else difflib.get_close_matches(option, EXAMPLE_VALUES, n=1)
    )
    shown = f"`{option[:40]}`"
    if close:
        if not has_value and following and not following.startswith("-"):
            value = following
        fix = {close[0][2:]: value or EXAMPLE_VALUES[close[0]]}
        return form.refuse(f"Unknown option {shown}; did you mean `{close[0]}`?", **fix)
    known = ", ".join(f"`{name}`" for name in EXAMPLE_VALUES)
    return form.refuse(f"Unknown option {shown}. Options are {known}; a command goes after `--`.")


def _collect(form: _RunForm) -> models.UsageError | None:
    """Sort the words before `--` into options and positionals; refuse unknown, repeated or empty options."""
    index = 0
    while index < len(form.head):
        word = form.head[index]
        index += 1
        if not word.startswith("-") or word == "-" or _looks_negative(word):
            form.positionals.append(word)
            continue
        option, has_value, value = word.partition("=")
        if option not in EXAMPLE_VALUES:
            following = form.head[index] if index < len(form.head) else None
            return _unknown_option(form, word, following)
        if option in form.options and option not in REPEATABLE:
            return form.refuse(f"`{option}` is given twice; give it once.")
        if not has_value:
            if index >= len(form.head) or form.head[index].startswith("--"):
                return form.refuse(f"`{option}` needs a value.", **{option[2:]: EXAMPLE_VALUES[option]})
            value = form.head[index]
            index += 1
        if not value:
            return form.refuse(f"`{option}` needs a value.", **{option[2:]: EXAMPLE_VALUES[option]})
        form.options[option] = f"{form.options[option]},{value}" if option in form.options else value
    return None


def _looks_negative(word: str) -> bool:
    return word[1:2].isdigit()


def _check_positionals(form: _RunForm) -> models.UsageError | None:
    if not form.positionals and "--type" not in form.options:  # a profile may name its own image
        return form.refuse("`/gpu run` needs an image to run.")
    if len(form.positionals) > 1:
        extra = form.positionals[1:]
        fixed = _suggest_run(form.positionals[0], form.options, [*extra, *form.command])
        return models.UsageError(
            f"Only one image goes before `--`; put the command after `--` (got {' '.join(extra)[:60]!r}).",
            fixed,
        )
    return None


def parse_hours(text: str) -> float | None:
    """`4`, `1.5`, `2h` or `90m` → hours; None when it is not a duration we accept."""
    match = _HOURS.fullmatch(text)
    if not match:
        return None
    hours, minutes = match.groups()
    return float(hours) if hours is not None else int(minutes) / 60


def _check_gpus(form: _RunForm, text: str) -> int | models.UsageError:
    count = int(text) if _COUNT.fullmatch(text) else None
    if count is None:
        return form.refuse(f"`--gpus` takes a whole number, not {text[:20]!r}.", gpus="1")
    if not 1 <= count <= MAX_GPUS_PER_POD:
        return form.refuse(f"`--gpus` must be between 1 and {MAX_GPUS_PER_POD}, not {count}.", gpus="1")
    return count


def _check_hours(form: _RunForm, text: str) -> float | models.UsageError:
    hours = parse_hours(text)
    if hours is None:
        return form.refuse(
            f"`--hours` takes a number of hours like `4`, `1.5` or `90m`, not {text[:20]!r}.", hours="4"
        )
    if not MIN_HOURS <= hours <= MAX_HOURS:
        return form.refuse(
            f"`--hours` must be between 3 minutes and {MAX_HOURS:g} hours, not {text}.", hours="4"
        )
    return hours


def _check_cpu(form: _RunForm, text: str) -> int | models.UsageError:
    millis = quantities.parse_cpu(text)
    if millis is None:
        return form.refuse(f"`--cpu` takes cores like `2`, `0.5` or `500m`, not {text[:20]!r}.", cpu="2")
    if not MIN_CPU_MILLIS <= millis <= MAX_CPU_MILLIS:
        limits = f"{quantities.format_cpu(MIN_CPU_MILLIS)} and {quantities.format_cpu(MAX_CPU_MILLIS)}"
        return form.refuse(f"`--cpu` must be between {limits} cores, not {text}.", cpu="2")
    return millis


def _check_memory(form: _RunForm, text: str) -> int | models.UsageError:
    size = quantities.parse_memory(text)
    if size is None:
        hint = _memory_hint(text)
        return form.refuse(f"`--memory` takes sizes like `8Gi` or `512Mi`, not {text[:20]!r}.", memory=hint)
    if not MIN_MEMORY <= size <= MAX_MEMORY:
        limits = f"{quantities.format_memory(MIN_MEMORY)} and {quantities.format_memory(MAX_MEMORY)}"
        return form.refuse(f"`--memory` must be between {limits}, not {text}.", memory="8Gi")
    return size


def _memory_hint(text: str) -> str:
    """`16GB`, `16g` or `16gib` → `16Gi`: what people usually mean."""
    loose = _LOOSE_MEMORY.fullmatch(text)
    return f"{loose.group(1)}{loose.group(2).upper()}i" if loose else "8Gi"


def _check_name(form: _RunForm, text: str) -> str | models.UsageError:
    if text in RESERVED_NAMES:
        return form.refuse(
            f"`{text}` is reserved (`/gpu release all`); pick another name.", name="my-training"
        )
    if labels.is_dns1123_label(text):
        return text
    fixed = labels.to_dns1123_fragment(text, max_length=labels.DNS1123_LABEL_MAX) or "my-training"
    return form.refuse(
        f"`--name` must be lowercase letters, digits and `-`, start and end alphanumeric, at most "
        f"{labels.DNS1123_LABEL_MAX} characters; {text[:70]!r} is not.",
        name=fixed,
    )


def _check_profile(form: _RunForm, text: str) -> str | models.UsageError:
    name = text.lower()
    if _PROFILE_NAME.fullmatch(name):
        return name
    return form.refuse(f"`--type` takes a GPU profile name like `t4`, not {text[:30]!r}.", type="t4")


def _check_ports(form: _RunForm, text: str) -> tuple[int, ...] | models.UsageError:
    words = [word.strip() for word in text.split(",")]
    ports: list[int] = []
    for word in words:
        port = int(word) if _PORT.fullmatch(word) else 0
        if not 1 <= port <= 65535:
            return form.refuse(
                f"`--port` takes port numbers from 1 to 65535, not {word[:20]!r}.", port="8888"
            )
        if port not in ports:
            ports.append(port)
    if len(ports) > MAX_PORTS:
        kept = ",".join(str(port) for port in ports[:MAX_PORTS])
        return form.refuse(
            f"A run may name at most {MAX_PORTS} ports with `--port`, not {len(ports)}.", port=kept
        )
    return tuple(ports)


def _check_image(form: _RunForm) -> str | models.UsageError:
    if not form.positionals:
        return ""  # the profile's image, checked once the profile is known
    parsed = images.parse_image(form.positionals[0])
    if isinstance(parsed, models.UsageError):
        fixed_image = parsed.suggestion.removeprefix("/gpu run ")
        return models.UsageError(parsed.problem, _suggest_run(fixed_image, form.options, form.command))
    return parsed.familiar


Value = int | float | str | tuple[int, ...]
_Kind = TypeVar("_Kind", int, float, str, tuple[int, ...])
_Checked = Value | models.UsageError


def _check_values(form: _RunForm) -> dict[str, Value] | models.UsageError:
    checks: dict[str, Callable[[_RunForm, str], _Checked]] = {
        "--gpus": _check_gpus,
        "--type": _check_profile,
        "--hours": _check_hours,
        "--cpu": _check_cpu,
        "--memory": _check_memory,
        "--name": _check_name,
        "--port": _check_ports,
    }
    values: dict[str, Value] = {}
    for option, text in form.options.items():
        checked = checks[option](form, text)
        if isinstance(checked, models.UsageError):
            return checked
        values[option] = checked
    return values


def _parse_run(args: Sequence[str], text: str) -> models.RunRequest | models.UsageError:
    form = _RunForm(args)
    problem = _collect(form) or _check_positionals(form)
    if problem:
        return problem
    if any("\x00" in word for word in form.command):
        without = [word.replace("\x00", "") for word in form.command]
        return models.UsageError(
            "The command after `--` holds a NUL character, which no program can be given.",
            _suggest_run(form.image_hint, form.options, without),
        )
    image = _check_image(form)
    if isinstance(image, models.UsageError):
        return image
    values = _check_values(form)
    if isinstance(values, models.UsageError):
        return values
    return _build_run(image, values, form.command, text)


def _value(values: dict[str, Value], option: str, kind: type[_Kind]) -> _Kind | None:
    value = values.get(option)
    return value if isinstance(value, kind) else None


def _build_run(
    image: str, values: dict[str, Value], command: tuple[str, ...], text: str
) -> models.RunRequest:
    return models.RunRequest(
        image=image,
        gpus=_value(values, "--gpus", int) or 1,
        profile=_value(values, "--type", str),
        hours=_value(values, "--hours", float),
        cpu_millis=_value(values, "--cpu", int),
        memory_bytes=_value(values, "--memory", int),
        name=_value(values, "--name", str),
        ports=_value(values, "--port", tuple) or (),
        command=command,
        text=text,
    )


# --- status, release, extend, help ----------------------------------------------------------------------


def _parse_status(args: Sequence[str], text: str) -> models.StatusRequest | models.UsageError:
    if not args:
        return models.StatusRequest()
    if len(args) == 1 and args[0].lower() == "all":
        return models.StatusRequest(everyone=True)
    return models.UsageError(
        f"`/gpu status` takes nothing, or `all` for everyone's workloads (got {' '.join(args)[:40]!r}).",
        "/gpu status all" if "all" in (a.lower() for a in args) else "/gpu status",
    )


_MENTION = re.compile(r"<@([UW][A-Z0-9_]+)(?:\|[^<>]*)?>")
"""A user as Slack writes a mention: `<@U123>` or `<@U123|alice>` (ids are upper-case letters and digits;
an underscore is let in for test workspaces' readable ids such as `U_ALICE`)."""
_USER_ID = re.compile(r"[UW][A-Z0-9_]{2,}")
PERIODS = ("week", "month")


def _parse_usage(args: Sequence[str], text: str) -> models.UsageRequest | models.UsageError:
    """Words in any order: at most one period and one user. Mentions are read from the raw text, as
    normalising would keep only their label."""
    words = _MENTION.sub(lambda found: f"@{found.group(1)}", text).split()[1:]
    periods = [w.lower() for w in words if w.lower() in PERIODS]
    users = [w.lstrip("@") for w in words if w.startswith("@") and len(w) > 1]
    other = [w for w in words if w.lower() not in PERIODS and not (w.startswith("@") and len(w) > 1)]
    if other or len(periods) > 1 or len(users) > 1:
        got = " ".join(other or words)[:40]
        return models.UsageError(
            f"`/gpu usage` takes `week` or `month`, and one `@user` (got {got!r}).", USAGES["usage"]
        )
    period = periods[0] if periods else "week"
    if not users:
        return models.UsageRequest(period=period)
    if _USER_ID.fullmatch(users[0]):
        return models.UsageRequest(period=period, user_id=users[0])
    return models.UsageRequest(period=period, user_name=users[0].lower())


def _check_workload_name(word: str, usage: str) -> str | models.UsageError:
    if labels.is_dns1123_label(word):
        return word
    return models.UsageError(
        f"{word[:70]!r} is not a workload name; names look like `gpu-u01abc-1a2b3c`. "
        "`/gpu status` lists yours.",
        usage,
    )


def _parse_release(args: Sequence[str], text: str) -> models.ReleaseRequest | models.UsageError:
    if not args:
        return models.ReleaseRequest()
    if len(args) > 1:
        return models.UsageError(
            "`/gpu release` takes one workload name, or `all`.", f"/gpu release {args[0][:70]}"
        )
    if args[0].lower() == "all":
        return models.ReleaseRequest(everything=True)
    name = _check_workload_name(args[0], "/gpu release NAME")
    return name if isinstance(name, models.UsageError) else models.ReleaseRequest(name=name)


def _extend_hours(word: str, name: str | None) -> float | models.UsageError:
    hours = parse_hours(word)
    prefix = f"/gpu extend {name} " if name else "/gpu extend "
    if hours is None and _looks_negative(word):
        return models.UsageError(
            f"An extension adds time: give a positive number of hours, not {word[:20]}.", f"{prefix}4"
        )
    if hours is None:
        return models.UsageError(
            f"{word[:20]!r} is not a number of hours; extend by hours like `2`, `1.5` or `90m`.",
            f"{prefix}4",
        )
    if not MIN_HOURS <= hours <= MAX_HOURS:
        return models.UsageError(f"Extend by 3 minutes to {MAX_HOURS:g} hours, not {word}.", f"{prefix}4")
    return hours


def _parse_extend(args: Sequence[str], text: str) -> models.ExtendRequest | models.UsageError:
    if len(args) > 2:
        return models.UsageError(
            "`/gpu extend` takes a workload name and a number of hours.", USAGES["extend"]
        )
    if len(args) == 1 and (parse_hours(args[0]) is not None or _looks_negative(args[0])):
        args = ["", args[0]]  # hours alone (no name starts with `-`): the caller's only workload
    name = _check_workload_name(args[0], "/gpu extend NAME 4") if args and args[0] else None
    if isinstance(name, models.UsageError):
        return name
    hours = _extend_hours(args[1], name) if len(args) == 2 else None
    if isinstance(hours, models.UsageError):
        return hours
    return models.ExtendRequest(name=name, hours=hours)


MAX_LOG_LINES = 10_000
"""What `--tail` may ask for; past a screenful the answer comes as a file."""


def _parse_logs(args: Sequence[str], text: str) -> models.LogsRequest | models.UsageError:
    words = list(args)
    tail = models.LogsRequest.tail
    if "--tail" in words:
        at = words.index("--tail")
        value = words[at + 1] if at + 1 < len(words) else ""
        if not _COUNT.fullmatch(value) or not 1 <= int(value) <= MAX_LOG_LINES:
            return models.UsageError(
                f"`--tail` takes a number of lines from 1 to {MAX_LOG_LINES:,}, not {value[:20]!r}.",
                "/gpu logs --tail 100",
            )
        tail = int(value)
        del words[at : at + 2]
    if len(words) > 1 or (words and words[0].startswith("-")):
        return models.UsageError("`/gpu logs` takes one workload name and `--tail N`.", USAGES["logs"])
    name = _check_workload_name(words[0], "/gpu logs NAME") if words else None
    if isinstance(name, models.UsageError):
        return name
    return models.LogsRequest(name=name, tail=tail)


_REMOVE_WORDS = frozenset({"remove", "rm", "delete", "del"})


def _parse_warm(args: Sequence[str], text: str) -> models.WarmRequest | models.UsageError:
    if not args:
        return models.WarmRequest()
    if args[0].lower() in _REMOVE_WORDS:
        if len(args) == 2 and _COUNT.fullmatch(args[1]) and int(args[1]) >= 1:
            return models.WarmRequest(remove=int(args[1]))
        return models.UsageError(
            "Say which schedule to remove by its number in `/gpu warm`, e.g. `/gpu warm remove 1`.",
            "/gpu warm",
        )
    words = args[1:] if args[0].lower() == "add" else args
    schedule = warm.parse(" ".join(words))
    return schedule if isinstance(schedule, models.UsageError) else models.WarmRequest(add=schedule)


def _parse_doctor(args: Sequence[str], text: str) -> models.DoctorRequest | models.UsageError:
    if args:
        return models.UsageError(
            f"`/gpu doctor` takes nothing (got {' '.join(args)[:40]!r}); `gpubot doctor --manifest` "
            "checks a manifest from a terminal.",
            "/gpu doctor",
        )
    return models.DoctorRequest()


def _parse_help(args: Sequence[str], text: str) -> models.HelpRequest | models.UsageError:
    if not args:
        return models.HelpRequest()
    topic = args[0].lower().lstrip("/")
    topic = SYNONYMS.get(topic, topic)
    if len(args) == 1 and topic in USAGES:
        return models.HelpRequest(topic=topic)
    return models.UsageError(
        f"No help for {' '.join(args)[:40]!r}; topics are {', '.join(USAGES)}.", "/gpu help"
    )


_PARSERS: dict[str, Callable[[Sequence[str], str], models.GpuCommand | models.UsageError]] = {
    "run": _parse_run,
    "status": _parse_status,
    "usage": _parse_usage,
    "release": _parse_release,
    "extend": _parse_extend,
    "logs": _parse_logs,
    "warm": _parse_warm,
    "doctor": _parse_doctor,
    "help": _parse_help,
}


# --- help -------------------------------------------------------------------------------------------------

HELP: dict[str, str] = {
    "run": (
        "Start a GPU workload. The pool scales up from zero for you; the thread shows each step.\n"
        "  --gpus N       GPUs for the pod (default 1, at most one node's worth)\n"
        "  --type NAME    GPU profile, e.g. `t4` (default: the configured default)\n"
        "  --hours H      lease length, e.g. `4`, `1.5` or `90m`; extend it later\n"
        "  --cpu C        CPU request, e.g. `2` or `500m` (default: the profile's)\n"
        "  --memory M     memory request and limit, e.g. `16Gi` (default: the profile's)\n"
        "  --name NAME    a DNS-style name for the pod (default: generated)\n"
        "  --port P       a port to reach once it runs, e.g. `8888`; repeat it for more\n"
        "  -- CMD ARGS…   what to run, passed as a list, never through a shell\n"
        f"Example: `/gpu run {images.EXAMPLE_IMAGE} -- sleep 3600`"
    ),
    "status": "Your workloads (name, phase, node, age, lease left, GPUs) and the pool; `all`: everyone's.",
    "usage": (
        "What GPUs cost, only to you: GPU-hours and money of finished and running workloads.\n"
        "  week     this week, from Monday 00:00 UTC (the default)\n"
        "  month    this month, from the 1st, UTC\n"
        "  @user    someone else's (admins); admins with no @user see everyone's, by user and by channel\n"
        "Example: `/gpu usage month`"
    ),
    "release": "Delete a workload (NAME), your only one (no name), or all yours (`all`). Admins: any.",
    "extend": (
        "Push a lease's end further: `/gpu extend NAME 2` adds two hours to its end (or to now, if later).\n"
        "  NAME     which workload (default: your only running one)\n"
        "  HOURS    e.g. `2`, `1.5` or `90m` (default: the default lease's length)\n"
        "A lease's whole length is capped; the refusal says how much still fits. Owner or admin only.\n"
        "Example: `/gpu extend my-training 2`"
    ),
    "logs": (
        "Your workload's output, only to you: its last 50 lines, or `--tail N` of them.\n"
        "  NAME     which workload (default: your latest)\n"
        f"  N        up to {MAX_LOG_LINES:,}; more than a screen comes whole as a file in your DMs\n"
        "The owner and admins may read a workload's output.\n"
        "Example: `/gpu logs my-training --tail 200`"
    ),
    "warm": (
        "Pre-warm schedules: keep nodes of a pool up at set hours, so the first run there starts at once.\n"
        "  /gpu warm                      list the schedules, whether each is on now, and their cost\n"
        f"  /gpu warm {warm.EXAMPLE}   add one (admins)\n"
        "  /gpu warm remove N             remove schedule N (admins)\n"
        "DAYS: daily, weekdays, weekends, mon-thu or mon,wed,fri. Outside its hours the pool drains to zero."
    ),
    "doctor": "Pre-flight checks of the pool, the autoscaler and gpubot's access, with fixes (admins).",
    "help": "This help; `/gpu help run` for one command.",
}


def help_text(topic: str | None = None) -> str:
    """Plain text (with `code` spans) for `/gpu help [topic]`; Block Kit rendering happens in the adapter."""
    if topic in HELP:
        return f"`{USAGES[topic]}`\n{HELP[topic]}"
    lines = [f"`{USAGES[name]}`\n    {HELP[name].splitlines()[0]}" for name in USAGES]
    return "\n".join(lines)
