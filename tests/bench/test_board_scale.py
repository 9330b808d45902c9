"""`make bench-board` works: the board and CLI bench at a small seed starts the local stack and the
board, measures every page and CLI read, and writes its report. No timing is asserted here: the
budget lives in the bench (`bench.board_scale.BUDGET_SECONDS`) and docs/reports/board-scale.md."""

from __future__ import annotations

import json

from bench import board_scale
from bench.board_seed import seed
from lambdajobs.local.stack import LocalStack
from lambdajobs.ops import queue_health
from lambdajobs.runtime import records


def test_the_quick_bench_measures_every_board_route_and_cli_read_and_writes_its_report(tmp_path):
    out = tmp_path / "board_scale.json"
    board_scale.main(["--quick", "--out", str(out), "--budget", "1000"])
    found = json.loads(out.read_text())
    assert found["run"]["commit"] is not None and found["run"]["machine"]["cpus"]
    assert found["size"]["records"] == 120 and found["size"]["dead_letters"] == 30
    pages = {t["name"] for t in found["timings"] if t["kind"] == "page"}
    assert set(board_scale.board_routes()) <= pages  # every GET route, taken from the app at run time
    measured = [t for t in found["timings"] if t["seconds"]]
    assert {"/", "/dead-letters/{key}", "/jobs/{job}"} <= {t["name"] for t in measured}
    assert any(t["kind"] == "cli" and t["name"] == "queues" and t["seconds"] for t in found["timings"])
    assert all(len(t["seconds"]) == 1 for t in measured)  # --quick: one round
    assert "| what | median s | max s |" in "\n".join(board_scale.table(found))


def test_the_seed_writes_records_the_readers_find_and_letters_in_the_dlqs():
    with LocalStack("handlers", stack="seeded", port=0) as local:
        seeded = seed(local.config, local.specs, records=60, dead_letters=20, unrecorded=4)
        assert sum(seeded.records.values()) == 60 and seeded.records["dead"] == 16
        assert sum(seeded.letters.values()) == 20 and seeded.unrecorded == 4
        dead = records.get_status(seeded.dead_ids["send_email"], config=local.config)
        assert dead.state == "dead" and dead.error and dead.error["type"] and dead.attempts == 5
        listed = records.list_jobs("send_email", "dead", limit=50, config=local.config)
        assert seeded.dead_ids["send_email"] in {s.job_id for s in listed.items}
        queues = local.provisioned.queues.values()  # every priority level's DLQ too
        assert (
            sum(queue_health(q.job, q.queue_url, q.dlq_url, config=local.config).dlq_depth for q in queues)
            == 20
        )
