"""`gpubot demo --interactive`: you type the `/gpu` commands and press the buttons yourself.

Part of the CLI family: it plays on `gpubot demo`'s own environment (`demo.demo_environment`: the sim,
the Slack emulator, the real bot and the live transcript), so both modes always run the same thing. What a
line asks for is decided by a pure parser; the session only carries it out and prints what changed.
"""

from __future__ import annotations

import contextlib
import enum
import re
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from bot.cli import demo

Json = dict[str, Any]

USERS = {name: user for user, name in demo.NAMES.items()}
STEP_SECONDS = 5
"""The clock moves this far between looks at the bot, as the scripted story's `advance_until` does."""
MAX_WAIT_SECONDS = 6 * 3600
"""Longer waits are more likely a typo than a wish, and would keep the prompt away for a while."""
BOT_COMMANDS = frozenset({"run", "status", "release", "extend"})
"""`/gpu` subcommands people type without the `/gpu`; they get a hint rather than a shrug."""
DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s?)?")

BANNER = f"""\
You are alice in #gpu-users: the bot, the cluster and Slack are real, and the clock moves only when you wait.
Try first:
  /gpu {demo.RUN}    ask for a GPU; the pool starts at 0 nodes
  wait 3m       let time pass, twice: a GPU node takes about 6 minutes from zero
  buttons       number the buttons you can press, then `click 1`
Then `/gpu` alone (the run form), `/gpu status`, `home`, `as bob`, `pool`, `help`;
`quit` or Ctrl-D to stop."""

HELP = """\
  /gpu TEXT      type a /gpu command in #gpu-users as the current user (`/gpu help` for the bot's own)
  as NAME        type as alice, bob or admin from now on
  home           open gpubot's App Home tab as the current user and print it
  submit F=V …   submit the form `/gpu` alone opened, with what you type in its fields, e.g.
                 `submit image=nvidia/cuda:12.4.1-base-ubuntu22.04 hours=2 command="sleep 600"`;
                 fields: image, type, gpus, hours, ports, command; the rest keep what the form offers
  buttons        list the buttons the current user can press (threads, DMs, the Home tab), numbered
  click N        press button N from that list
  wait TIME      move the clock on, e.g. `wait 90s`, `wait 5m`, `wait 1h30m` (at most 6h)
  pool           the cluster's node pools, nodes and pods
  help           this list
  quit           stop (Ctrl-D too)"""


# -- what a line asks for ---------------------------------------------------------------------------
@dataclass(frozen=True)
class TypeSlash:
    text: str
    """What follows `/gpu`."""


@dataclass(frozen=True)
class SwitchUser:
    user: str


@dataclass(frozen=True)
class Click:
    number: int
    """1-based, as `buttons` numbers them."""


@dataclass(frozen=True)
class Wait:
    seconds: int


@dataclass(frozen=True)
class Submit:
    typed: tuple[tuple[str, str], ...]
    """(field, value) pairs, by the form's block ids."""


class Bare(enum.Enum):
    """Requests that carry nothing but what they ask for."""

    BUTTONS = "buttons"
    HOME = "home"
    POOL = "pool"
    HELP = "help"
    QUIT = "quit"
    NOTHING = "nothing"
    """A blank line."""


@dataclass(frozen=True)
class Hint:
    """The line asks for nothing this demo does; one line saying what to type instead."""

    text: str


Request = TypeSlash | SwitchUser | Click | Wait | Submit | Bare | Hint


def parse_line(line: str) -> Request:
    """What one line typed at the prompt asks for; anything else becomes a `Hint`."""
    words = line.split()
    if not words:
        return Bare.NOTHING
    word, rest = words[0].lower(), line.strip()[len(words[0]) :].strip()
    if word == "/gpu":
        return TypeSlash(rest)
    if word.startswith("/"):
        return Hint("only /gpu reaches the bot here; try `/gpu help`, or `help` for this demo")
    if word in BOT_COMMANDS:
        return Hint(f"did you mean `/gpu {line.strip()}`?")
    simple = {
        "buttons": Bare.BUTTONS,
        "home": Bare.HOME,
        "pool": Bare.POOL,
        "help": Bare.HELP,
        "?": Bare.HELP,
    }
    simple |= dict.fromkeys(("quit", "exit", "q"), Bare.QUIT)
    if word in simple and not rest:
        return simple[word]
    parsers: dict[str, Callable[[str], Request]] = {
        "as": parse_as,
        "click": parse_click,
        "wait": parse_wait,
        "submit": parse_submit,
    }
    if word in parsers:
        return parsers[word](rest)
    return Hint(f"`{words[0][:30]}` is not something this demo knows; type `help` for what it does")


