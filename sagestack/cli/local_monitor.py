"""`sagestack local monitor`: Model Monitor's data-quality check on what `local serve` captured."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from sagestack.cli.common import (
    EnvOption,
    JsonOption,
    RootOption,
    console,
    default_env,
    load_entry,
    print_lines,
)

if TYPE_CHECKING:
    from sagestack.local.serving.monitor import Dataset
    from sagestack.project.loader import LoadedSpec

app = typer.Typer()


@app.command("monitor")
def local_monitor(
    endpoint: Annotated[str, typer.Argument(help="a key of endpoints: (with data_capture)")],
    env: EnvOption = None,
    baseline: Annotated[
        Path | None,
        typer.Option(
            "--baseline",
            help="the baseline dataset: a CSV / JSON Lines file or folder (default: monitor.baseline_data here)",
        ),
    ] = None,
    sample_baseline: Annotated[
        int,
        typer.Option(
            "--sample-baseline", help="first write this many digits samples as a headerless CSV baseline"
        ),
    ] = 0,
    as_json: JsonOption = False,
    root: RootOption = Path("."),
) -> None:
    """Model Monitor's data-quality check here: a baseline (statistics.json, constraints.json) from
    the training data, then the requests `local serve` captured checked against it."""
    from datetime import UTC, datetime

    from rich.table import Table

    from sagestack.cli.common import UserError
    from sagestack.local.pasteable import shown_path
    from sagestack.local.serving.compile import local_root
    from sagestack.local.serving.monitor import (
        captured_dataset,
        constraints,
        statistics,
        violations,
        write_json,
    )
    from sagestack.local.serving.s3_paths import capture_dir

    out = console()
    loaded = load_entry(root, default_env(root, env), endpoint, lambda spec: spec.endpoints, "endpoint")
    capture_root = capture_dir(loaded, endpoint)
    base = local_root(loaded) / "monitoring" / endpoint
    data = _baseline_dataset(loaded, endpoint, baseline, sample_baseline)
    stats = statistics(data)
    limits = constraints(stats)
    write_json(base / "baseline" / "statistics.json", stats)
    write_json(base / "baseline" / "constraints.json", limits)
    if not as_json:
        print_lines(
            out,
            f"baseline: {len(data.rows)} records, {len(data.names)} features → {shown_path(base / 'baseline')}",
        )
    current = captured_dataset(capture_root)
    if not current.rows:
        raise UserError(
            f"nothing captured under {shown_path(capture_root)}; serve with capture on "
            f"(`sagestack local serve {endpoint} --capture`) and send requests first"
        )
    found = violations(stats, limits, current)
    report = base / "reports" / datetime.now(UTC).strftime("%Y-%m-%dT%H-%M-%S")
    write_json(report / "statistics.json", statistics(current))
    write_json(report / "constraint_violations.json", {"violations": found})
    if as_json:
        document = {
            "endpoint": endpoint,
            "environment": loaded.env,
            "baseline": {
                "records": len(data.rows),
                "features": len(data.names),
                "folder": str(base / "baseline"),
            },
            "captured": {"records": len(current.rows), "report": str(report)},
            "status": "CompletedWithViolations" if found else "Completed",
            "violations": found,
        }
        typer.echo(json.dumps(document, indent=1))
        return
    print_lines(out, f"captured: {len(current.rows)} records → {shown_path(report)}")
    if not found:
        out.print("[green]✓[/] no violations (Completed)")
        return
    table = Table(
        "feature", "check", "description", title=f"{len(found)} violation(s) (CompletedWithViolations)"
    )
    for v in found[:20]:
        table.add_row(v["feature_name"], v["constraint_check_type"], v["description"])
    out.print(table)
    if len(found) > 20:
        print_lines(out, f"… and {len(found) - 20} more in constraint_violations.json of the report above")


def _baseline_dataset(loaded: LoadedSpec, endpoint: str, baseline: Path | None, sample: int) -> Dataset:
    """The baseline dataset: `sample` digits samples written as a headerless CSV (--sample-baseline),
    else --baseline, else the local copy of the monitor's baseline_data, else monitoring/<endpoint>/
    baseline-data here."""
    from sagestack.cli.common import UserError
    from sagestack.local.pasteable import shown_path
    from sagestack.local.serving.compile import local_root
    from sagestack.local.serving.monitor import read_dataset

    monitor = loaded.spec.endpoints[endpoint].monitor
    dataset_format = monitor.dataset_format if monitor else "csv"
    header = monitor.csv_header if monitor else False
    base = local_root(loaded) / "monitoring" / endpoint
    if sample:
        from sklearn.datasets import load_digits  # type: ignore[import-untyped]

        x, _ = load_digits(return_X_y=True)
        baseline = base / "baseline-data" / "digits.csv"
        baseline.parent.mkdir(parents=True, exist_ok=True)
        baseline.write_text("".join(",".join(f"{v / 16.0:.4f}" for v in row) + "\n" for row in x[:sample]))
        dataset_format, header = "csv", False
    if baseline is None:
        location = monitor.baseline_data if monitor and monitor.baseline_data else None
        baseline = (
            local_root(loaded) / "s3" / location.removeprefix("s3://") if location else base / "baseline-data"
        )
    if not baseline.exists():
        raise UserError(
            f"no baseline dataset at {shown_path(baseline)}; give --baseline (the training data as CSV or JSON "
            "Lines) "
            "or --sample-baseline N"
        )
    data = read_dataset(baseline, dataset_format, header)
    if not data.rows:
        raise UserError(f"the baseline dataset {baseline} holds no records")
    return data
