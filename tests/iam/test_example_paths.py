"""Every path of every example job under the template's IAM policies: a scenario per (job, feature).

`SCENARIOS` (at the end) maps each (job, feature) of the example app, derived from its declarations
and its code (`tests.iam.example_paths`), to the IAM test that runs that path for real: the job's
worker under its function's role, the producer under the producer policy, the continuer and the
schedules under theirs. Some are the tests of test_workers.py and test_schedules.py, the others are
here. `test_every_job_and_feature_has_an_iam_scenario` fails when a job, or a feature a job declares
or uses, has none: a job or a feature added later brings its scenario with it.
"""

from __future__ import annotations

import dataclasses
import inspect
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from handlers import emails, video
from handlers.emails import MARKETING_ADDRESS, SendEmail
from lambdajobs.local.scheduler import LocalScheduler
from lambdajobs.runtime.durable import signal
from lambdajobs.runtime.producer import enqueue
from lambdajobs.runtime.records import get_status
from lambdajobs.runtime.settings import queue_key
from lambdajobs.runtime.spec import ensure_loaded, get_spec, load_jobs
from lambdajobs.runtime.workflow import chain, get_workflow, sig, workflow_key
from tests.iam import test_durable as durable
from tests.iam import test_flow_control as flow
from tests.iam import test_records as records
from tests.iam import test_schedules as schedules
from tests.iam import test_workers as workers
from tests.iam.example_paths import (
    CALL_FEATURES,
    CONCURRENCY_KEY,
    CONTEXT_FEATURES,
    SIGNALS_A_JOB,
    code_features,
    declared_paths,
    unclassified_fields,
    undeclared,
)

JOBS = "handlers"
CHAIN = ("transcode_video", "make_thumbnails", "notify_uploader")
#: A payload for each job that another job enqueues (for the `run_at` scenario).
SAMPLES: dict[str, Any] = {"send_email": SendEmail(to="ada@example.com", subject="Hi", body="Hello")}


def batch_reads(deployment: Any, job: str) -> list[Any]:
    return [c for c in deployment.calls_by(deployment.worker(job)) if c.action == "dynamodb:BatchGetItem"]


# -- the scenarios --------------------------------------------------------------------------------


def test_publish_video_runs_its_chain_each_step_under_its_own_role(deployment, encoder):
    """Issue 23: make_thumbnails' role had no dynamodb:BatchGetItem, so reading `ctx.parent_results`
    was denied, and on AWS every published video would have retried, then dead-lettered."""
    producer, continuer = deployment.producer_config(), deployment.continuer_runner()
    # GIVEN a video published by a producer with the producer policy: a chain of three steps
    wid = video.publish_video(
        "v1", "s3://in/v1.mov", uploader_id="user-42", formats=["720p", "4k"], config=producer
    )
    # WHEN each step's function takes it with its role, and the continuer sends the next with its own
    for job in CHAIN:
        deployment.runner(job).drain()
        continuer.drain()
    # THEN the thumbnails were made from the transcode's outputs, and the uploader told of them
    made = get_status(f"{wid}.1.0", config=producer)
    assert made.state == "succeeded", made.error
    assert made.result["thumbnails"]["4k"][0] == "s3://in/v1-4k-thumb1.jpg"
    told = get_status(f"{wid}.2.0", config=producer)
    assert told.state == "succeeded", told.error
    assert "published in 4k, 720p" in told.result["message"]
    assert get_workflow(wid, config=producer).state == "succeeded"
    # AND each later step read the step before's record with its own role (ctx.parent_results)
    for job in CHAIN[1:]:
        reads = batch_reads(deployment, job)
        assert reads and all(c.allowed for c in reads), job
    assert batch_reads(deployment, CHAIN[0]) == []  # a first step has no parents to read