def parse_submit(rest: str) -> Request:
    try:
        words = shlex.split(rest)
    except ValueError:
        return Hint('a quote is not closed; e.g. `submit command="python train.py"`')
    pairs = [word.partition("=") for word in words]
    wrong = [word for word, (_, eq, _) in zip(words, pairs, strict=True) if not eq]
    if wrong:
        return Hint(f"`submit` takes FIELD=VALUE words, e.g. `submit hours=2`; not {wrong[0][:30]!r}")
    return Submit(tuple((field.lower(), value) for field, _, value in pairs))


def parse_as(rest: str) -> Request:
    user = USERS.get(rest.lower().lstrip("@"))
    return SwitchUser(user) if user else Hint("the users are alice, bob and admin: e.g. `as bob`")


def parse_click(rest: str) -> Request:
    if rest.isdigit() and int(rest) > 0:
        return Click(int(rest))
    return Hint("`click` takes a number from `buttons`, e.g. `click 1`")


def parse_wait(rest: str) -> Request:
    seconds = parse_duration(rest)
    if seconds is None:
        return Hint("`wait` takes a time like 90s, 5m or 1h30m")
    if seconds > MAX_WAIT_SECONDS:
        return Hint(f"wait at most {format_duration(MAX_WAIT_SECONDS)} at a time")
    return Wait(seconds)


def parse_duration(text: str) -> int | None:
    """`90`, `90s`, `5m`, `1h30m` as whole seconds; None for anything else or for zero."""
    found = DURATION.fullmatch(text.strip().lower())
    if not text.strip() or found is None:
        return None
    hours, minutes, seconds = (int(part or 0) for part in found.groups())
    total = hours * 3600 + minutes * 60 + seconds
    return total or None


def format_duration(seconds: int) -> str:
    hours, left = divmod(seconds, 3600)
    minutes, secs = divmod(left, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else "", f"{secs}s" if secs else ""]
    return "".join(parts) or "0s"


def clock_steps(seconds: int) -> list[int]:
    """The clock moves `seconds` in `STEP_SECONDS` steps, the last one shorter if need be."""
    full, part = divmod(seconds, STEP_SECONDS)
    return [STEP_SECONDS] * full + ([part] if part else [])


# -- what a user can press --------------------------------------------------------------------------
@dataclass(frozen=True)
class Clickable:
    channel: str
    message_ts: str
    action_id: str
    label: str
    where: str
    """The message the button sits on, as a person would point at it."""
    confirm: str = ""
    """The title of the dialog Slack asks the user to confirm, if the button has one."""
    value: str = ""
    on_home: bool = False
    """On the user's App Home tab (no channel, no message): pressed there by action id and value."""


def list_clickable(snapshot: Json, user: str) -> list[Clickable]:
    """Buttons on the messages `user` sees (channels, their own DMs and ephemerals), oldest message first."""
    found: list[tuple[float, Clickable]] = []
    for channel in snapshot.get("channels", []):
        if channel.get("is_im") and channel.get("user") != user:
            continue
        name = f"#{channel['name']}"
        shown = [m for m in channel.get("messages", []) if not m.get("deleted")]
        shown += [
            {**e, "ts": e["message_ts"], "only_you": True}
            for e in snapshot.get("ephemerals", [])
            if e["channel"] == channel["id"] and e["user"] == user and not e.get("deleted")
        ]
        for message in shown:
            summary = str(message.get("text", "")).splitlines()[0][:70] if message.get("text") else ""
            where = f'"{summary}" in {name}' + (" (only you see it)" if message.get("only_you") else "")
            for element in buttons_in(message.get("blocks") or []):
                button = button_from(element, channel=channel["id"], message_ts=message["ts"], where=where)
                found.append((float(message["ts"]), button))
    return [button for _, button in sorted(found, key=lambda pair: pair[0])]


def home_clickable(view: Json | None) -> list[Clickable]:
    """Buttons on a published App Home view, top to bottom, each named by the workload it acts on."""
    found = []
    for element in buttons_in((view or {}).get("blocks") or []):
        value = str(element.get("value", ""))
        where = f"the Home tab, for {value.rpartition('/')[2]}"
        found.append(button_from(element, channel="", message_ts="", where=where, value=value, on_home=True))
    return found


def button_from(element: Json, **place: Any) -> Clickable:
    """A button element, pressed at `place` (its message, or the Home tab)."""
    return Clickable(
        action_id=str(element.get("action_id", "")),
        label=str((element.get("text") or {}).get("text", "")),
        confirm=str(((element.get("confirm") or {}).get("title") or {}).get("text", "")),
        **place,
    )


