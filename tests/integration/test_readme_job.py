"""The complete model.py in the README is a working job: extracted and profiled as written."""

from __future__ import annotations

import json
import re
from pathlib import Path

from adlrec.cli import main

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_job() -> str:
    text = README.read_text()
    section = text[text.index("## The job contract") :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the README's job contract section has no python block"
    return match.group(1)


def test_readme_model_py_profiles(tmp_path, capsys):
    path = tmp_path / "my_model.py"
    path.write_text(readme_job())
    args = [
        "profile",
        str(path),
        "--device",
        "emulate:2",
        "--budget",
        "0.3",
        "--max-workers",
        "1",
        "--json",
        "--no-log",
        "--data-dir",
        str(tmp_path / "d"),
    ]
    assert main(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["workload"] == "my-job"
    assert [p["workers"] for p in data["points"]] == [0, 1]
    assert all(p["throughput"] > 0 for p in data["points"])
    assert data["baseline"]["fetch_method"].startswith("posix_fadvise")
