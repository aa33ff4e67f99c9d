"""`runwatch worker`'s settings are checked before anything connects."""

from __future__ import annotations

import pytest

from runwatch import cli


@pytest.mark.parametrize("wait", ["-0.1", "nan", "6"])
def test_a_fetch_wait_out_of_range_is_a_usage_error(
    wait: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["worker", "--kafka", "127.0.0.1:1", "--fetch-wait", wait])
    assert code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "--fetch-wait must be between 0 and 5 seconds" in line