def test_a_campaign_chord_calls_back_campaign_report_which_sends_the_summary(deployment, sender):
    producer, continuer = deployment.producer_config(), deployment.continuer_runner()
    mails, report = deployment.runner("send_email"), deployment.runner("campaign_report")
    # GIVEN a campaign of three recipients (one address invalid) sent by a producer as a chord
    recipients = ["ada@example.com", "bob@example.com", "not-an-address"]
    wid = emails.send_campaign("spring", recipients, "Spring sale", "20% off", config=producer)
    # WHEN send_email's function sends the mails, the continuer sends the callback, campaign_report's
    # function runs it (its parents' counts come with the message: ctx.workflow) and enqueues the
    # summary to send_email's queue, which sends it
    mails.drain()
    continuer.drain()
    report.drain()
    mails.drain()
    continuer.drain()
    # THEN the report counted two sent and one dead, and marketing got the summary
    flow = get_workflow(wid, config=producer)
    assert (flow.state, flow.callback_job_id) == ("succeeded", "campaign-spring.1.0")
    done = get_status("campaign-spring.1.0", config=producer)
    assert done.state == "succeeded", done.error
    assert done.result == {"campaign_id": "spring", "sent": 2, "dead": 1}
    assert sorted(sender.sent) == ["ada@example.com", "bob@example.com", MARKETING_ADDRESS]
    # AND the summary was sent to send_email's queue by campaign_report's role
    queue = deployment.stack.provisioned.queues["send_email"].queue_arn
    calls = deployment.calls_by(deployment.worker("campaign_report"))
    assert any(c.action == "sqs:SendMessage" and queue in c.resources for c in calls)


def test_a_job_enqueues_its_targets_at_every_level_now_and_later(deployment, clock):
    """For each job whose `run_at` row names this scenario: from its function's configuration and
    role, every job it declares in `enqueues`, at each of that job's priority levels, now (SendMessage
    to the level's queue) and two hours ahead (a one-time schedule, which Scheduler delivers to that
    level's queue as the one-time schedule role)."""
    this = test_a_job_enqueues_its_targets_at_every_level_now_and_later
    jobs = sorted(job for (job, feature), test in SCENARIOS.items() if test is this and feature == "run_at")
    assert jobs, "no row of SCENARIOS names this scenario"
    run_at = datetime.now(UTC) + timedelta(hours=2)
    expected: dict[str, int] = {}
    ensure_loaded(JOBS)
    # GIVEN each of those jobs' functions, with their roles
    for job in jobs:
        config = deployment.worker_config(job)
        for target in get_spec(job).enqueues:
            assert target in SAMPLES, f"add a {target} payload to SAMPLES (job {job} enqueues it)"
            spec = get_spec(target)
            # WHEN it enqueues its target at each level, now and two hours ahead
            for priority in spec.priorities or (None,):
                enqueue(target, SAMPLES[target], priority=priority, config=config)
                enqueue(target, SAMPLES[target], priority=priority, run_at=run_at, config=config)
                key = queue_key(target, spec.level_for(priority))
                expected[key] = expected.get(key, 0) + 2
    # AND the schedules' time comes, and Scheduler delivers them as the role they name
    clock.move_to(run_at + timedelta(minutes=1))
    scheduler = LocalScheduler(
        [],
        queue_urls={},
        one_time_group=deployment.stack.provisioned.one_time_group,
        config=deployment.scheduler_as_service(deployment.one_time_schedules),
    )
    sent = scheduler.run_due()
    # THEN each level's queue holds what was sent to it now and later
    assert len(sent) == sum(expected.values()) // 2
    sqs = deployment.harness.client("sqs")
    for key, count in expected.items():
        url = deployment.stack.provisioned.queues[key].queue_url
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
        assert int(attributes["Attributes"]["ApproximateNumberOfMessages"]) == count, key


