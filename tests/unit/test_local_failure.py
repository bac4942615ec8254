"""A failed script's failure file carries the ErrorMessage the training toolkit collects, judged by
the toolkit's own stream watcher (sagemaker_training.process.watch) on the same output."""

from __future__ import annotations

import asyncio
import contextlib
import io

import pytest

from sagestack.local.training.failure import MAX_LINES, error_message, failure_text

LOG = """\
[rank0]: step=10 train_loss=0.51
[rank1]: step=10 train_loss=0.52
Traceback (most recent call last):
  File "/opt/ml/code/train.py", line 12, in <module>
    main()
  File "/opt/ml/code/train.py", line 9, in main
    raise ValueError("the checkpoint at step 20 has no optimizer state")
ValueError: the checkpoint at step 20 has no optimizer state
Traceback (most recent call last):
ValueError: the checkpoint at step 20 has no optimizer state
E1204 torch.distributed.elastic.multiprocessing.api: failed (exitcode: 1) local_rank: 0
"""


def _toolkit_lines(text: str) -> list[str]:
    process = pytest.importorskip("sagemaker_training.process")

    async def run() -> str:
        reader = asyncio.StreamReader()
        reader.feed_data(text.encode())
        reader.feed_eof()
        with contextlib.redirect_stdout(io.StringIO()):  # watch() echoes every line
            return await process.watch(reader, 1)

    collected = asyncio.run(run())
    # check_error's own clean-up: each line once, in order
    return [line.strip(" :") for line in dict.fromkeys(collected.split("\n")) if line.strip(" :")]


def test_the_error_message_is_the_toolkits():
    ours = error_message(LOG).splitlines()
    assert ours == _toolkit_lines(LOG)
    # it starts at the first line naming an exception class: the traceback's head is not in it
    assert ours[0] == 'raise ValueError("the checkpoint at step 20 has no optimizer state")'
    assert "Traceback (most recent call last)" in ours  # the second traceback's head is
    assert "ValueError: the checkpoint at step 20 has no optimizer state" in ours


def test_a_run_without_an_exception_has_an_empty_message_and_a_long_one_keeps_its_end():
    assert error_message("step=1 loss=0.3\nstep=2 loss=0.2\n") == ""
    long = "RuntimeError: boom\n" + "".join(f"frame {i}\n" for i in range(200))
    kept = error_message(long).splitlines()
    assert len(kept) == MAX_LINES and kept[-1] == "frame 199"


def test_the_failure_text_names_code_message_and_command(tmp_path):
    log = tmp_path / "algo-1.log"
    log.write_text(LOG)
    text = failure_text(1, ["torchrun", "train.py"], [log, tmp_path / "missing.log"])
    assert text.startswith(
        'Framework Error: \nExecuteUserScriptError:\nExitCode 1\nErrorMessage "raise ValueError'
    )
    assert text.endswith('Command "torchrun train.py"')
    # LocalTrainResult.failure is the text up to the first blank line: the message must not hold one
    assert "\n\n" not in text


def test_the_rendezvous_port_is_free_and_outside_the_kernels_ephemeral_range(tmp_path):
    """torchrun binds --master_port seconds after sagestack picked it; a port from the ephemeral
    range could meanwhile be handed to any connection on the machine (CI saw a resumed run fail)."""
    import socket

    from sagestack.local.training.processes import ephemeral_ports, free_port

    ephemeral = ephemeral_ports()
    ports = {free_port() for _ in range(20)}
    assert all(p not in ephemeral and 1024 < p < 65536 for p in ports)
    assert len(ports) > 1  # chosen at random: concurrent runs rarely try the same one
    for port in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # free when returned
    custom = tmp_path / "range"
    custom.write_text("1024\t65535\n")
    assert ephemeral_ports(custom) == range(1024, 65536)
