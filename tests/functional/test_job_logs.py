"""A job's log lines (`lambdajobs.job_logs`): from the local worker log the worker really writes, and
from CloudWatch Logs Insights on moto (StartQuery, then GetQueryResults until the query ends)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from lambdajobs import job_logs
from lambdajobs.runtime.config import StackConfig, clear_manifest_cache
from lambdajobs.runtime.producer import enqueue
from lambdajobs.runtime.settings import manifest_parameter

ADDRESS = "ada.lovelace@example.com"


@pytest.fixture
def worker_log(tmp_path: Path) -> Iterator[Path]:
    """The worker's logger writing to a file, as `lambdajobs dev` routes it (`--log-file`)."""
    import lambdajobs.runtime.worker  # noqa: F401  (creates the logger)

    path = tmp_path / "worker.log"
    stream = path.open("a", encoding="utf-8")
    handlers = logging.getLogger("lambdajobs").handlers
    previous = [h.setStream(stream) for h in handlers]
    yield path
    for handler, old in zip(handlers, previous, strict=True):
        handler.setStream(old)
    stream.close()


def test_a_jobs_lines_are_read_from_the_local_worker_log_and_no_other_jobs(stack, sink, clock, worker_log):
    # GIVEN two jobs run by the worker, which logs to a file; the first fails twice, the other once
    # (a failed attempt writes its lines; a success writes none)
    sink.flaky[ADDRESS], sink.flaky["bob@example.com"] = 2, 1
    first = enqueue("deliver", {"to": ADDRESS, "subject": "s", "body": "b"}, job_id="mail-1")
    other = enqueue("deliver", {"to": "bob@example.com", "subject": "s", "body": "b"}, job_id="mail-11")
    runner = stack.runner("deliver")
    runner.drain()
    for _ in range(2):
        clock.shift(timedelta(minutes=10))  # past its backoff
        runner.drain()
    for handler in logging.getLogger("lambdajobs").handlers:
        handler.flush()
    # WHEN the first job's lines are read
    logs = job_logs.local_lines(worker_log, first)
    # THEN they are its own (not those of "mail-11", whose id holds it), in order, attempt by attempt
    assert logs.status == "complete" and logs.done and logs.source == str(worker_log)
    assert logs.lines, worker_log.read_text()
    assert [line.attempt for line in logs.lines] == sorted(line.attempt or 0 for line in logs.lines)
    assert {line.attempt for line in logs.lines} == {1, 2}
    assert any(line.level == "WARNING" for line in logs.lines)
    written = [json.loads(t) for t in worker_log.read_text().splitlines() if t.startswith("{")]
    assert any(w.get("correlation_id") == other for w in written)
    ours = [w["message"] for w in written if w.get("correlation_id") == first]
    assert [line.message for line in logs.lines] == ours
    text = json.dumps([line.__dict__ for line in logs.lines])
    # AND the address (a PII field) is masked, as the worker wrote it
    assert ADDRESS not in text


def test_the_local_reader_keeps_a_limit_skips_what_is_not_json_and_reads_only_the_files_end(tmp_path):
    path = tmp_path / "worker.log"
    lines = ["not json: job-1 said hi", '{"broken": '] + [
        json.dumps({"correlation_id": "job-1", "message": f"m{i}", "level": "INFO", "attempt": 1})
        for i in range(5)
    ]
    path.write_text("\n".join(lines) + "\n")
    # a limit: the first lines, and the answer says it was cut
    cut = job_logs.local_lines(path, "job-1", limit=3)
    assert [line.message for line in cut.lines] == ["m0", "m1", "m2"] and cut.cut
    # the file's end only: the line cut in the middle is not taken
    tail = job_logs.local_lines(path, "job-1", max_bytes=len(lines[-1]) + len(lines[-2]) + 1)
    assert [line.message for line in tail.lines] == ["m4"]