def test_a_reviewed_video_waits_for_its_approval_then_its_chain_goes_on(deployment, encoder, clock):
    """transcode_video's own code, durable (issue 28): each format a step (a checkpoint on its record),
    then a wait for signal `approval` whose timeout, two hours on, is a one-time schedule of its own;
    the operator's review (`review_video`, what `lambdajobs signal` sends) wakes it."""
    producer, continuer = deployment.producer_config(), deployment.continuer_runner()
    operator = deployment.operator_config()
    # GIVEN a video published by a producer, to be reviewed within two hours
    wid = video.publish_video(
        "v2",
        "s3://in/v2.mov",
        uploader_id="user-7",
        formats=["720p", "4k"],
        review_timeout_seconds=7200,
        config=producer,
    )
    job_id = video.transcode_job_id("v2")
    # WHEN transcode_video's function encodes it, with its role: it waits for the review, no compute
    deployment.runner("transcode_video").drain()
    status = get_status(job_id, config=producer)
    assert (status.state, status.waiting_for) == ("waiting_signal", video.APPROVAL), status.error
    assert sorted(s.name for s in status.steps) == ["encode-4k", "encode-720p"]  # (a stopped clock)
    group = deployment.stack.provisioned.one_time_group
    [wake_up] = deployment.harness.client("scheduler").list_schedules(GroupName=group)["Schedules"]
    assert wake_up["Name"].startswith("transcode_video-w")
    # AND the operator approves it (the signal, and its wake-up to transcode_video's queue)
    assert video.review_video(job_id, approved=True, reviewer="ada", config=operator)
    deployment.runner("transcode_video").drain()
    for job in CHAIN[1:]:
        continuer.drain()
        deployment.runner(job).drain()
    continuer.drain()
    # THEN the video was published, its formats encoded once each, and the uploader told
    status = get_status(job_id, config=producer)
    assert status.state == "succeeded", status.error
    assert status.result["published"] is True and status.result["review"]["reviewer"] == "ada"
    assert sorted(s.name for s in status.steps) == ["encode-4k", "encode-720p", "publish"]
    told = get_status(f"{wid}.2.0", config=producer)
    assert told.state == "succeeded", told.error
    assert "published in 4k, 720p" in told.result["message"]
    creates = {c.action for c in deployment.calls_by(deployment.worker("transcode_video")) if c.allowed}
    assert {"scheduler:CreateSchedule", "dynamodb:UpdateItem"} <= creates
    assert {"dynamodb:UpdateItem", "sqs:SendMessage"} <= {
        c.action for c in deployment.calls_by(deployment.operator) if c.allowed
    }


def test_the_continuer_sends_a_stage_again_reading_its_members_records_under_its_role(deployment, sender):
    """Not a job's path: the continuer's, after a crash between sending a stage and marking it sent.
    It then reads the members' records (BatchGetItem) and sends only those with none."""
    producer, continuer = deployment.producer_config(), deployment.continuer_runner()
    # GIVEN a chain of two mails whose first has been sent
    mail = SendEmail(to="ada@example.com", subject="Hi", body="Hello")
    wid = chain(sig("send_email", mail), sig("send_email", mail)).enqueue(
        workflow_id="resend", config=producer
    )
    deployment.runner("send_email").drain()
    # AND a claim on stage 0 by a continuer that crashed before marking the stage advanced
    deployment.harness.client("dynamodb").update_item(
        TableName=deployment.stack.provisioned.table,
        Key={"id": {"S": workflow_key(wid)}},
        UpdateExpression="SET claim_0 = :crashed, claim_until_0 = :past, claims_0 = :one",
        ExpressionAttributeValues={":crashed": {"S": "crashed"}, ":past": {"N": "0"}, ":one": {"N": "1"}},
    )
    # WHEN the notice comes to the continuer, with its role
    continuer.drain()
    # THEN it read the next stage's records in a batch, and sent the step that has none
    reads = [c for c in deployment.calls_by(deployment.continuer) if c.action == "dynamodb:BatchGetItem"]
    assert reads and all(c.allowed for c in reads)
    deployment.runner("send_email").drain()
    continuer.drain()
    assert get_workflow(wid, config=producer).state == "succeeded"
    assert sender.sent == ["ada@example.com", "ada@example.com"]


# -- the table, and its check ---------------------------------------------------------------------

# The scenarios, by the path they run (names without `test_`: pytest collects each test once).
publish_video_chain = test_publish_video_runs_its_chain_each_step_under_its_own_role
campaign_chord = test_a_campaign_chord_calls_back_campaign_report_which_sends_the_summary
enqueued_now_and_later = test_a_job_enqueues_its_targets_at_every_level_now_and_later
send_email_runs = workers.test_send_email_succeeds_under_its_role
# its second high email waits for the provider's quota: the rate limiter's item, and a hand-back
send_email_high = workers.test_send_email_at_high_priority_runs_waits_and_dead_letters_on_its_own_level
transcode_runs = workers.test_transcode_video_reports_progress_under_its_role
daily_report_runs = workers.test_daily_report_reads_stats_writes_its_prefix_and_enqueues_emails
daily_report_cron = schedules.test_a_cron_slot_is_delivered_as_its_schedule_role_and_the_report_runs
reviewed_video = test_a_reviewed_video_waits_for_its_approval_then_its_chain_goes_on

