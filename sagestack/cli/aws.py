"""What the day-two commands (status, logs, stop, and Ctrl-C in run) share to talk to AWS: one
boto3 client per service made on first use, missing credentials found before any request, and
AWS's refusals as one line (exit 1) instead of a traceback."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sagestack.cli.common import UserError

NO_CREDENTIALS = (
    "no AWS credentials: configure a profile (aws configure) or set AWS_PROFILE (or AWS_ACCESS_KEY_ID "
    "and AWS_SECRET_ACCESS_KEY), then run `sagestack check`"
)


def clients(region: str) -> Any:
    """`client(service)`: one boto3 client per service, made on first use; missing credentials
    are found before any request (one line, exit 1)."""
    import boto3

    if boto3.Session().get_credentials() is None:
        raise UserError(NO_CREDENTIALS)
    made: dict[str, Any] = {}

    def client(service: str) -> Any:
        if service not in made:
            made[service] = boto3.client(service, region_name=region)
        return made[service]

    return client


@contextmanager
def aws_errors(region: str) -> Iterator[None]:
    """AWS's refusals as one line and exit 1 (missing credentials, an unreachable region, an error)."""
    from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError, NoCredentialsError
    from botocore.parsers import ResponseParserError

    try:
        yield
    except NoCredentialsError:
        raise UserError(NO_CREDENTIALS) from None
    except EndpointConnectionError as e:
        raise UserError(f"cannot reach AWS in {region}: {e}") from None
    except (ClientError, BotoCoreError) as e:
        raise UserError(str(e)) from None
    except ResponseParserError as e:  # not a BotoCoreError: an answer botocore could not read (a 5xx page)
        raise UserError(f"AWS answered with something botocore could not read; try again: {e}") from None
