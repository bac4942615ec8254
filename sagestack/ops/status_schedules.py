"""An environment's schedules for `sagestack status` (ops/status.py): the retraining schedules
(EventBridge Scheduler) and the endpoints' Model Monitor schedules, with their next run.

When an expression fires next (neither GetSchedule nor DescribeMonitoringSchedule says):
`at(…)`, `rate(N unit)` counted from the schedule's start, and `cron(min hour dom month dow
year)` with numbers, names, `*`, `?`, ranges, steps and lists. A cron field with L, W or # gives
None (the screen says the expression instead).

Also the helpers every section of status shares: a response's time (`iso`), an error's code, its
line (`reason`), and whether it is missing credentials (which end the read)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_RATE = re.compile(r"^rate\((\d+)\s+(minute|minutes|hour|hours|day|days)\)$")
_UNITS = {"minute": 60, "hour": 3600, "day": 86400}
_MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
_DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]  # cron's day-of-week: 1 = SUN … 7 = SAT
_HORIZON_DAYS = 366 * 5


def read_schedules(
    retrains: Mapping[str, tuple[str, str, str]],
    monitors: Mapping[str, str],
    scheduler: Any,
    sm: Any,
    now: datetime,
) -> list[dict[str, Any]]:
    """Each retraining schedule (job -> (name, expression, timezone)) and each Model Monitor
    schedule (endpoint -> name): its state, expression and next run; state None when not deployed."""
    rows = []
    for key, (name, expression, timezone) in retrains.items():
        try:
            got = scheduler.get_schedule(Name=name)
        except Exception as e:
            if error_code(e) != "ResourceNotFoundException":
                raise
            rows.append(_row("retrain", key, name, None, expression, None))
            continue
        expression = got.get("ScheduleExpression", expression)
        timezone = got.get("ScheduleExpressionTimezone", timezone)
        start = got.get("StartDate") or got.get("CreationDate")
        upcoming = next_run(expression, timezone, now, start) if got.get("State") == "ENABLED" else None
        rows.append(_row("retrain", key, name, got.get("State"), expression, upcoming))
    for key, name in monitors.items():
        try:
            got = sm.describe_monitoring_schedule(MonitoringScheduleName=name)
        except Exception as e:
            if error_code(e) not in ("ResourceNotFound", "ValidationException"):
                raise
            rows.append(_row("monitor", key, name, None, None, None))
            continue
        expression = got["MonitoringScheduleConfig"].get("ScheduleConfig", {}).get("ScheduleExpression", "")
        state = got["MonitoringScheduleStatus"]
        upcoming = next_run(expression, "UTC", now) if state == "Scheduled" else None
        last = (got.get("LastMonitoringExecutionSummary") or {}).get("MonitoringExecutionStatus")
        rows.append(_row("monitor", key, name, state, expression, upcoming, last, got.get("FailureReason")))
    return rows


def _row(
    kind: str,
    entry: str,
    name: str,
    state: str | None,
    expression: str | None,
    upcoming: datetime | None,
    last_run: str | None = None,
    failure_reason: str | None = None,
) -> dict[str, Any]:
    return {
        "kind": kind,
        "entry": entry,
        "name": name,
        "state": state,
        "expression": expression,
        "next_run": iso(upcoming),
        "last_run": last_run,
        "failure_reason": failure_reason,
    }


def next_run(expression: str, timezone: str, now: datetime, start: datetime | None = None) -> datetime | None:
    """The first time after `now` the expression fires (UTC), or None when it never will again
    or the expression is beyond this reading."""
    expression = expression.strip()
    try:
        zone = ZoneInfo(timezone or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return None
    if expression.startswith("at(") and expression.endswith(")"):
        try:
            at = datetime.fromisoformat(expression[3:-1]).replace(tzinfo=zone)
        except ValueError:
            return None
        return at.astimezone(UTC) if at > now else None
    rate = _RATE.match(expression)
    if rate:
        period = int(rate.group(1)) * _UNITS[rate.group(2).rstrip("s")]
        origin = start or now
        if origin > now:
            return origin
        steps = int((now - origin).total_seconds() // period) + 1
        return origin + timedelta(seconds=steps * period)
    if expression.startswith("cron(") and expression.endswith(")"):
        return _next_cron(expression[5:-1].split(), zone, now)
    return None


def _next_cron(fields: list[str], zone: ZoneInfo, now: datetime) -> datetime | None:
    if len(fields) != 6:
        return None
    try:
        minutes = _values(fields[0], 0, 59)
        hours = _values(fields[1], 0, 23)
        days = _values(fields[2], 1, 31)
        months = _values(fields[3], 1, 12, _MONTHS)
        weekdays = _values(fields[4], 1, 7, _DAYS)
        years = _values(fields[5], 1970, 2199)
    except ValueError:
        return None
    local = now.astimezone(zone)
    day = local.date()
    for _ in range(_HORIZON_DAYS):
        cron_weekday = (day.isoweekday() % 7) + 1  # Monday (1) -> 2, Sunday (7) -> 1
        if day.year in years and day.month in months and day.day in days and cron_weekday in weekdays:
            for hour in sorted(hours):
                for minute in sorted(minutes):
                    fires = datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone)
                    if fires > local:
                        return fires.astimezone(UTC)
        day += timedelta(days=1)
    return None


def _values(field: str, low: int, high: int, names: list[str] | None = None) -> set[int]:
    """The values a cron field allows; ValueError for what this reading does not know (L, W, #)."""
    if field in ("*", "?"):
        return set(range(low, high + 1))
    out: set[int] = set()
    for part in field.split(","):
        body, _, step = part.partition("/")
        if body in ("*", ""):
            first, last = low, high
        else:
            a, _, b = body.partition("-")
            first = _number(a, low, names)
            last = _number(b, low, names) if b else (high if step else first)
        if not (low <= first <= high and low <= last <= high):
            raise ValueError(part)
        out.update(range(first, last + 1, int(step) if step else 1))
    return out


def _number(text: str, low: int, names: list[str] | None) -> int:
    if names and text.upper() in names:
        return names.index(text.upper()) + low
    if not text.isdigit():
        raise ValueError(text)
    return int(text)


def iso(value: datetime | None) -> str | None:
    """A time of a response in ISO 8601, UTC (None stays None)."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat(timespec="seconds")


def error_code(e: Exception) -> str | None:
    """The AWS error code of a botocore ClientError (None for anything else)."""
    response = getattr(e, "response", None)
    return response.get("Error", {}).get("Code") if isinstance(response, dict) else None


def kept(e: Exception) -> str:
    """An error of one entry as its line; missing credentials end the read."""
    if no_credentials(e):
        raise e
    return reason(e)


def no_credentials(e: Exception) -> bool:
    return type(e).__name__ in ("NoCredentialsError", "PartialCredentialsError")


def reason(e: Exception) -> str:
    """An error in a line: its code and message (not an HTML page a proxy or stand-in sent)."""
    response = getattr(e, "response", None)
    if isinstance(response, dict) and "Error" in response:
        error = response["Error"]
        message = str(error.get("Message", "")).strip()
        if message.startswith("<"):
            message = f"HTTP {response.get('ResponseMetadata', {}).get('HTTPStatusCode', '?')}"
        return f"{error.get('Code', '?')}: {message}"
    return f"{type(e).__name__}: {e}"