#: (job, feature) -> the IAM test that runs that path (features: `tests.iam.example_paths`).
SCENARIOS: dict[tuple[str, str], Callable[..., Any]] = {
    ("send_email", "run"): send_email_runs,
    ("send_email", "priority high"): send_email_high,
    ("send_email", "rate_limit"): send_email_high,
    ("send_email", "searchable"): records.test_a_worker_writes_its_search_entries_and_the_operator_finds_them,
    ("transcode_video", "run"): transcode_runs,
    ("make_thumbnails", "run"): publish_video_chain,
    ("make_thumbnails", "ctx.parent_results"): publish_video_chain,
    ("notify_uploader", "run"): publish_video_chain,
    ("notify_uploader", "ctx.parent_results"): publish_video_chain,
    ("campaign_report", "run"): campaign_chord,
    ("campaign_report", "ctx.workflow"): campaign_chord,
    ("campaign_report", "enqueues send_email"): campaign_chord,
    ("campaign_report", "run_at"): enqueued_now_and_later,
    ("daily_report", "run"): daily_report_runs,
    ("daily_report", "uses bucket"): daily_report_runs,
    ("daily_report", "uses job_stats"): daily_report_runs,
    ("daily_report", "enqueues send_email"): daily_report_runs,
    ("daily_report", "run_at"): enqueued_now_and_later,
    ("daily_report", "schedule"): daily_report_cron,
    ("transcode_video", "ctx.step"): reviewed_video,
    ("transcode_video", "ctx.wait_for_signal"): reviewed_video,
}

#: Features whose grants every job's role has alike, whatever the job declares (any job may be
#: durable, and whether its code is shows in no declaration), or every job's role that declares what
#: the feature needs (`signals a job`: the jobs it enqueues). Each scenario runs the feature under the
#: role of every job of the template it applies to, with a durable body in place of the job's
#: function (tests/iam/test_durable.py), so it is the scenario of (job, feature) for any job of the app
#: that uses the feature, besides the rows of `SCENARIOS` that run a job's own code.
EVERY_JOB: dict[str, tuple[Callable[..., Any], ...]] = {
    "ctx.step": (durable.test_every_job_steps_and_naps_on_its_own_queue_under_its_role,),
    "ctx.sleep": (
        durable.test_every_job_steps_and_naps_on_its_own_queue_under_its_role,
        durable.test_every_job_sleeps_two_hours_through_a_one_time_schedule_of_its_own,
    ),
    "ctx.wait_for_signal": (durable.test_every_job_waits_for_a_signal_the_operator_or_a_producer_sends,),
    SIGNALS_A_JOB: (durable.test_a_job_signals_the_jobs_it_enqueues_under_its_role,),
    # flow control (tests/iam/test_flow_control.py): a running job's check, a declared key, and what
    # a producer or an operator does to any job (`CALL_FEATURES`)
    "ctx.cancelled": (flow.test_every_job_stops_at_ctx_cancelled_once_the_operator_cancels_it,),
    CONCURRENCY_KEY: (flow.test_every_job_waits_for_its_keys_slot_then_takes_and_releases_it,),
    "tenant": (
        flow.test_a_producer_enqueues_for_a_tenant_now_in_a_batch_and_later,
        flow.test_every_job_waits_for_its_keys_slot_then_takes_and_releases_it,  # copies keep it
    ),
    "debounce": (flow.test_every_job_runs_the_last_debounced_enqueue_and_supersedes_the_others,),
    "cancel": (
        flow.test_every_job_drops_a_cancelled_jobs_message,
        flow.test_every_job_stops_at_ctx_cancelled_once_the_operator_cancels_it,
        flow.test_cancelling_a_job_with_no_record_and_a_run_at_job_deletes_its_schedule,
        flow.test_the_operator_cancels_a_parked_job_and_its_wake_up_is_deleted,
    ),
    "cancel_workflow": (flow.test_the_operator_cancels_a_workflow_and_its_members_are_dropped_and_counted,),
}


