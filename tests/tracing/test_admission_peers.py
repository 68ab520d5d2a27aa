"""The figures the processes of one server share, so that a process that has served nothing yet
admits from its siblings' (``tracing.budget.door.peers``)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tracing.budget.cost_model import CostModel
from tracing.budget.door import book as admission
from tracing.budget.door import peers as admission_peers
from tracing.budget.door.book import PRIOR_WEIGHT, FinishAdmission
from tracing.budget.door.peers import Learned, Peers, median_of, shared_dir
from tracing.budget.door.ticket import Refusal, Ticket

ASK = "/v1/ask"


def admitted(decision: Ticket | Refusal) -> Ticket:
    assert isinstance(decision, Ticket), decision
    return decision


def serve_alone(book: FinishAdmission, times: int, *, seconds: float = 0.0) -> None:
    for _ in range(times):
        ticket = admitted(book.issue(ASK, arrived=time.perf_counter(), budget_ms=60_000.0))
        time.sleep(seconds)
        ticket.finish()


def overlapped_finishes(book: FinishAdmission) -> float:
    """The overlapped finishes it has learned from (decayed)."""
    value = book.snapshot()["overlapped_finishes"]
    assert isinstance(value, (int, float))
    return float(value)


def test_a_process_reads_its_siblings_figures_not_its_own(tmp_path: Path) -> None:
    Peers(tmp_path, pid=1).publish(Learned({ASK: 12.0}, 9.0))
    Peers(tmp_path, pid=2).publish(Learned({ASK: 30.0, "/v1/search": 4.0}, None))
    Peers(tmp_path, pid=3).publish(Learned({ASK: 16.0}, 7.0))
    own = Peers(tmp_path, pid=3)
    # The median over the siblings that learned each figure; its own file is not among them.
    assert own.siblings() == Learned({ASK: 30.0, "/v1/search": 4.0}, 9.0)
    assert Peers(tmp_path, pid=4).siblings() == Learned({ASK: 16.0, "/v1/search": 4.0}, 9.0)


def test_a_broken_or_missing_file_is_skipped(tmp_path: Path) -> None:
    Peers(tmp_path, pid=1).publish(Learned({ASK: 12.0}, None))
    (tmp_path / "2.json").write_text("{not json")
    (tmp_path / "3.json").write_text('{"alone_ms": {"/v1/ask": "slow"}}')
    assert Peers(tmp_path, pid=9).siblings() == Learned({ASK: 12.0}, None)
    assert Peers(tmp_path / "gone", pid=9).siblings() == Learned()
    # A directory that cannot be written to costs the siblings their figures, nothing more.
    assert not Peers(tmp_path / "gone", pid=9).publish(Learned({ASK: 1.0}))


def test_siblings_are_read_again_only_after_read_s(tmp_path: Path) -> None:
    sibling, own = Peers(tmp_path, pid=1), Peers(tmp_path, pid=2)
    sibling.publish(Learned({ASK: 12.0}))
    assert own.siblings(now=100.0).alone_ms == {ASK: 12.0}
    sibling.publish(Learned({ASK: 20.0}))
    assert own.siblings(now=100.0 + admission_peers.READ_S / 2).alone_ms == {ASK: 12.0}
    assert own.siblings(now=100.0 + admission_peers.READ_S).alone_ms == {ASK: 20.0}


def test_median_of_nothing_learned_is_nothing() -> None:
    assert median_of([]) == Learned()
    assert median_of([Learned(), Learned({ASK: 5.0})]) == Learned({ASK: 5.0})


def test_shared_dir_names_itself_and_the_processes_then_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    with shared_dir(1) as none:
        assert none is None and admission_peers.PEERS_DIR_ENV not in os.environ
        assert admission_peers.serving_processes() == 1
    with shared_dir(3) as path:
        assert path is not None and path.is_dir() and path.parent == tmp_path
        assert os.environ[admission_peers.PEERS_DIR_ENV] == str(path)
        assert admission_peers.serving_processes() == 3
        peers = Peers.from_environment()
        assert peers is not None and peers.directory == path
    assert not path.exists()
    assert admission_peers.PEERS_DIR_ENV not in os.environ
    assert Peers.from_environment() is None and admission_peers.serving_processes() == 1


def test_a_fresh_process_admits_from_what_its_sibling_learned(tmp_path: Path) -> None:
    """Two processes on two cores. One serves a client's first questions, one after another:
    its figures reach the other at once. The other, having served nothing, predicts from them
    (10 ms alone and 10 ms each ahead, on its one core of two) instead of its 200 ms prior."""
    warmed = FinishAdmission(
        cores=2,
        processes=2,
        peers=Peers(tmp_path, pid=1),
        prior_alone_ms=200.0,
        pace=CostModel().door,
    )
    serve_alone(warmed, 3, seconds=0.01)  # the first is not learned from
    learned = warmed.learned()
    assert learned.alone_ms[ASK] >= 10.0 and learned.per_request_ms is None
    assert Learned.from_json((tmp_path / "1.json").read_text()) == learned

    fresh = FinishAdmission(
        cores=2,
        processes=2,
        peers=Peers(tmp_path, pid=2),
        prior_alone_ms=200.0,
        pace=CostModel().door,
    )
    assert fresh.alone_ms(ASK) == learned.alone_ms[ASK]
    # Its share of the cores is one: a request ahead costs it a request's time alone.
    assert fresh.per_request_ms() == pytest.approx(learned.alone_ms[ASK])
    snapshot = fresh.snapshot()
    assert snapshot["siblings"] == learned.as_dict() and snapshot["learned"] == Learned().as_dict()
    assert snapshot["processes"] == 2

    alone = FinishAdmission(
        cores=2, processes=2, prior_alone_ms=200.0, pace=CostModel().door
    )  # no siblings to ask
    assert alone.alone_ms(ASK) == 200.0 and alone.per_request_ms() == pytest.approx(200.0)


def test_a_routes_first_times_alone_are_shared_at_once_then_at_most_every_publish_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client's first questions, one after another, reach the siblings as they are learned;
    once the route has ``YOUNG_ALONE`` times alone, at most every ``PUBLISH_S``."""
    monkeypatch.setattr(admission_peers, "PUBLISH_S", 60.0)
    book = FinishAdmission(cores=1, peers=Peers(tmp_path, pid=1), pace=CostModel().door)
    sibling = Peers(tmp_path, pid=2)
    serve_alone(book, 2)  # the first is not learned from
    for i in range(admission.YOUNG_ALONE - 1):
        serve_alone(book, 1, seconds=0.002 * (i % 2))
        assert sibling.siblings(now=float(i)) == book.learned()
    published = sibling.siblings(now=100.0).alone_ms[ASK]
    serve_alone(book, 2 * admission.YOUNG_ALONE, seconds=0.05)  # all slower: the fast ones fade
    learned = book.learned().alone_ms[ASK]
    assert learned >= 50.0 and learned != published
    assert sibling.siblings(now=200.0).alone_ms[ASK] == published


