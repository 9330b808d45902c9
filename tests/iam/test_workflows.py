"""Workflows under the template's IAM policies: a producer (the producer policy) enqueues a chain and a
chord and reads them; the workers (their roles) run the members and send their notices; the continuer
(its role) sends each next stage. Any call the template does not allow fails the test."""

from __future__ import annotations

from handlers.emails import SendEmail
from lambdajobs.runtime.workflow import chain, chord, get_workflow, group, sig


def mail(i: int) -> SendEmail:
    return SendEmail(to=f"u{i}@example.com", subject="Hi", body="Hello")


def test_a_chain_and_a_chord_run_under_the_templates_policies(deployment, sender):
    producer, continuer = deployment.producer_config(), deployment.continuer_runner()
    # GIVEN a producer that knows only the stack's name
    # WHEN it enqueues a chain of three mails and a chord of three mails and a callback
    steps = chain(*(sig("send_email", mail(i)) for i in range(3)))
    wid = steps.enqueue(workflow_id="wf-chain", config=producer)
    fan = chord(group(sig("send_email", mail(i)) for i in range(3, 6)), sig("send_email", mail(6)))
    cid = fan.enqueue(workflow_id="wf-chord", config=producer)
    # THEN it reads the first stages sent (its item marked, the members' records read in a batch)
    assert get_workflow(wid, config=producer).stages[0].sent
    # AND workers and the continuer, each with its own role, carry both to the end
    for _ in range(4):
        deployment.runner("send_email").drain()
        continuer.drain()
    assert {get_workflow(w, config=producer).state for w in (wid, cid)} == {"succeeded"}
    assert len(sender.sent) == 7
    actions = {c.action for c in deployment.calls_by(deployment.continuer)}
    assert {"dynamodb:GetItem", "dynamodb:UpdateItem", "sqs:SendMessage", "sqs:ReceiveMessage"} <= actions
    # the workflow's items were created (in one transaction: its Puts authorized as dynamodb:PutItem)
    assert "dynamodb:TransactWriteItems" in {c.action for c in deployment.calls_by(deployment.producer)}