def test_no_local_log_says_where_it_was_looked_for_and_how_to_name_it(tmp_path):
    with pytest.raises(job_logs.LogsUnavailableError, match="LAMBDAJOBS_WORKER_LOG"):
        job_logs.local_lines(tmp_path / "nowhere.log", "job-1")
    assert job_logs.local_log_file({}) == Path("build/local/worker.log")
    assert job_logs.local_log_file({"LAMBDAJOBS_WORKER_LOG": "/x/w.log"}) == Path("/x/w.log")


def test_the_query_holds_the_job_id_as_a_string_literal():
    query = job_logs.query_text('a" | filter 1=1 | fields "x')
    assert 'filter correlation_id = "a\\" | filter 1=1 | fields \\"x"' in query


def test_a_queries_time_span_is_the_jobs_own():
    now = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    start, end = job_logs.time_span("2026-12-02T10:00:00Z", None, "2026-12-02T10:30:00.123Z", now=now)
    assert start == datetime(2026, 12, 2, 9, 55, tzinfo=UTC)
    assert end == datetime(2026, 12, 2, 10, 45, 0, 123000, tzinfo=UTC)
    assert job_logs.time_span(None, now=now) == (now - timedelta(days=1), now)
    assert job_logs.time_span("2026-12-02T11:59:00Z", now=now)[1] == now  # never past now


# -- on AWS: CloudWatch Logs Insights (moto) ----------------------------------------------------------


@pytest.fixture
def cloud() -> Iterator[StackConfig]:
    """A stack whose job `deliver` logs to group `/aws/lambda/deliver` (its manifest says so), with
    lines of two jobs in it."""
    clear_manifest_cache()
    with mock_aws():
        logs = boto3.client("logs", region_name="us-east-1")
        logs.create_log_group(logGroupName="/aws/lambda/deliver")
        logs.create_log_stream(logGroupName="/aws/lambda/deliver", logStreamName="s")
        now = int(time.time() * 1000)
        events = [
            {
                "timestamp": now + i,
                "message": json.dumps(
                    {
                        "level": "INFO",
                        "message": f"line {i}",
                        "correlation_id": "job-1" if i % 2 else "job-2",
                        "attempt": 1,
                        "timestamp": f"2026-12-02T10:00:0{i}Z",
                    }
                ),
            }
            for i in range(6)
        ]
        logs.put_log_events(logGroupName="/aws/lambda/deliver", logStreamName="s", logEvents=events)
        entry = {"queue_url": "q", "queue_arn": "a", "dlq_url": "d", "log_group": "/aws/lambda/deliver"}
        boto3.client("ssm", region_name="us-east-1").put_parameter(
            Name=manifest_parameter("cloud", "deliver"), Value=json.dumps(entry), Type="String"
        )
        yield StackConfig(stack="cloud", region="us-east-1")
    clear_manifest_cache()


def _running_first(config: StackConfig, times: int) -> None:
    """GetQueryResults answers `Running` (no rows) the first `times` calls, as CloudWatch does while
    a query scans."""
    left = [times]

    def still_running(parsed: dict[str, Any], **_: Any) -> None:
        if left[0] > 0:
            left[0] -= 1
            parsed["status"], parsed["results"] = "Running", []

    config.client("logs").meta.events.register("after-call.cloudwatch-logs.GetQueryResults", still_running)


def test_on_aws_a_query_starts_at_once_and_its_results_are_read_when_it_ends(cloud):
    span = job_logs.time_span(datetime.now(UTC).isoformat())
    _running_first(cloud, 1)
    # WHEN the job's logs are asked for: a query starts, and nothing waits for it
    started = job_logs.start(cloud, "deliver", "job-1", span)
    assert (started.status, started.source, started.done) == ("running", "/aws/lambda/deliver", False)
    assert started.query_id
    # THEN while it runs, its results say so
    assert job_logs.results(cloud, "job-1", started.query_id).status == "running"
    # AND once it ends, they are the job's lines alone, in order
    done = job_logs.results(cloud, "job-1", started.query_id)
    assert done.status == "complete" and done.done
    assert [line.message for line in done.lines] == ["line 1", "line 3", "line 5"]
    assert done.lines[0].timestamp == "2026-12-02T10:00:01Z" and done.lines[0].attempt == 1


