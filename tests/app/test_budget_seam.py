"""The seam between the app and the budget: what the app asks of a request's budget session.

The app hands stages, auth's too, to ``BudgetSession.run(stage, inputs)`` (no lambda standing in
for a stage, no stage name repeated at the call) and uses five members of the session besides
``with session:``; a sixth, or a stage passed as a callable, fails here. Read from the source
with ``ast``: every module of ``app/``."""

from __future__ import annotations

import ast
from pathlib import Path

import app

#: The session's members the app may use (and ``with session:``, which gives back the
#: reservation however the request ends).
SEAM = {"ask", "run", "keeps", "plan", "generate"}
APP = Path(app.__file__).parent


def session_uses(tree: ast.AST) -> list[tuple[str, ast.Attribute]]:
    """Each ``session.<member>`` (or ``<x>.session.<member>``) in ``tree``."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value
        named = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", None)
        if named == "session":
            found.append((node.attr, node))
    return found


def app_modules() -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text())) for path in sorted(APP.rglob("*.py"))]


def test_the_app_uses_five_session_members_and_the_context() -> None:
    used: dict[str, set[str]] = {}
    for path, tree in app_modules():
        for member, _ in session_uses(tree):
            used.setdefault(member, set()).add(str(path.relative_to(APP.parent)))
    assert set(used) <= SEAM, {m: sorted(p) for m, p in used.items() if m not in SEAM}
    assert {"run", "plan", "generate"} <= set(used), "the pipeline runs its stages through it"


def test_stages_are_handed_to_the_session_not_wrapped_in_lambdas() -> None:
    calls = 0
    for path, tree in app_modules():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            if node.func.attr not in ("run", "generate") or not session_uses(node.func):
                continue
            calls += 1
            stage = node.args[0]
            where = f"{path.relative_to(APP.parent)}:{node.lineno}"
            assert not isinstance(stage, ast.Lambda | ast.Constant), where
            assert not any(isinstance(a, ast.Lambda) for a in node.args), where
            assert not node.keywords, f"{where}: the stage's own result says what it taught"
    assert calls >= 11  # every stage: auth, question, embed, search, keyword, rerank, ...


def test_the_check_reads_what_it_says() -> None:
    """The checks above find a member outside the seam, and a lambda at a call."""
    wrong = ast.parse("async def f(session):\n    await session.run(lambda by: 1)\n")
    assert [m for m, _ in session_uses(wrong)] == ["run"]
    call = next(n for n in ast.walk(wrong) if isinstance(n, ast.Call))
    assert isinstance(call.args[0], ast.Lambda)
    outside = ast.parse("def g(prepared):\n    prepared.session.release_reservation()\n")
    assert [m for m, _ in session_uses(outside)] == ["release_reservation"]
