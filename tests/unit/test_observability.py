"""JSON log lines, and the Telemetry port's counts as Prometheus reads them."""

from __future__ import annotations

import io
import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from bot.adapters import observability

MOMENT = datetime(2024, 5, 1, 9, 30, 0, 123456, tzinfo=UTC)


def record(message: str, *args: Any, extra: dict[str, Any] | None = None, **kwargs: Any) -> logging.LogRecord:
    made = logging.getLogger("gpubot.audit").makeRecord(
        "gpubot.audit", logging.INFO, __file__, 1, message, args, None, extra=extra, **kwargs
    )
    made.created = MOMENT.timestamp()
    return made


def formatted(made: logging.LogRecord) -> dict[str, Any]:
    line = observability.JsonFormatter().format(made)
    assert "\n" not in line
    parsed: dict[str, Any] = json.loads(line)
    return parsed


def test_a_record_is_one_json_object_with_time_level_logger_and_message() -> None:
    assert formatted(record("workload %s: %s", "default/a", "Running")) == {
        "time": "2024-05-01T09:30:00.123Z",
        "level": "INFO",
        "logger": "gpubot.audit",
        "message": "workload default/a: Running",
    }


def test_extra_fields_are_kept_as_json_values() -> None:
    audit = {"action": "run", "actor": "U_ALICE", "workload": "default/a"}
    entry = formatted(record("audit", extra={"audit": audit, "attempt": 2, "at": MOMENT}))
    assert entry["audit"] == audit and entry["attempt"] == 2
    assert entry["at"] == str(MOMENT)  # what JSON cannot hold is written as text, never dropped


def test_extras_cannot_overwrite_the_standard_fields() -> None:
    entry = formatted(record("real", extra={"level": "fake", "logger": "fake", "time": "fake"}))
    assert (entry["level"], entry["logger"], entry["time"]) == (
        "INFO",
        "gpubot.audit",
        "2024-05-01T09:30:00.123Z",
    )


def test_a_multiline_message_and_its_traceback_stay_on_one_line() -> None:
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        made = logging.getLogger("x").makeRecord(
            "x", logging.ERROR, __file__, 1, "first\nsecond ✓", (), exc_info=sys.exc_info()
        )
    entry = formatted(made)
    assert entry["message"] == "first\nsecond ✓"
    assert entry["exception"].startswith("Traceback") and "RuntimeError: boom" in entry["exception"]


def test_configure_logging_switches_the_root_handlers_to_json() -> None:
    root = logging.getLogger()
    saved = (root.level, root.handlers[:], [h.formatter for h in root.handlers])
    try:
        observability.configure_logging("DEBUG", json_lines=True)
        assert root.level == logging.DEBUG and root.handlers
        assert all(isinstance(h.formatter, observability.JsonFormatter) for h in root.handlers)
    finally:
        root.setLevel(saved[0])
        root.handlers[:] = saved[1]
        for handler, formatter in zip(saved[1], saved[2], strict=True):
            handler.setFormatter(formatter)


def samples(telemetry: observability.Telemetry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(telemetry.scrape().decode())
        for sample in family.samples
    }


def test_each_bot_has_its_own_registry_and_counts_by_label() -> None:
    first, second = observability.Telemetry(), observability.Telemetry()
    first.count_command("run", "ok")
    first.count_command("run", "ok")
    first.count_command("run", "refused")
    first.count_scale_up("gpu-pool")
    first.count_reaper_act("expire", dry_run=False)
    first.observe_time_to_running(245.0)
    first.observe_time_to_running(-1.0)  # cluster clocks skew; a negative sample would poison the sum

    seen = samples(first)
    assert seen[("gpubot_commands_total", (("command", "run"), ("outcome", "ok")))] == 2
    assert seen[("gpubot_commands_total", (("command", "run"), ("outcome", "refused")))] == 1
    assert seen[("gpubot_scale_ups_total", (("pool", "gpu-pool"),))] == 1
    assert seen[("gpubot_reaper_acts_total", (("act", "expire"), ("dry_run", "false")))] == 1
    assert seen[("gpubot_time_to_running_seconds_count", ())] == 2
    assert seen[("gpubot_time_to_running_seconds_sum", ())] == 245.0
    assert seen[("gpubot_time_to_running_seconds_bucket", (("le", "240.0"),))] == 1
    assert seen[("gpubot_time_to_running_seconds_bucket", (("le", "300.0"),))] == 2
    assert not any(name == "gpubot_commands_total" for name, _ in samples(second))


def test_every_root_handler_masks_url_passwords_in_messages_and_tracebacks() -> None:
    """Issue 21: whoever logs a URL with a password (settings, an error, a library), the line is masked."""
    root = logging.getLogger()
    saved = (root.level, root.handlers[:])
    written = io.StringIO()
    root.handlers[:] = [logging.StreamHandler(written)]
    try:
        observability.configure_logging("INFO", json_lines=False)
        logging.getLogger("gpubot.test").info("querying %s", "http://gpu:hunter2@prom:9090/api")
        try:
            raise RuntimeError("redis://:hunter2@redis:6379/0 refused")
        except RuntimeError:
            logging.getLogger("gpubot.test").exception("could not connect")
    finally:
        root.setLevel(saved[0])
        root.handlers[:] = saved[1]
    lines = written.getvalue()
    assert "hunter2" not in lines
    assert "querying http://gpu:***@prom:9090/api" in lines
    assert "RuntimeError: redis://:***@redis:6379/0 refused" in lines