def test_on_aws_a_query_that_failed_says_so(cloud):
    started = job_logs.start(cloud, "deliver", "job-1", job_logs.time_span(None))

    def failed(parsed: dict[str, Any], **_: Any) -> None:
        parsed["status"] = "Failed"

    cloud.client("logs").meta.events.register("after-call.cloudwatch-logs.GetQueryResults", failed)
    assert started.query_id
    answer = job_logs.results(cloud, "job-1", started.query_id)
    assert answer.status == "failed" and answer.note and "failed" in answer.note


def test_a_stack_whose_manifest_names_no_log_group_says_to_deploy(cloud):
    entry = {"queue_url": "q", "queue_arn": "a", "dlq_url": "d"}
    boto3.client("ssm", region_name="us-east-1").put_parameter(
        Name=manifest_parameter("cloud", "other"), Value=json.dumps(entry), Type="String"
    )
    with pytest.raises(job_logs.LogsUnavailableError, match="deploy it with this version"):
        job_logs.start(cloud, "other", "job-1", job_logs.time_span(None))


def test_a_query_id_that_is_not_one_never_reaches_aws(cloud):
    with pytest.raises(job_logs.LogsUnavailableError, match="not a CloudWatch Logs Insights query id"):
        job_logs.results(cloud, "job-1", "../../etc")


def test_the_boards_logs_panel_on_aws_starts_the_query_then_polls_it_until_it_ends(stack):
    """The panel's two requests, on moto: the first starts the query and asks to be fetched again
    with its id; the next shows the lines."""
    import re
    import urllib.request
    from html import unescape

    from lambdajobs.board import create_app
    from tests.browser.board_server import BoardServer

    # GIVEN job deliver's log group, named in its manifest entry, holding lines of job mail-1
    config = stack.config
    ssm = config.client("ssm")
    name = manifest_parameter(config.stack, "deliver")
    entry = json.loads(ssm.get_parameter(Name=name)["Parameter"]["Value"])
    group = f"/lambdajobs/{config.stack}/deliver"
    ssm.put_parameter(Name=name, Value=json.dumps({**entry, "log_group": group}), Overwrite=True)
    clear_manifest_cache()
    logs = config.client("logs")
    logs.create_log_group(logGroupName=group)
    logs.create_log_stream(logGroupName=group, logStreamName="s")
    line = {"level": "INFO", "message": "sent it", "correlation_id": "mail-1", "attempt": 1}
    logs.put_log_events(
        logGroupName=group,
        logStreamName="s",
        logEvents=[{"timestamp": int(time.time() * 1000), "message": json.dumps(line)}],
    )
    _running_first(config, 1)
    with BoardServer(create_app(config, stack.specs)) as board:

        def panel(path: str) -> str:
            request = urllib.request.Request(board.url + path, headers={"HX-Request": "true"})
            with urllib.request.urlopen(request, timeout=10) as answer:
                assert answer.status == 200
                return str(answer.read().decode())

        # WHEN the job's page loads its logs panel
        first = panel("/logs/mail-1?job=deliver")
        # THEN a query started, and the panel asks for its results by the query's id
        assert "Logs Insights is looking" in first, first
        again = unescape(re.search(r'hx-get="([^"]+)"', first)[1])
        assert "query=" in again
        # AND while it runs the panel asks again; once it ends it shows the job's lines, and stops
        running = panel(again)
        assert "Logs Insights is looking" in running and "hx-trigger" in running
        done = panel(again)
        # (no more polling: only the "read them again" link, which waits for a click)
        assert "sent it" in done and "hx-trigger" not in done