def buttons_in(blocks: list[Json]) -> list[Json]:
    """Button elements of `actions` blocks and section accessories, in display order."""
    elements: list[Any] = []
    for block in blocks:
        if block.get("type") == "actions":
            elements += block.get("elements", [])
        elif block.get("type") == "section" and block.get("accessory"):
            elements.append(block["accessory"])
    return [e for e in elements if isinstance(e, dict) and e.get("type") == "button"]


# -- the session ------------------------------------------------------------------------------------
class Session:
    """One person at the prompt: who they type as, and the buttons they were last shown."""

    def __init__(self, story: demo.Story, out: TextIO) -> None:
        self.story, self.out = story, out
        self.user = USERS["alice"]
        self.listed: list[Clickable] = []

    @property
    def name(self) -> str:
        return demo.NAMES[self.user]

    def run(self, stdin: TextIO) -> None:
        """Read lines until `quit` or end of input; the prompt is echoed when no terminal shows it."""
        read = self.stream_reader(stdin)
        if stdin is sys.stdin and stdin.isatty():
            with contextlib.suppress(ImportError):
                import readline  # noqa: F401  (gives input() line editing and history)
            read = read_terminal
        while (line := read(f"{self.name}> ")) is not None:
            if not self.handle(parse_line(line)):
                return

    def stream_reader(self, stdin: TextIO) -> Callable[[str], str | None]:
        def read(prompt: str) -> str | None:
            line = stdin.readline()
            if line:
                print(f"{prompt}{line.rstrip()}", file=self.out, flush=True)
            return line or None

        return read

    def handle(self, request: Request) -> bool:
        """Carry out one request; False once the person is done."""
        match request:
            case TypeSlash(text):
                opened = {v["id"] for v in self.story.slack.open_views()}
                self.story.type(self.user, text)
                self.settle()
                self.show_new_form(opened)
            case Submit(typed):
                self.submit(dict(typed))
            case SwitchUser(user):
                self.user, self.listed = user, []
                self.story.live.say(f"you now type as {self.name}")
            case Bare.BUTTONS:
                self.show_buttons()
            case Bare.HOME:
                self.show_home()
            case Click(number):
                self.click(number)
            case Wait(seconds):
                self.wait(seconds)
            case Bare.POOL:
                self.show_pool()
            case Bare.HELP:
                self.print(HELP)
            case Hint(text):
                self.print(f"hint: {text}")
            case Bare.QUIT:
                return False
        return True

    def print(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def settle(self) -> None:
        """Show what the bot says back: refresh on each change until the transcript rests for `QUIET`."""
        deadline = time.monotonic() + demo.BOT_WAIT
        self.story.bot.outbox.flush(timeout=demo.BOT_WAIT)
        self.story.live.refresh()
        while time.monotonic() < deadline and self.transcript_changes():
            self.story.live.refresh()

    def transcript_changes(self) -> bool:
        """Whether the emulator's transcript changes within `QUIET` real seconds from now."""
        slack = self.story.slack
        seen = slack.transcript()
        try:
            slack.wait_until(lambda: slack.transcript() != seen, timeout=demo.QUIET)
        except TimeoutError:
            return False
        return True

    def clickable(self) -> list[Clickable]:
        slack = self.story.slack
        return list_clickable(slack.transcript(), self.user) + home_clickable(slack.home(self.user))

    def show_buttons(self) -> None:
        self.listed = self.clickable()
        if not self.listed:
            self.print(f"no buttons for {self.name} yet; they come with the bot's thread after `/gpu run`")
        for number, button in enumerate(self.listed, start=1):
            self.print(f"  {number}. [{button.label}] on {button.where}")

    def click(self, number: int) -> None:
        listed = self.listed or self.clickable()
        if number > len(listed):
            self.print(f"hint: {self.name} has {len(listed)} button(s) to press; `buttons` lists them")
            return
        button = listed[number - 1]
        confirmed = f' and confirms "{button.confirm}"' if button.confirm else ""
        slack = self.story.slack
        try:
            if button.on_home:
                slack.click_home_button(self.user, button.action_id, button.value)
            else:
                slack.click_button(self.user, button.channel, button.message_ts, button.action_id)
        except LookupError:
            self.print("hint: that button is gone now; `buttons` shows the ones there are")
            return
        self.story.live.say(f"{self.name} clicks [{button.label}] on {button.where}{confirmed}")
        self.settle()

    def show_new_form(self, before: set[str]) -> None:
        """Print a form the bot opened for the last command (`/gpu` alone opens the run form)."""
        slack = self.story.slack
        try:
            (view,) = slack.wait_until(
                lambda: [v for v in slack.open_views() if v["id"] not in before], timeout=demo.QUIET * 4
            )
        except (TimeoutError, ValueError):
            return
        self.story.live.say(f"a form opens for {self.name}; `submit FIELD=VALUE …` fills it in and sends it")
        self.print("\n".join(f"  | {line}" for line in slack.view_text(view["id"]).splitlines()))

    def submit(self, typed: dict[str, str]) -> None:
        slack = self.story.slack
        forms = slack.open_views()
        if not forms:
            self.print("hint: no form is open; `/gpu` alone opens the run form")
            return
        view = forms[-1]
        try:
            done = slack.submit_view(self.user, view["id"], typed)
        except LookupError as err:
            self.print(f"hint: {err}")
            return
        filled = ", ".join(f"{field}={value!r}" for field, value in typed.items()) or "nothing changed"
        self.story.live.say(f"{self.name} submits the form ({filled})")
        if done.shown == "errors" and done.ack_payload:
            for field, problem in done.ack_payload.get("errors", {}).items():
                self.print(f"  | {field}: {problem}")
            self.print("hint: the form stays open; `submit` again with the fields fixed")
            return
        self.settle()

    def show_home(self) -> None:
        """Open the Home tab as the current user, wait for the view the bot publishes, and print it."""
        slack = self.story.slack
        before = (slack.home(self.user) or {}).get("hash")
        self.story.live.say(f"{self.name} opens gpubot's Home tab")
        slack.open_home(self.user)
        self.story.bot.outbox.flush(timeout=demo.BOT_WAIT)
        try:
            slack.wait_until(
                lambda: (slack.home(self.user) or {}).get("hash") not in (None, before),
                timeout=demo.BOT_WAIT,
            )
        except TimeoutError:
            self.print("hint: the bot published no Home tab in time; try `home` again")
            return
        self.listed = []
        self.print("\n".join(f"  | {line}" for line in slack.home_text(self.user).splitlines()))

    def wait(self, seconds: int) -> None:
        """Move the clock in steps; after a step that changed what the bot watches, let it answer."""
        self.story.live.say(f"{self.name} waits {format_duration(seconds)}")
        for step in clock_steps(seconds):
            if self.step_clock(step):
                self.settle()
            else:
                self.story.live.refresh()
        self.story.live.say(f"waited {format_duration(seconds)}")

    def step_clock(self, seconds: int) -> bool:
        """Advance the sim clock and run a reaper round (`Story.step_clock`); True if that changed pods,
        events or nodes the bot watches, or the reaper acted."""
        world, namespace = self.story.sim.world, self.story.bot.cluster.namespace
        before = self.story.sim.run(lambda: world.store.resource_version)
        reaped = self.story.step_clock(seconds)

        def changed() -> bool:
            return any(
                change.resource == "nodes"
                or (
                    change.resource in ("pods", "events") and change.obj["metadata"]["namespace"] == namespace
                )
                for change in world.store.changes_after(before)
            )

        return bool(reaped) or self.story.sim.run(changed)

    def show_pool(self) -> None:
        world = self.story.sim.world
        pools = self.story.sim.run(
            lambda: [
                f"{p.name} {p.target_size} node(s) (min {p.min_size}, max {p.max_size}"
                f"{', autoscaling' if p.autoscaling else ''})"
                for p in world.registry.list()
            ]
        )
        pods = self.story.sim.run(lambda: world.store.items("pods"))
        self.story.live.say("pools: " + " · ".join(pools))
        for line in [node_line(node) for node in self.story.sim.nodes()] + [pod_line(p) for p in pods]:
            self.print(f"{' ' * 16}{line}")
        if not pods:
            self.print(f"{' ' * 16}no pods")


def node_line(node: Json) -> str:
    conditions = node.get("status", {}).get("conditions", [])
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    gpus = node.get("status", {}).get("allocatable", {}).get("nvidia.com/gpu", "0")
    return f"node {node['metadata']['name']}  {'Ready' if ready else 'NotReady'}  gpus {gpus}"


def pod_line(pod: Json) -> str:
    meta, status = pod["metadata"], pod.get("status", {})
    phase = "Terminating" if meta.get("deletionTimestamp") else status.get("phase", "Pending")
    node = pod.get("spec", {}).get("nodeName")
    return f"pod  {meta.get('namespace', '')}/{meta['name']}  {phase}" + (f" on {node}" if node else "")


def read_terminal(prompt: str) -> str | None:
    """`input()`, which on a terminal gets line editing and history once `readline` is loaded."""
    try:
        return input(prompt)
    except EOFError:
        print()
        return None


def play_interactive(stdin: TextIO, out: TextIO) -> int:
    """Start the demo's environment and hand the prompt to a person until they quit."""
    note = "the clock moves only when you `wait`"
    with demo.demo_environment(out, clock_note=note) as story:
        print(BANNER, file=out, flush=True)
        try:
            Session(story, out).run(stdin)
        except KeyboardInterrupt:
            print(file=out)
            return 130
    return 0