def _is_an_iam_scenario(test: Callable[..., Any]) -> bool:
    """A test of tests/iam that runs under the template's policies (`deployment`)."""
    return (
        test.__name__.startswith("test_")
        and test.__module__.startswith("tests.iam.test_")
        and "deployment" in inspect.signature(test).parameters
    )


def test_every_job_and_feature_has_an_iam_scenario():
    # GIVEN every (job, feature) of the example app, from its declarations and its jobs' code
    declared = declared_paths(load_jobs(JOBS))
    # THEN each has a scenario (a row, or the feature's for every job), and each row is still a path
    covered = set(SCENARIOS) | {(job, feature) for job, feature in declared if feature in EVERY_JOB}
    missing, stale = sorted(declared - covered), sorted(set(SCENARIOS) - declared)
    assert not missing, f"paths with no IAM scenario: {missing}; add a row to SCENARIOS (and its test)"
    assert not stale, f"SCENARIOS rows that are no path of the app: {stale}; remove them"
    # AND each scenario is a test of tests/iam that runs under the template's policies (`deployment`)
    for path, test in SCENARIOS.items():
        assert _is_an_iam_scenario(test), f"{path}: {test.__name__} is no test of tests/iam under IAM"
    for feature, tests in EVERY_JOB.items():
        assert all(_is_an_iam_scenario(test) for test in tests), feature


def test_every_feature_of_a_jobs_code_has_an_iam_scenario_before_a_job_uses_it():
    # what a job's code may use (its context, signalling a job) needs grants no declaration shows: so
    # each has its scenario already, for whichever job uses it first
    named = {feature for _, feature in SCENARIOS} | set(EVERY_JOB)
    missing = sorted({*CONTEXT_FEATURES.values(), SIGNALS_A_JOB} - named)
    assert not missing, f"features with no IAM scenario: {missing}; add one (EVERY_JOB, or a SCENARIOS row)"


def test_every_flow_control_feature_has_an_iam_scenario_before_a_job_uses_it():
    # a concurrency key, and what a producer or an operator may do to any job (a tenant, a debounce,
    # a cancel): their grants are every job's alike, so their scenarios run under every job's role
    named = {feature for _, feature in SCENARIOS} | set(EVERY_JOB)
    missing = sorted({CONCURRENCY_KEY, *CALL_FEATURES} - named)
    assert not missing, f"features with no IAM scenario: {missing}; add one to EVERY_JOB"


def test_every_jobspec_field_is_a_feature_or_has_no_iam_path():
    unclassified, unknown = unclassified_fields()
    assert not unclassified, (
        f"JobSpec fields {sorted(unclassified)} are not classified: add each to FEATURE_FIELDS (and "
        f"scenarios for its features) or to NO_IAM_PATH with its reason, in tests/iam/example_paths.py"
    )
    assert not unknown, f"tests/iam/example_paths.py classifies {sorted(unknown)}, which JobSpec lacks"


def test_what_a_jobs_code_calls_its_declaration_grants():
    # a job's role reaches only what its declaration names (and its function knows only those
    # resources): code that sends jobs, counts them or writes the bucket without declaring it is
    # denied on AWS, and has no (job, feature) here to bring its scenario
    found = {spec.name: undeclared(spec) for spec in load_jobs(JOBS)}
    assert not {job: problems for job, problems in found.items() if problems}


def _naps(payload: Any, ctx: Any) -> None:
    time.sleep(1)  # a module's sleep: no durable sleep
    if payload.signal:  # an attribute that shares the runtime function's name: no signal sent
        ctx.step("one", print)


def _signals(payload: Any, ctx: Any) -> None:
    ctx.sleep(60)
    signal("other-job", "go")


def test_a_jobs_code_features_are_its_contexts_attributes_and_the_runtime_functions_it_calls():
    assert code_features(_naps) == {"ctx.step"}
    assert code_features(_signals) == {"ctx.sleep", SIGNALS_A_JOB}
    # a job that signals another declares it in enqueues: its role sends to that job's queue only then
    spec = dataclasses.replace(get_spec("send_email"), func=_signals)
    assert undeclared(spec) == ["it signals jobs (signal): declare the jobs it signals in enqueues=(...)"]
    assert undeclared(dataclasses.replace(spec, enqueues=("transcode_video",))) == []
