"""Rehearse the Dockerfile where no Docker engine runs: the image's own steps, on this machine.

    python docker/rehearse.py [--torch torch==2.13.0] [--python python3.11] [--keep]

It reads the Dockerfile and does what ``docker build`` and ``docker run`` would, as far as a machine
without an engine can:

1. copies exactly what its ``COPY`` lines name (and nothing else of the checkout) into a fresh app
   folder, the image's ``WORKDIR``;
2. creates a fresh virtual environment and runs its ``RUN`` lines' ``pip install`` commands there, in
   that folder: torch first (``--torch``: the PyTorch CPU index the image uses is not reachable
   from here, so it takes this machine's pin), then the package with its extras;
3. sets the image's ``ENV`` (its ``/data`` volume and ``WORKDIR`` mapped to temp folders, its port
   to a free one) and a fresh token, as ``docker run -e ADLREC_SERVICE_TOKEN=...`` does;
4. starts its ``CMD`` and runs its ``HEALTHCHECK`` command until it passes (within the start period);
5. checks that the token guards a write (401 without it, 200 with it) and that the web UI is served.

Prints each step; exits 0 when all passed.  What it cannot check: the base image, the ``useradd``
and ``chown`` parts of ``RUN`` (they need the image's root filesystem; printed as skipped), and the
PyTorch CPU index itself.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IGNORED = ("__pycache__", "*.egg-info")  # what .dockerignore keeps out of the copied folders


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), rest.strip()))
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def step(msg: str) -> None:
    print(f"== {msg}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dockerfile", type=Path, default=ROOT / "Dockerfile")
    ap.add_argument("--torch", default="torch==2.13.0", help="the torch requirement to install (default: %(default)s)")
    ap.add_argument("--python", default=sys.executable, help="the interpreter of the venv (the image: python 3.11)")
    ap.add_argument("--keep", action="store_true", help="keep the temp folder (its path is printed)")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="adlrec-rehearse-"))
    proc = None
    try:
        ins = instructions(args.dockerfile)
        workdir = next(a for op, a in ins if op == "WORKDIR")
        app, data, venv = tmp / "app", tmp / "data", tmp / "venv"
        app.mkdir()
        data.mkdir()
        port = free_port()

        def mapped(value: str) -> str:
            """An image path or port, as it is on this machine."""
            value = re.sub(rf"^{re.escape(workdir)}(?=/|$)", str(app), value)
            value = re.sub(r"^/data(?=/|$)", str(data), value)
            return value.replace("8470", str(port))

        env = {k: v for k, v in os.environ.items() if not k.startswith(("ADLREC_", "MLFLOW_"))}
        build_args: dict[str, str] = {}
        step(f"{args.dockerfile.name}: {len(ins)} instructions; image folders in {tmp}")
        subprocess.run([args.python, "-m", "venv", str(venv)], check=True)
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        health: str | None = None
        start_period = ""
        cmd: list[str] | None = None
        for op, a in ins:
            if op == "ARG":
                k, _, v = a.partition("=")
                build_args[k] = v
            elif op == "ENV":
                for pair in shlex.split(a):
                    k, _, v = pair.partition("=")
                    env[k] = mapped(v)
            elif op == "COPY":
                *srcs, dst = shlex.split(a)
                target = app / dst
                for src in srcs:
                    s = ROOT / src
                    if s.is_dir():  # a folder's contents, as docker copies them
                        shutil.copytree(s, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*IGNORED))
                    elif dst.endswith("/"):
                        target.mkdir(parents=True, exist_ok=True)
                        shutil.copy2(s, target / s.name)
                    else:
                        target.parent.mkdir(parents=True, exist_ok=True)
                        shutil.copy2(s, target)
                step(f"COPY {a}")
            elif op == "RUN":
                for part in (p.strip() for p in a.split("&&")):
                    words = shlex.split(part)
                    if not words or words[0] != "pip":
                        step(f"RUN {part}: skipped (needs the image's root filesystem)")
                        continue
                    if "--index-url" in words:  # the PyTorch CPU index: not reachable here
                        step(f"RUN {part}: {args.torch} from this machine's index instead")
                        words = ["pip", "install", args.torch]
                    words = [build_args.get(w[1:], w) if w.startswith("$") else w for w in words]
                    step(f"RUN {' '.join(words)}")
                    subprocess.run([str(venv / "bin" / "pip"), *words[1:], "-q"], cwd=app, env=env, check=True)
            elif op == "HEALTHCHECK":
                start_period, _, health = a.partition(" CMD ")
                health = health.replace("8470", str(port))
            elif op == "CMD":
                cmd = json.loads(a) if a.startswith("[") else ["sh", "-c", a]

        assert cmd is not None and health is not None, "the Dockerfile has no CMD or no HEALTHCHECK"
        token = secrets.token_hex(16)
        env["ADLREC_SERVICE_TOKEN"] = token
        step(f"CMD {cmd} on {env.get('ADLREC_SERVICE_HOST')}:{port}, data in {env.get('ADLREC_DATA_DIR')}")
        log = open(tmp / "service.log", "w")
        proc = subprocess.Popen(cmd, cwd=app, env=env, stdout=log, stderr=subprocess.STDOUT)
        m = re.search(r"--start-period=(\d+)s", start_period)
        period = float(m.group(1)) if m else 30.0  # docker's default start period is 0; give it time
        deadline, passed = time.monotonic() + period, False
        while time.monotonic() < deadline and proc.poll() is None:
            if subprocess.run(["sh", "-c", health], env=env, capture_output=True).returncode == 0:
                passed = True
                break
            time.sleep(1)
        if not passed:
            step(f"HEALTHCHECK failed (service {'exited' if proc.poll() is not None else 'running'}); its log:")
            print((tmp / "service.log").read_text()[-3000:])
            return 1
        step("HEALTHCHECK passed")
        url = f"http://127.0.0.1:{port}/nodes/rehearsal"
        body = json.dumps({"cores": 4, "memory_mb": 1000}).encode()
        codes = []
        for auth in ({}, {"Authorization": f"Bearer {token}"}):
            req = urllib.request.Request(url, body, {"Content-Type": "application/json", **auth}, method="PUT")
            try:
                codes.append(urllib.request.urlopen(req, timeout=5).status)
            except urllib.error.HTTPError as e:
                codes.append(e.code)
        ok = codes == [401, 200]
        step(f"PUT /nodes without the token: {codes[0]}, with it: {codes[1]} ({'as expected' if ok else 'WRONG'})")
        try:  # the web UI, from the copy the wheel installed (the image sets no ADLREC_SERVICE_WEBAPP_DIR)
            page = urllib.request.urlopen(f"http://127.0.0.1:{port}/ui/", timeout=5)
            ui = page.status == 200 and b"<title>adlrec" in page.read()
        except urllib.error.HTTPError:
            ui = False
        step(f"GET /ui/: {'the web UI' if ui else 'NO web UI'}")
        ok = ok and ui
        step("rehearsal passed" if ok else "rehearsal FAILED")
        return 0 if ok else 1
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
