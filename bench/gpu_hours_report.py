"""P6's figures, notes, table and plot, from the three arms' outcomes of one run."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

from bench import figures, trace
from bench.gpu_hours_replay import Outcome
from bot import settings

Json = dict[str, Any]
NO_REAPER, CULLER, GPUBOT = "no reaper", "time-only culler", "gpubot"
ARMS = (NO_REAPER, CULLER, GPUBOT)
GOAL_RATIO = figures.Goal("<=", 1.15, "")
NO_WRONGFUL = figures.Goal("<=", 0, "pods")


def build(day: trace.Trace, found: dict[str, Outcome], policy: settings.ReaperSettings) -> figures.Report:
    base, culler, bot = (found[arm] for arm in ARMS)
    rows = []
    for name in (CULLER, GPUBOT):
        arm = found[name]
        rows += [
            _row(
                f"{name}: billed ÷ busy GPU-hours",
                arm.ratio,
                "",
                base.ratio,
                GOAL_RATIO if arm is bot else None,
            ),
            _row(f"{name}: billed GPU node-hours", arm.billed_node_hours, "h", base.billed_node_hours),
            _row(f"{name}: busy GPU-hours", arm.busy_gpu_hours, "h", base.busy_gpu_hours),
            _row(
                f"{name}: node-hours saved vs no reaper", base.billed_node_hours - arm.billed_node_hours, "h"
            ),
            _row(f"{name}: work lost (GPU-hours not done)", lost_hours(arm), "h"),
            _row(f"{name}: time to Running p50", arm.percentile(0.5), "min", base.percentile(0.5)),
            _row(f"{name}: time to Running p95", arm.percentile(0.95), "min", base.percentile(0.95)),
            _row(
                f"{name}: wrongful reaps",
                len(arm.wrongful),
                "pods",
                None,
                NO_WRONGFUL if arm is bot else None,
            ),
        ]
    rows.append(
        figures.Figure(
            "P6",
            "gpubot: billed ÷ busy vs the time-only culler",
            round(bot.ratio, 3),
            "",
            round(culler.ratio, 3),
            CULLER,
        )
    )
    return figures.Report(
        measure="P6",
        title="GPU-hours over a replayed 24-hour trace",
        figures=rows,
        series={f"pool size per minute: {name}": per_minute(o, day) for name, o in found.items()}
        | {f"time to Running (min): {name}": o.time_to_running_minutes for name, o in found.items()},
        notes=notes(day, found, policy),
    )


def _row(
    name: str, value: float, unit: str, baseline: float | None = None, goal: figures.Goal | None = None
) -> figures.Figure:
    shown = None if baseline is None or math.isnan(baseline) else round(baseline, 3)
    return figures.Figure(
        "P6", name, round(value, 3), unit, shown, NO_REAPER if shown is not None else "", goal
    )


def lost_hours(outcome: Outcome) -> float:
    """The GPU work the trace still had for the pods the arm deleted while their owners wanted them."""
    return sum(float(w["lost_busy_seconds"]) for w in outcome.wrongful) / 3600


def notes(day: trace.Trace, found: dict[str, Outcome], policy: settings.ReaperSettings) -> list[str]:
    kinds = {kind: sum(1 for u in day.users if u.kind == kind) for kind in trace.KINDS}
    bot, culler = found[GPUBOT], found[CULLER]
    states = bot.state_hours
    floor = (bot.busy_gpu_hours + states["starting"] + states["idle, wanted"]) / bot.busy_gpu_hours
    defaults = policy == settings.ReaperSettings()
    lines = [
        f"Trace (seed {day.seed}, saved as JSON beside this file): {len(day.users)} users "
        f"({kinds[trace.BATCH]} batch, {kinds[trace.INTERACTIVE]} interactive, {kinds[trace.FORGETFUL]} who "
        f"never release), {len(day.jobs)} runs, {day.demanded_busy_hours():.1f} GPU-hours of work; "
        f"a pool of 1-GPU nodes from 0 to {day.pool_max_nodes}, grown and shrunk by the sim's Cluster "
        "Autoscaler (10 min scale-down) in every arm.",
        "Billed: each node from its VM's start to its deletion, cut where the replay ends (midnight, but "
        "for a quick run; the no reaper arm's forgotten pods live to the end). Busy: the sim's DCGM "
        "utilisation at or above 5 % at each 15 s scrape. Wrongful: deleted by the arm while its owner "
        "still wanted it.",
        f"gpubot is the real bot in-process with {'its default' if defaults else 'a NON-DEFAULT'} reaper "
        f"policy ({policy.default_lease_hours:g} h lease, reminder {policy.reminder_minutes:g} and "
        f"{policy.nudge_minutes:g} min before its end, {policy.grace_minutes:g} min grace; idle after "
        f"{policy.idle_window_minutes:g} min under {policy.idle_threshold_percent:g} %, released "
        f"{policy.idle_grace_minutes:g} min after the warning) and quota, one reaper round per simulated "
        "minute on the sim's manual clock. Owners press Extend or Keep 1-10 min after a reminder when "
        "still using the pod, and ignore it otherwise.",
        "Fidelity: the clock moves only once the bot has caught up; Slack's pacing is lifted (a simulated "
        "minute passes in milliseconds); the bot's 15 s tick (slow-node and drain notices, never a delete) "
        "runs once a simulated minute; users act on whole minutes. The sim names nodes at random, so "
        "scheduling ties break differently run to run: figures repeat to about 0.1 %.",
        f"Where gpubot's billed hours went: {_states(bot)}. Below {floor:.3f} no reaper can go without "
        "deleting wanted pods: start-up, and idle time inside sessions while their owners are there.",
        f"Against the time-only culler: {bot.ratio:.3f} vs {culler.ratio:.3f} billed ÷ busy, but the culler "
        f"deleted {len(culler.wrongful)} pods their owners still wanted (jobs and sessions past 4 h), "
        f"{lost_hours(culler):.1f} GPU-hours of the day's work lost, to be run again; gpubot lost "
        f"{lost_hours(bot):.1f} h with {len(bot.wrongful)} wrongful reaps.",
    ]
    if not GOAL_RATIO.met(bot.ratio):
        held = sum(float(h["hours"]) for h in bot.held)
        lines.append(
            f"Goal missed: {bot.ratio:.3f} > {GOAL_RATIO.limit:g}. Pods lived {held:.1f} h past their "
            f"owners' need ({_held_by(bot)}): a session nobody releases goes "
            f"{policy.idle_window_minutes:g} + {policy.idle_grace_minutes:g} min after its GPU's last use, "
            f"as the policy says. Nodes sat empty {states['empty']:.1f} h waiting for the autoscaler's "
            "scale-down; the rest is the floor above."
        )
    return lines


def _states(outcome: Outcome) -> str:
    return ", ".join(f"{state} {hours:.1f} h" for state, hours in outcome.state_hours.items())


def _held_by(outcome: Outcome) -> str:
    totals: dict[str, list[float]] = {}
    for held in outcome.held:
        totals.setdefault(f"{held['owner']} owners' pods ended by {held['ended']}", []).append(
            float(held["hours"])
        )
    ranked = sorted(totals.items(), key=lambda kv: -sum(kv[1]))
    return "; ".join(f"{key}: {len(hours)} pods, {sum(hours):.1f} h" for key, hours in ranked)


def per_minute(outcome: Outcome, day: trace.Trace) -> list[float]:
    """The pool's size at the end of each minute of the day (the last scrape at or before it)."""
    samples, size, out, index = outcome.pool_size, 0, [], 0
    for minute in range(1, int(day.day_seconds // 60) + 1):
        while index < len(samples) and samples[index][0] <= minute * 60:
            size = samples[index][1]
            index += 1
        out.append(float(size))
    return out


def table(found: dict[str, Outcome]) -> list[str]:
    """One line per arm, with ratios against the no reaper arm of the same run."""
    base = found[NO_REAPER]
    rows = [
        f"{'arm':<18}{'billed h':>10}{'busy h':>9}{'billed/busy':>13}{'saved h':>9}{'vs none':>9}"
        f"{'p50 min':>9}{'p95 min':>9}{'wrongful':>10}{'wall s':>8}"
    ]
    for name, o in found.items():
        saved = base.billed_node_hours - o.billed_node_hours
        against = o.billed_node_hours / base.billed_node_hours if base.billed_node_hours else float("nan")
        rows.append(
            f"{name:<18}{o.billed_node_hours:>10.1f}{o.busy_gpu_hours:>9.1f}{o.ratio:>13.3f}{saved:>9.1f}"
            f"{against:>8.2f}x{o.percentile(0.5):>9.1f}{o.percentile(0.95):>9.1f}{len(o.wrongful):>10}"
            f"{o.wall_seconds:>8.0f}"
        )
    return rows


def details(found: dict[str, Outcome]) -> Json:
    """Everything per arm, for whoever asks which pods held nodes and what ended them."""
    return {
        name: {
            "billed_node_hours": round(o.billed_node_hours, 3),
            "busy_gpu_hours": round(o.busy_gpu_hours, 3),
            "billed_over_busy": round(o.ratio, 4),
            "state_hours": o.state_hours,
            "time_to_running_p50_min": round(o.percentile(0.5), 2),
            "time_to_running_p95_min": round(o.percentile(0.95), 2),
            "never_ran": o.never_ran,
            "refused": o.refused,
            "reaps": [vars(r) for r in o.reaps],
            "wrongful": o.wrongful,
            "held_after_done": o.held,
            "wall_seconds": round(o.wall_seconds, 1),
            **o.notes,
        }
        for name, o in found.items()
    }


def plot(found: dict[str, Outcome], day: trace.Trace, path: Path) -> bool:
    """The pool's size over the day, one line per arm; False (and a word why) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError:
        print("matplotlib is not installed (pip install -e '.[bench]'): no plot", file=sys.stderr)
        return False
    figure, axes = pyplot.subplots(figsize=(9, 4.5))
    hours = [minute / 60 for minute in range(1, int(day.day_seconds // 60) + 1)]
    for name, outcome in found.items():
        label = f"{name}: {outcome.billed_node_hours:.0f} node-h billed, ÷ busy {outcome.ratio:.2f}"
        axes.step(hours, per_minute(outcome, day), where="post", label=label, linewidth=1.4)
    axes.axhline(day.pool_max_nodes, color="grey", linestyle=":", linewidth=1, label="pool maximum")
    axes.set_xlim(0, day.day_seconds / 3600)
    axes.set_xticks(range(0, int(day.day_seconds / 3600) + 1, 2))
    axes.set_xlabel("hour of the day (simulated)")
    axes.set_ylabel("GPU nodes in the pool (billed)")
    axes.set_title(f"GPU pool size over a replayed day: {len(day.users)} users, seed {day.seed}")
    axes.grid(True, alpha=0.3)
    axes.legend(loc="upper left", fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    pyplot.close(figure)
    return True