def test_a_process_with_figures_of_its_own_keeps_them(tmp_path: Path) -> None:
    Peers(tmp_path, pid=1).publish(Learned({ASK: 500.0}, 500.0))
    book = FinishAdmission(
        cores=1, peers=Peers(tmp_path, pid=2), prior_alone_ms=1.0, pace=CostModel().door
    )
    assert book.alone_ms(ASK) == 500.0
    serve_alone(book, 3)  # its first, then two alone: as many as replace a prior
    assert book.alone_ms(ASK) < 500.0


def test_overlapped_work_is_shared_once_learned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The work per request when requests overlap goes to the siblings once ``PRIOR_WEIGHT``
    overlapped finishes are behind it (fewer count a burst's fill more than its pace)."""
    monkeypatch.setattr(admission_peers, "PUBLISH_S", 0.0)  # each finish may write
    book = FinishAdmission(cores=1, peers=Peers(tmp_path, pid=1), pace=CostModel().door)
    sibling = Peers(tmp_path, pid=2)
    while overlapped_finishes(book) < PRIOR_WEIGHT - 1:
        first = admitted(book.issue(ASK, arrived=time.perf_counter(), budget_ms=60_000.0))
        second = admitted(book.issue(ASK, arrived=time.perf_counter(), budget_ms=60_000.0))
        first.finish()  # one overlapped finish
        second.finish()
    assert sibling.siblings(now=0.0).per_request_ms is None
    tickets = [
        admitted(book.issue(ASK, arrived=time.perf_counter(), budget_ms=60_000.0)) for _ in range(3)
    ]
    for ticket in tickets:
        ticket.finish()
    per_request = sibling.siblings(now=1_000.0).per_request_ms
    assert per_request is not None
    assert per_request == pytest.approx(book.learned().per_request_ms, rel=1e-9)
