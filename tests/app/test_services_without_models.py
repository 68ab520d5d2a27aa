"""``create_app(services=...)``: an app built from doubles answers without loading a model."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.pipeline import services as services_module
from tests.fakes.backends import ScriptedBackend
from tests.fakes.hash_embedder import HashEmbedder
from tests.helpers.app import (
    app_state,
    create_key,
    make_settings,
    seed_data_dir,
    services_of_doubles,
)
from tracing.budget import CostModel


def test_an_app_of_doubles_answers_and_loads_no_model(tmp_path: Path, corpus_dir: Path) -> None:
    settings = make_settings(tmp_path)
    seed_data_dir(settings.data_dir, corpus_dir, HashEmbedder())
    secret = create_key(settings.data_dir)
    services = services_of_doubles(settings)
    with TestClient(create_app(services=services)) as client:
        ready = client.get("/readyz", headers={"Authorization": f"Bearer {secret}"}).json()
        response = client.post(
            "/v1/ask",
            json={"question": "How do I define a function with default values?"},
            headers={"Authorization": f"Bearer {secret}"},
        )
    assert ready["components"]["embedder"] == "loaded: hash-embedder"
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["answer"] and body["citations"]
    assert app_state(client).services is services


def test_readiness_without_a_key_says_only_ready_or_not(tmp_path: Path, corpus_dir: Path) -> None:
    """``/readyz`` needs no key, so it tells no stranger about paths, models or collections;
    an unknown collection's 404 names no other."""
    settings = make_settings(tmp_path)
    seed_data_dir(settings.data_dir, corpus_dir, HashEmbedder())
    auth = {"Authorization": f"Bearer {create_key(settings.data_dir)}"}
    with TestClient(create_app(services=services_of_doubles(settings))) as client:
        anonymous = client.get("/readyz")
        wrong_key = client.get("/readyz", headers={"Authorization": "Bearer rt_wrong"})
        with_key = client.get("/readyz", headers=auth)
        unknown = client.post("/v1/search", json={"query": "x", "collection": "nope"}, headers=auth)
    assert anonymous.status_code == 200 and anonymous.json() == {"ready": True}
    assert wrong_key.json() == {"ready": True}
    assert with_key.json()["components"]["collections"] == {"demo": pytest.approx(1, abs=10**6)}
    assert unknown.status_code == 404
    assert "demo" not in unknown.text and "nope" in unknown.text


def test_a_running_app_holds_one_cost_model(
    tmp_path: Path, corpus_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One composition root (issue 57 §3): ``create_app`` builds the process's cost model once
    and hands it down; no constructor on the way builds one of its own, so the door, the
    stages' threads, the backend and the budget engine all learn into the same one."""
    built: list[CostModel] = []
    init = CostModel.__init__

    def counted(self: CostModel, *args: object, **kwargs: object) -> None:
        built.append(self)
        init(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(CostModel, "__init__", counted)
    monkeypatch.setattr(services_module, "default_embedder", lambda settings: HashEmbedder())
    settings = make_settings(tmp_path)
    seed_data_dir(settings.data_dir, corpus_dir, HashEmbedder())
    secret = create_key(settings.data_dir)
    with TestClient(create_app(settings, backend=ScriptedBackend())) as client:
        response = client.post(
            "/v1/ask",
            json={"question": "How do I define a function with default values?"},
            headers={"Authorization": f"Bearer {secret}"},
        )
        assert response.status_code == 200, response.text
        state = app_state(client)
        (costs,) = built
        assert state.services.costs is costs and state.budget.cost is costs
        assert state.services.stages.embed.threads.costs is costs


def test_an_app_built_and_never_started_leaves_no_trace(tmp_path: Path) -> None:
    """``create_app`` builds every long-lived object (the services included) and connects,
    opens, starts and writes nothing: an app built for its OpenAPI document alone makes no
    data dir, no key secret and no key store file. Its lifespan does that."""
    data_dir = tmp_path / "data"
    app = create_app(make_settings(data_dir), backend=ScriptedBackend())
    assert "/v1/ask" in app.openapi()["paths"]
    assert not data_dir.exists()
    assert not [p for p in Path("/proc/self/fd").glob("*") if str(tmp_path) in str(p.resolve())]


def test_the_door_and_the_engine_are_wired_when_built(
    tmp_path: Path, corpus_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One composition root (issue 57 §3): the door's remote slots and generation floor and the
    engine's loop lag are handed to them as they are built, and starting the app sets none of
    them again: the app's pieces, the pipeline too, are the same objects before and after its
    lifespan."""
    monkeypatch.setattr(services_module, "default_embedder", lambda settings: HashEmbedder())
    settings = make_settings(tmp_path)
    seed_data_dir(settings.data_dir, corpus_dir, HashEmbedder())
    app = create_app(settings, backend=ScriptedBackend())
    admission, budget = app.state.admission, app.state.budget

    def wiring() -> list[object]:
        finish = admission.finish
        return [
            app.state.services,
            app.state.budget,
            app.state.pipeline,
            admission.remote_slots,
            finish.generation_floor_ms,
            finish.lag_ms,
            budget.loop_lag_ms,
        ]

    built = wiring()
    assert budget.loop_lag_ms == app.state.loop_lag.ms
    assert admission.remote_slots() == app.state.services.backend.remote_slots
    with TestClient(app) as client:
        assert client.get("/healthz").status_code == 200
        started = wiring()
    assert all(now is then for now, then in zip(started, built, strict=True))
