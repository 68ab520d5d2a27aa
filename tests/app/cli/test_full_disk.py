"""A disk that fills up during ``ragtime ingest`` loses nothing (issue 13, faults): the ingest
stops with one line naming the cause, the collection's previous sources still serve, and its
index and chunk table agree.

The disk is a real one: a 1 MiB tmpfs mounted on the data dir in the CLI's own mount namespace
(``unshare -m``, so the mount ends with the process; mounting needs root, as CI runs). A filler
file takes all but about 160 KiB, and the ingest of the demo corpus runs out part-way. The CLI
embeds with ``HashEmbedder`` (``tests/helpers/cli_driver.py``): the test is about the writes."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.ports import free_port

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parents[3]
CORPUS = REPO / "demo" / "corpus"

SCRIPT = r"""
set -u
D="$1"
mount -t tmpfs -o size=1m tmpfs "$D" || exit 97
drive() { "$PY" -m tests.helpers.cli_driver "$@"; }
drive ingest "$DOCS" --collection notes 2>/dev/null >/dev/null || exit 98
dd if=/dev/zero of="$D/filler" bs=16k 2>/dev/null
truncate -s -160K "$D/filler"
drive ingest "$CORPUS" --collection notes > "$OUT/ingest.out" 2> "$OUT/ingest.err"
echo $? > "$OUT/ingest.rc"
drive check notes "lists hold items" > "$OUT/check.json" 2> "$OUT/check.err"
"""


def in_private_mounts(
    script: str, mount_dir: Path, env: dict[str, str], *, timeout_s: float
) -> subprocess.CompletedProcess[str]:
    """``sh -c script sh mount_dir`` in a mount namespace of its own (``unshare -m``), so that
    the tmpfs the script mounts on ``$1`` ends with it. Skips where unshare is missing or the
    script cannot mount (it exits 97 then)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("needs unshare (util-linux)")
    done = subprocess.run(
        [unshare, "-m", "--propagation", "private", "sh", "-c", script, "sh", str(mount_dir)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    if done.returncode == 97:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    return done


def script_env(docs: Path, out: Path) -> dict[str, str]:
    """A script's environment: the Python to drive the CLI with (``$PY``), documents to ingest
    (``$DOCS``, ``$CORPUS``) and where its outputs go (``$OUT``)."""
    return {
        **os.environ,
        "PY": sys.executable,
        "PYTHONPATH": str(REPO),
        "DOCS": str(docs),
        "CORPUS": str(CORPUS),
        "OUT": str(out),
    }


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root (CI runs as root)")
def test_a_full_disk_during_ingest_loses_nothing(tmp_path: Path) -> None:
    data, out, docs = tmp_path / "data", tmp_path / "out", tmp_path / "docs"
    for path in (data, out, docs):
        path.mkdir()
    (docs / "lists.md").write_text("# Lists\n\nLists hold items in order.\n")
    (docs / "dicts.md").write_text("# Dicts\n\nA dict maps keys to values.\n")
    env = script_env(docs, out) | {"RAGTIME_DATA_DIR": str(data)}
    done = in_private_mounts(SCRIPT, data, env, timeout_s=300)
    assert done.returncode == 0, done.stderr
    err = (out / "ingest.err").read_text()
    assert (out / "ingest.rc").read_text().strip() == "1"
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, err
    assert f"cannot write the index in {data / 'store'}:" in errors[0]
    assert errors[0].endswith(("No space left on device", "database or disk is full")), errors[0]
    # The progress lines (the last one printed as the ingest stopped) say how far it got.
    files_done = [int(n) for n in re.findall(r"^files (\d+)/\d+,", err, re.MULTILINE)]
    assert files_done and max(files_done) >= 1, (
        "the disk filled part-way through, not before the first file"
    )
    state = json.loads((out / "check.json").read_text())
    assert state["problems"] == {}  # every index loads and matches
    assert "lists.md" in state["sources"]  # the previous sources still serve
    assert state["collections"]["notes"] >= 2
    assert not (data / "store").exists()  # it all lived on the tmpfs, gone with the mount


FAISS_SCRIPT = r"""
set -u
mount -t tmpfs -o size=64k tmpfs "$1" || exit 97
"$PY" - "$1" <<'PY'
import errno, sys
from pathlib import Path
import faiss, numpy as np
from retrieval.store.publishing import write_faiss_index
index = faiss.IndexFlatIP(384)
index.add(np.ones((2000, 384), dtype=np.float32))
try:
    write_faiss_index(index, Path(sys.argv[1]) / "index.faiss")
except OSError as exc:
    print(errno.errorcode[exc.errno], exc.strerror, exc.filename)
PY
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root (CI runs as root)")
def test_faiss_running_out_of_disk_is_an_os_error_naming_the_file(tmp_path: Path) -> None:
    """faiss reports a failed write as a RuntimeError; the store raises it as the OSError it is,
    which every command turns into one line naming the path and the cause."""
    env = {**os.environ, "PY": sys.executable, "PYTHONPATH": str(REPO)}
    done = in_private_mounts(FAISS_SCRIPT, tmp_path, env, timeout_s=120)
    assert done.stdout.strip() == f"ENOSPC No space left on device {tmp_path / 'index.faiss'}", (
        done.stdout + done.stderr
    )


COMMANDS_SCRIPT = r"""
set -u
mount -t tmpfs -o size=1m tmpfs "$1" || exit 97
export RAGTIME_DATA_DIR="$1/data"
drive() { "$PY" -m tests.helpers.cli_driver "$@"; }
drive keys create first > /dev/null 2>&1 || exit 98
drive ingest "$DOCS" --collection notes > /dev/null 2>&1 || exit 98
dd if=/dev/zero of="$1/filler" bs=4k 2>/dev/null  # until the disk is full
run() {
  name="$1"; shift
  drive "$@" > "$OUT/$name.out" 2> "$OUT/$name.err"; echo $? > "$OUT/$name.rc"
}
run keys-create keys create second
run keys-revoke keys revoke 1
run ingest ingest "$CORPUS" --collection more
run rebuild ingest "$DOCS" --collection notes --rebuild
run setup-demo setup-demo
"""
#: Each command run on the full disk, by the name its output is kept under.
FULL_DISK_COMMANDS = ("keys-create", "keys-revoke", "ingest", "rebuild", "setup-demo")
DISK_CAUSES = ("No space left on device", "database or disk is full", "disk I/O error")


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root (CI runs as root)")
def test_every_command_on_a_full_disk_says_one_line(tmp_path: Path) -> None:
    """Issue 24 §5: on a full disk each command that writes (keys, ingest, a rebuild, the demo
    set-up) exits 1 with one line naming the path and the cause, and no traceback."""
    mount, out, docs = tmp_path / "mnt", tmp_path / "out", tmp_path / "docs"
    for path in (mount, out, docs):
        path.mkdir()
    (docs / "lists.md").write_text("# Lists\n\nLists hold items in order.\n")
    done = in_private_mounts(COMMANDS_SCRIPT, mount, script_env(docs, out), timeout_s=300)
    assert done.returncode == 0, done.stderr
    for name in FULL_DISK_COMMANDS:
        err = (out / f"{name}.err").read_text()
        assert (out / f"{name}.rc").read_text().strip() == "1", (name, err)
        assert "Traceback" not in err, (name, err)
        errors = [line for line in err.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1, (name, err)
        assert f"{mount}/data" in errors[0], (name, errors[0])  # names the path
        assert errors[0].endswith(DISK_CAUSES), (name, errors[0])  # and the cause


EXPORT_SCRIPT = r"""
set -u
mount -t tmpfs -o size=4m tmpfs "$1" || exit 97
mkdir "$1/ro" && mount -t tmpfs -o ro,size=64k tmpfs "$1/ro" || exit 97
run() {
  name="$1"; shift
  "$PY" -m app.cli "$@" > "$OUT/$name.out" 2> "$OUT/$name.err"; echo $? > "$OUT/$name.rc"
}
serve() {  # until /readyz answers, then its body; the log and the exit status after a SIGTERM
  name="$1"
  "$PY" -m app.cli serve --port "$PORT" --log-level warning > "$OUT/$name.out" 2> "$OUT/$name.err" &
  pid=$!
  "$PY" -m tests.helpers.readyz "http://127.0.0.1:$PORT" > "$OUT/$name.readyz"
  kill -TERM "$pid"; wait "$pid"; echo $? > "$OUT/$name.rc"
}
# A 4 MiB disk: the first thing to fill it is the embedder's ONNX export (about 90 MB).
export RAGTIME_DATA_DIR="$1/data"
run ingest-full ingest "$DOCS" --collection notes
run setup-demo-full setup-demo
serve serve-full
# A cache directory that cannot be written (a read-only file system, even for root).
export RAGTIME_DATA_DIR="$1/data2" RAGTIME_EMBEDDING_CACHE_DIR="$1/ro/models"
run ingest-ro ingest "$DOCS" --collection notes
run setup-demo-ro setup-demo
serve serve-ro
"""


@pytest.mark.slow  # exports the real MiniLM with torch, three times
@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root (CI runs as root)")
def test_the_onnx_export_on_a_full_disk_or_a_read_only_cache_is_one_line(
    tmp_path: Path,
) -> None:
    """Issue 41 §2: the embedder's ONNX export fails (``RetrievalError``, naming the setting to
    change): ``ingest`` and ``setup-demo`` say so in one line and exit 1; ``serve`` logs one
    line, no traceback, and stays up not ready (``/readyz`` 503)."""
    mount, out, docs = tmp_path / "mnt", tmp_path / "out", tmp_path / "docs"
    for path in (mount, out, docs):
        path.mkdir()
    (docs / "lists.md").write_text("# Lists\n\nLists hold items in order.\n")
    env = script_env(docs, out) | {"PORT": str(free_port())}
    env = {k: v for k, v in env.items() if not k.startswith("RAGTIME_")} | {
        "RAGTIME_EMBEDDING_BACKEND": "onnx-int8",
        "RAGTIME_GENERATION_BACKEND": "null",
        "RAGTIME_WORKERS": "1",
    }
    done = in_private_mounts(EXPORT_SCRIPT, mount, env, timeout_s=600)
    assert done.returncode == 0, done.stderr
    for case, cause in (("full", "No space left on device"), ("ro", "Read-only file system")):
        for command in ("ingest", "setup-demo"):
            err = (out / f"{command}-{case}.err").read_text()
            assert (out / f"{command}-{case}.rc").read_text().strip() == "1", (command, err)
            assert "Traceback" not in err, (command, case, err)
            errors = [line for line in err.splitlines() if line.startswith("error: ")]
            assert len(errors) == 1, (command, case, err)
            assert errors[0].startswith("error: cannot write the ONNX export"), errors[0]
            assert cause in errors[0] and "RAGTIME_EMBEDDING_CACHE_DIR" in errors[0], errors[0]
        log = (out / f"serve-{case}.err").read_text()
        assert "Traceback" not in log, (case, log)
        said = [
            line
            for line in log.splitlines()
            if line.startswith("ERROR") and "cannot write the ONNX export" in line
        ]
        assert len(said) == 1 and cause in said[0], (case, log)
        assert "NOT ready" in log, log  # and the start-up's summary names the embedder's state
        readyz = json.loads((out / f"serve-{case}.readyz").read_text())
        assert readyz == {"status": 503, "body": {"ready": False}}, readyz
