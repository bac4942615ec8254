"""cli/aws.aws_errors: every way AWS (or the way to it) refuses a day-two command is one line and
exit 1, never "internal error" — a response botocore cannot parse included (a proxy's or a 5xx
HTML page: ResponseParserError is not a BotoCoreError)."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError
from botocore.parsers import ResponseParserError

from sagestack.cli.aws import NO_CREDENTIALS, aws_errors
from sagestack.cli.common import UserError


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (NoCredentialsError(), NO_CREDENTIALS),
        (EndpointConnectionError(endpoint_url="https://x"), "cannot reach AWS in eu-west-1"),
        (ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "DescribeStacks"), "AccessDenied"),
        (ResponseParserError("invalid XML received"), "could not read; try again: invalid XML received"),
    ],
)
def test_each_refusal_is_one_line(error, said):
    with pytest.raises(UserError) as caught, aws_errors("eu-west-1"):
        raise error
    assert said in str(caught.value) and "\n" not in str(caught.value)
