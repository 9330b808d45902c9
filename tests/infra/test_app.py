"""This project's CDK entry point (`python app.py`, what `make synth` and `cdk synth` run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_bad_option_fails_synth_in_one_line(tmp_path):
    # GIVEN a context option naming a jobs package that does not exist
    env = {
        **os.environ,
        "CDK_OUTDIR": str(tmp_path),
        "CDK_CONTEXT_JSON": json.dumps({"jobs": "no_such_jobs"}),
    }
    out = subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True)
    # THEN synth stops with one line that names it, not a traceback
    assert out.returncode == 1 and "Traceback" not in out.stderr
    [line] = out.stderr.strip().splitlines()
    assert line.startswith(
        "error: jobs module 'no_such_jobs' is not importable: not on sys.path, nor in the project "
        f"folder {ROOT} "
    ) and line.endswith("or install it (pip install -e .).")
