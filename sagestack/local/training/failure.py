"""What the training toolkit writes to output/failure when the script exits non-zero and left no
failure file of its own: `ExecuteUserScriptError` with the exit code, the command and the
ErrorMessage it collects from the script's error stream (sagemaker_training.process.watch, with
the PyTorch container's capture_error=True): from the first line that names a Python exception
class (or an MPI failure) on, each line once, in order. SageMaker shows the same text as the job's
FailureReason, so a failed local run says why, as a failed job does."""

from __future__ import annotations

import builtins
from pathlib import Path

# The toolkit's _PYTHON_ERRORS_ are Python's built-in exception names; _MPI_ERRORS_ these two.
_BUILTIN = sorted(
    n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)
)
_ERROR_NAMES = (*_BUILTIN, "mpirun.real", "ORTE")
MAX_LINES = 40  # the newest lines are kept: SageMaker's FailureReason is short too (1,024 characters)


def error_message(log: str) -> str:
    """The ErrorMessage the toolkit would report for a script that wrote `log`."""
    lines: list[str] = []
    started = False
    for raw in log.splitlines():
        line = raw.strip(" :")
        started = started or any(name in raw for name in _ERROR_NAMES)
        if started and line and line not in lines:
            lines.append(line)
    return "\n".join(lines[-MAX_LINES:])


def failure_text(code: int, command: list[str], logs: list[Path]) -> str:
    """The failure file's text; `logs` are the failed host's process logs."""
    message = "\n".join(
        m for m in (error_message(p.read_text(errors="replace")) for p in logs if p.exists()) if m
    )
    return (
        f'Framework Error: \nExecuteUserScriptError:\nExitCode {code}\nErrorMessage "{message}"\n'
        f'Command "{" ".join(command)}"'
    )
