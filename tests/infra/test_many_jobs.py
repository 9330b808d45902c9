"""An app of many jobs (issue 27) synthesizes within every AWS limit, and grows without moving a job.

`make test` synthesizes a 60-job app (three stacks); `make bench` the 200-job one, timed
(tests/bench). The generated jobs: of every 10, one cron job, one with three priority levels, one
that enqueues 10 others, the rest plain (tests/big_app.py).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lambdajobs.cdk import layout, nag_errors
from lambdajobs.cdk.job_worker import MAX_ENVIRONMENT_CHARACTERS, environment_size
from tests.big_app import synthesize, templates, write_jobs

#: CloudFormation: 500 resources and 1 MB per template (a nested one's too), 200 outputs.
MAX_RESOURCES, MAX_TEMPLATE_BYTES, MAX_OUTPUTS = 500, 1_000_000, 200
#: IAM: a managed policy 6,144 characters, a role's inline policies 10,240 in all (no whitespace).
MANAGED_POLICY_LIMIT, INLINE_POLICIES_LIMIT = 6144, 10_240
#: A deploy-time value in a policy (a table's or role's ARN, a parameter) counted at its longest.
TOKEN = 300
SIZE = 60


@pytest.fixture(scope="module")
def many(tmp_path_factory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("many")
    package = write_jobs(root, "many_jobs_60", SIZE)
    assembly, stack = synthesize(
        root, package, stack="many", outdir=root / "cdk.out", stacks_file=root / "stacks.json"
    )
    return {"assembly": assembly, "stack": stack.lambdajobs, "templates": templates(assembly), "root": root}


def test_the_jobs_spread_over_nested_stacks_and_are_all_deployed(many):
    stack, found = many["stack"], many["templates"]
    assert len(stack.workers) == SIZE
    # the first group in the stack itself, each further one in a nested stack of its own
    assert len(stack.groups) >= 3 and len(stack.job_stacks) == len(stack.groups) - 1
    assert sorted(j for g in stack.groups for j in g) == sorted(stack.workers)
    assert len(found) == len(stack.groups)
    root = found["many.template.json"]
    nested = [r for r in root["Resources"].values() if r["Type"] == "AWS::CloudFormation::Stack"]
    assert len(nested) == len(stack.job_stacks)
    functions = sum(
        1 for t in found.values() for r in t["Resources"].values() if r["Type"] == "AWS::Lambda::Function"
    )
    assert functions == SIZE + 1  # and the continuer


def test_every_template_is_within_cloudformations_limits(many):
    for name, template in many["templates"].items():
        size = len(json.dumps(template, separators=(",", ":")))
        assert len(template["Resources"]) < MAX_RESOURCES, name
        assert size < MAX_TEMPLATE_BYTES, name
        assert len(template.get("Outputs", {})) < MAX_OUTPUTS, name


def test_physical_names_derive_from_the_root_stacks_name(many):
    names = [
        r["Properties"]["QueueName"]
        for t in many["templates"].values()
        for r in t["Resources"].values()
        if r["Type"] == "AWS::SQS::Queue"
    ]
    assert all((isinstance(n, str) and n.startswith("many_")) or n.startswith("many--") for n in names), names
    assert len(names) == len(set(names))


def test_the_resources_of_each_group_are_what_the_layout_counts(many):
    """`layout.job_resources` is at least what a job adds to its template (its composite alarm is
    shared by a run of jobs): the layout fills groups by it, so no template passes 500."""
    stack = many["stack"]
    for index, group in enumerate(stack.groups):
        template = (
            many["templates"]["many.template.json"]
            if index == 0
            else next(t for n, t in many["templates"].items() if f"Jobs{index + 1}" in n)
        )
        counted = sum(layout.job_resources(stack.specs[job]) for job in group)
        actual = len(template["Resources"])
        # beyond its jobs: the root's shared resources; a nested stack's dashboard and composites
        room = layout.ROOT_RESOURCES if index == 0 else layout.MAX_TEMPLATE_RESOURCES - layout.GROUP_RESOURCES
        assert counted - len(group) <= actual <= counted + room, (index, counted, actual)
        assert actual < MAX_RESOURCES


def test_each_function_environment_is_under_4_kb_and_does_not_grow_with_the_jobs(many):
    sizes = []
    for template in many["templates"].values():
        for resource in template["Resources"].values():
            if resource["Type"] != "AWS::Lambda::Function":
                continue
            variables = resource["Properties"]["Environment"]["Variables"]
            # a deploy-time value as CDK would write it in a string: counted at its bound, or as a token
            as_tokens = {k: v if isinstance(v, str) else "${Token[TOKEN.1]}" for k, v in variables.items()}
            sizes.append(environment_size(as_tokens))
            assert not [k for k in variables if "QUEUE" in k or "DLQ" in k]
    assert max(sizes) < 1024 < MAX_ENVIRONMENT_CHARACTERS  # fanout jobs enqueue 10 jobs of 3 levels


#: The pseudo parameters at their longest (a partition "aws-us-gov", a region "ap-southeast-5").
PSEUDO = {"AWS::Partition": 10, "AWS::Region": 14, "AWS::AccountId": 12, "AWS::URLSuffix": 16}


def _policy_size(document: Any) -> int:
    """A policy's characters as IAM counts them (no whitespace), each deploy-time value at its longest:
    a pseudo parameter as `PSEUDO` says, any other reference (an ARN, a parameter) as `TOKEN`."""
    text = json.dumps(document, separators=(",", ":"))
    for name, length in PSEUDO.items():
        text = text.replace(json.dumps({"Ref": name}, separators=(",", ":")), "x" * length)
    text = re.sub(r'\{"(Ref|Fn::GetAtt|Fn::ImportValue)":[^{}]*\}', "x" * TOKEN, text)
    # a Fn::Join's own syntax is not in the policy IAM stores
    return len(text.replace('{"Fn::Join":["",[', "").replace("]]}", ""))


def test_every_iam_policy_is_under_its_size_limit(many):
    for name, template in many["templates"].items():
        inline: dict[str, int] = {}
        for resource in template["Resources"].values():
            props = resource.get("Properties", {})
            if resource["Type"] == "AWS::IAM::ManagedPolicy":
                assert _policy_size(props["PolicyDocument"]) < MANAGED_POLICY_LIMIT, name
            if resource["Type"] == "AWS::IAM::Policy":
                for role in props["Roles"]:
                    key = json.dumps(role)
                    inline[key] = inline.get(key, 0) + _policy_size(props["PolicyDocument"])
        assert inline and max(inline.values()) < INLINE_POLICIES_LIMIT, name


def test_cdk_nag_finds_nothing(many):
    assert nag_errors(many["assembly"]) == []


def test_cfn_lint_finds_nothing_in_the_root_template_or_a_nested_one(many):
    # the root's template and the first nested stack's: every nested stack is written by the same
    # construct from jobs of every kind (tests.big_app.kinds), so one holds every shape they hold; each
    # template costs cfn-lint seconds of CPU
    cfn_lint = Path(sys.executable).parent / "cfn-lint"
    nested = sorted(name for name in many["templates"] if name.endswith(".nested.template.json"))
    assert nested and "many.template.json" in many["templates"]
    paths = [str(Path(many["assembly"].directory) / name) for name in ("many.template.json", nested[0])]
    # W3005: CDK writes a DependsOn that a GetAtt already implies (harmless, not ours to change)
    out = subprocess.run(
        [str(cfn_lint), "--ignore-checks", "W3005", "--", *paths], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]


def _ids_by_template(found: dict[str, dict[str, Any]]) -> dict[str, set[str]]:
    """Each template's resource logical ids, the nested ones keyed by their stack's construct name."""
    out = {}
    for name, template in found.items():
        key = (
            "root"
            if not name.endswith(".nested.template.json")
            else re.sub(r"[0-9A-F]{8}\.nested.*", "", name)
        )
        out[key] = set(template["Resources"])
    return out


def test_an_app_that_gains_a_job_keeps_every_job_where_it_was(tmp_path):
    """30 jobs, then a 31st: every resource of the 30 keeps its template and its logical id (a new one
    would replace the job's queue, and drop its messages), with the 31st named to sort first."""
    stacks_file = tmp_path / "stacks.json"
    write_jobs(tmp_path / "v1", "grow_jobs", 30)
    before, built = synthesize(
        tmp_path / "v1", "grow_jobs", stack="grow", outdir=tmp_path / "out1", stacks_file=stacks_file
    )
    groups_before = built.lambdajobs.groups
    assert len(groups_before) == 2  # the stack itself is full: a nested stack holds the rest
    # v2: the same jobs and one more, whose name sorts before every other
    write_jobs(tmp_path / "v2", "grow_jobs", 30)
    module = tmp_path / "v2" / "grow_jobs" / "jobs_00.py"
    new_job = "\n\n@job(timeout_seconds=30)\ndef aaa_new(payload: Item, ctx: JobContext) -> dict:\n"
    new_job += "    return {}\n"
    module.write_text(module.read_text() + new_job)
    after, built_after = synthesize(
        tmp_path / "v2", "grow_jobs", stack="grow", outdir=tmp_path / "out2", stacks_file=stacks_file
    )
    groups_after = built_after.lambdajobs.groups
    assert [g for g in groups_after[: len(groups_before)]][:-1] == groups_before[:-1]
    assert groups_after[-1][: len(groups_before[-1])] == groups_before[-1] and "aaa_new" in groups_after[-1]
    ids_before, ids_after = _ids_by_template(templates(before)), _ids_by_template(templates(after))
    for template, ids in ids_before.items():
        kept = {i for i in ids if "Aaa" not in i}
        assert kept <= ids_after[template], (template, sorted(kept - ids_after[template])[:5])
    # and the file says where each job is, for the next synth (commit it)
    assert json.loads(stacks_file.read_text())["stacks"]["grow"] == groups_after


def test_synth_lists_each_nested_stacks_template(many):
    """`lambdajobs synth` prints every template it wrote: the stack's and its nested stacks'."""
    from lambdajobs.upgrade import nested_template_files

    root = Path(many["assembly"].directory) / "many.template.json"
    nested = {path.name for path in nested_template_files(root)}
    assert nested == set(many["templates"]) - {"many.template.json"} and len(nested) == len(
        many["stack"].job_stacks
    )
