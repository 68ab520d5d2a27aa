"""CLI errors name the path and the cause in one line, with no traceback (issue 13, finding 8:
on a read-only data dir ``ragtime keys create`` and ``ragtime ingest`` printed tracebacks).

A read-only data dir is a real one: as root (CI runs as root), where file modes stop nothing, the
CLI runs in its own mount namespace with the data dir bind-mounted read-only (``unshare -m``; the
mount ends with the process); as another user, the dir's mode is 0555."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cli import commands as cli
from app.pipeline import services
from app.settings import get_settings
from inference.errors import BackendUnavailable
from retrieval.errors import BrokenIndex, RetrievalError
from tests.fakes.hash_embedder import HashEmbedder
from tracing.budget.errors import BudgetInfeasible, DeadlinePassed

REPO = Path(__file__).resolve().parents[3]
READ_ONLY_CAUSES = ("Read-only file system", "Permission denied")


def run_on_read_only(data_dir: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``ragtime *argv`` in a subprocess whose ``data_dir`` cannot be written."""
    env = {**os.environ, "RAGTIME_DATA_DIR": str(data_dir), "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "app.cli", *argv]
    if os.geteuid() != 0:
        data_dir.chmod(0o555)
        try:
            return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        finally:
            data_dir.chmod(0o755)
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("needs unshare (util-linux) to mount the data dir read-only as root")
    script = 'mount --bind -o ro "$1" "$1" || exit 97; shift; exec "$@"'
    done = subprocess.run(
        [
            unshare,
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
            "sh",
            str(data_dir),
            *command,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode == 97 or "unshare failed" in done.stderr:
        pytest.skip(f"cannot bind-mount read-only here: {done.stderr.strip()}")
    return done


def one_line_error(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, stderr
    return errors[0]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A data dir holding one key, made by the CLI."""
    path = tmp_path / "data"
    env = {**os.environ, "RAGTIME_DATA_DIR": str(path), "PYTHONPATH": str(REPO)}
    subprocess.run(
        [sys.executable, "-m", "app.cli", "keys", "create", "first"],
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    return path


@pytest.mark.process
def test_keys_create_on_a_read_only_data_dir(data_dir: Path) -> None:
    before = (data_dir / "keys.sqlite3").read_bytes()
    done = run_on_read_only(data_dir, "keys", "create", "second")
    assert done.returncode == 1
    error = one_line_error(done.stderr)
    assert f"cannot write the key store in {data_dir}:" in error
    assert error.endswith(READ_ONLY_CAUSES), error
    assert done.stdout == ""  # no secret printed for a key that was not stored
    assert (data_dir / "keys.sqlite3").read_bytes() == before


@pytest.mark.process
def test_ingest_on_a_read_only_data_dir(data_dir: Path, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "lists.md").write_text("# Lists\n\nA list holds items in order.\n")
    done = run_on_read_only(data_dir, "ingest", str(docs))
    assert done.returncode == 1
    error = one_line_error(done.stderr)
    assert f"cannot write the index in {data_dir / 'store'}:" in error
    assert error.endswith(READ_ONLY_CAUSES), error
    assert not (data_dir / "store").exists()


@pytest.fixture
def cli_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The CLI in process, embedding with ``HashEmbedder``; yields a plain file."""
    monkeypatch.setattr(services, "default_embedder", lambda settings: HashEmbedder())
    get_settings.cache_clear()
    file = tmp_path / "a-file"
    file.write_text("not a directory\n")
    yield file
    get_settings.cache_clear()


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["keys", "create", "ops"], "cannot write the key store in {file}: it is not a directory"),
        (["keys", "list"], "cannot read the key store in {file}: it is not a directory"),
        (["ingest", "{docs}"], "cannot write the index in {file}/store: Not a directory"),
        (["setup-demo"], "cannot write the demo set-up in {file}: it is not a directory"),
    ],
)
def test_a_data_dir_that_is_a_file(
    cli_env: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    says: str,
) -> None:
    monkeypatch.setenv("RAGTIME_DATA_DIR", str(cli_env))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\ntext\n")
    assert cli.main([a.format(docs=docs) for a in argv]) == 1
    assert one_line_error(capsys.readouterr().err) == "error: " + says.format(file=cli_env)


def test_a_data_dir_under_a_file(
    cli_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RAGTIME_DATA_DIR", str(cli_env / "data"))
    assert cli.main(["keys", "create", "ops"]) == 1
    error = one_line_error(capsys.readouterr().err)
    assert error == f"error: cannot write the key store in {cli_env / 'data'}: Not a directory"


def test_a_missing_path_to_ingest(
    cli_env: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("RAGTIME_DATA_DIR", str(tmp_path / "data"))
    assert cli.main(["ingest", str(tmp_path / "nowhere")]) == 1
    error = one_line_error(capsys.readouterr().err)
    assert error == f"error: {tmp_path / 'nowhere'} does not exist"


def test_a_setting_that_does_not_parse(
    cli_env: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("RAGTIME_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RAGTIME_TOP_K", "four")
    assert cli.main(["keys", "list"]) == 1
    assert one_line_error(capsys.readouterr().err) == (
        "error: RAGTIME_TOP_K='four': should be a valid integer, unable to parse string as an "
        "integer"
    )


OWN_ERRORS = [
    RetrievalError("cannot write the ONNX export of m under c: set RAGTIME_EMBEDDING_CACHE_DIR"),
    BrokenIndex("collection 'demo' cannot be searched: re-ingest it"),
    BackendUnavailable("the generation backend is not loaded: no model file"),
    BudgetInfeasible(needed_ms=900.0, remaining_ms=20.0),
    DeadlinePassed("the budget ran out while the stage ran"),
]


@pytest.mark.parametrize("error", OWN_ERRORS, ids=lambda e: type(e).__name__)
def test_every_error_of_ragtimes_own_is_one_line_and_exit_1(
    error: Exception,
    cli_env: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 41 §2: an error of the retrieval, inference or budget hierarchy, raised by any
    command (here from an outside failure, as the ONNX export raises it), is its message alone."""

    def fails(args: object) -> int:
        try:
            raise OSError(28, "No space left on device")
        except OSError as cause:
            raise error from cause

    monkeypatch.setenv("RAGTIME_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(cli, "cmd_setup_demo", fails)
    assert cli.main(["setup-demo"]) == 1
    assert one_line_error(capsys.readouterr().err) == f"error: {error}"


def test_a_bug_still_shows_its_traceback(
    cli_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What is not ragtime's own error is not hidden behind one line: it is a bug to report."""

    def fails(args: object) -> int:
        raise KeyError("a bug")

    monkeypatch.setenv("RAGTIME_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(cli, "cmd_setup_demo", fails)
    with pytest.raises(KeyError):
        cli.main(["setup-demo"])
