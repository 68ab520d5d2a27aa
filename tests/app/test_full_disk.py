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

REPO = Path(__file__).resolve().parents[2]
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
from retrieval.snapshot_writer import write_faiss_index
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
