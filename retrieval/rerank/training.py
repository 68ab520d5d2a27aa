"""Fine-tune a cross-encoder on pairs mined from a collection's own chunks, offline.

No cross-encoder ships its weights offline, so ``train_reranker`` starts from the shipped
MiniLM (a BERT: ``CrossEncoder(path, num_labels=1)`` puts a fresh scoring head on it) and
teaches it on the collection:

- queries: section headings (numbering stripped), and each chunk's first sentence; a heading
  that is a question (ends with "?", as the FAQ's are: they are the evaluation's questions) is
  never a query, nor is any query whose embedding lies within ``exclude_similarity`` of a
  question passed in ``exclude_questions`` (e.g. ``demo/questions.txt``);
- positive: the query's own chunk (the first chunk of a heading's section; for a first
  sentence, its chunk with that sentence removed, so the pair is not a verbatim match);
- hard negatives: the query's neighbours from other sources or sections in the ranking hybrid
  search gives it (FAISS fused with BM25): the candidates the reranker sees at serving time;
- more pairs from other collections (``also_collections``: the Debian FAQ, say), whose question
  headings are queries too; their sections are never held out.

Sections (not single queries) of the collection trained for are held out, so that no held-out
query's section is trained on; on them the trainer reports nDCG@10 and MRR of search order
against reranked order over the top ``candidates`` hits (relevant: a chunk of the query's
section), and the median ms per candidate scoring ``candidates`` pairs in one batch. The loss
is listwise: softmax cross-entropy over each query's list (its positive and its negatives).
The learning rate warms up over the first tenth of the steps and then falls linearly to 0.
With ``eval_every``, half the held-out sections are a validation set checked every so many
steps: training stops once ``patience`` checks in a row fail to beat the best, and the best
weights are the ones saved (the other half gives the reported figures, untouched by that
choice; both in ``heldout``). Everything is bounded (queries, steps, epochs, sequence length,
minutes). The pairs are mined by ``mining``; the model is saved where ``trained`` finds it.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from retrieval.embedding.embedder import Embedder
from retrieval.formats.document import first_section
from retrieval.rerank.heldout import EarlyStop, evaluate_heldout
from retrieval.rerank.mining import (
    MinedQuery,
    MinedSet,
    TrainOptions,
    collection_passages,
    mine_queries,
    split_holdout,
)
from retrieval.rerank.trained import RECORD_NAME, trained_model_dir
from retrieval.search.passages import Passage
from retrieval.store.document_store import DocumentStore

log = logging.getLogger(__name__)


@dataclass
class TrainReport:
    """What ``ragtime-training.json`` holds (without the paths)."""

    collection: str
    base_model: str
    options: dict[str, Any]
    mined: dict[str, Any]
    steps: int
    train_seconds: float
    loss_first: float | None
    loss_last: float | None
    heldout: dict[str, Any] = field(default_factory=dict)


def _pass_cls_through_pooler(model: Any) -> bool:
    """Make a fresh head's BERT pooler ``tanh([CLS])``; whether there was one to change.

    The shipped MiniLM was trained with mean pooling: its pooler's output barely varies (mean
    |value| 0.05, spread 0.035 over unrelated pairs, against 0.2 for the [CLS] state itself),
    so a head on it cannot tell pairs apart and the loss stays at ln(1 + negatives).
    """
    import torch

    pooler = getattr(getattr(model.model, "base_model", None), "pooler", None)
    dense = getattr(pooler, "dense", None)
    if not isinstance(dense, torch.nn.Linear) or dense.in_features != dense.out_features:
        return False
    with torch.no_grad():
        dense.weight.copy_(torch.eye(dense.in_features))
        dense.bias.zero_()
    return True


def _fit(
    model: Any,
    train: Sequence[MinedQuery],
    mined: MinedSet,
    options: TrainOptions,
    progress: Callable[[str], None],
    early: EarlyStop | None = None,
) -> tuple[int, float, float | None, float | None]:
    """Listwise softmax cross-entropy over (positive, negatives) per query: (steps, s, first,
    last loss). With ``early``, checks as it goes and ends with the best weights checked."""
    import torch

    groups = [(q, mined.negatives(q, options.negatives)) for q in train]
    groups = [(q, negs) for q, negs in groups if negs]
    if not groups:
        return 0, 0.0, None, None
    per_epoch = math.ceil(len(groups) / options.batch_queries)
    total = min(options.max_steps, per_epoch * options.epochs)
    head = [p for n, p in model.named_parameters() if "classifier" in n]
    body = [p for n, p in model.named_parameters() if "classifier" not in n]
    optimiser = torch.optim.AdamW(
        [
            {"params": body, "lr": options.learning_rate},
            {"params": head, "lr": options.head_learning_rate},
        ],
        weight_decay=0.01,
    )
    warmup = max(1, total // 10)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimiser,
        lambda s: min((s + 1) / warmup, max(0.0, (total - s) / max(1, total - warmup))),
    )
    rng = random.Random(options.seed)
    started = time.monotonic()
    deadline = started + options.max_minutes * 60
    first = last = None
    step = 0
    model.train()
    while step < total:
        rng.shuffle(groups)
        for at in range(0, len(groups), options.batch_queries):
            if step >= total or time.monotonic() > deadline:
                break
            batch = groups[at : at + options.batch_queries]
            width = 1 + min(len(negs) for _, negs in batch)
            pairs = [
                [q.text, text]
                for q, negs in batch
                for text in [q.positive_text, *(n.text for n in negs[: width - 1])]
            ]
            features = model.preprocess(pairs)
            logits = model(features)["scores"].reshape(len(batch), width).float()
            loss = torch.nn.functional.cross_entropy(
                logits, torch.zeros(len(batch), dtype=torch.long)
            )
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimiser.step()
            scheduler.step()
            optimiser.zero_grad()
            step += 1
            last = float(loss.item())
            first = last if first is None else first
            if step == 1 or step % 10 == 0 or step == total:
                progress(f"step {step}/{total} loss {last:.3f}")
            if early is not None and early.after(step, progress):
                break
        if early is not None and early.checks.stopped_early:
            break
        if time.monotonic() > deadline:
            progress(f"stopped at step {step}: --max-minutes {options.max_minutes} reached")
            break
    if early is not None:
        early.restore_best(progress)
    model.eval()
    return step, time.monotonic() - started, first, last


def _mine_collection(
    store: DocumentStore,
    embedder: Embedder,
    collection: str,
    exclude_questions: Sequence[str],
    options: TrainOptions,
    *,
    allow_question_headings: bool,
) -> tuple[list[Passage], MinedSet]:
    """One collection's chunks and the queries mined from them, each with its candidates in
    hybrid search's order (``options.fused_negatives``) or FAISS's."""
    passages = collection_passages(store, embedder, collection)
    mined = mine_queries(
        passages,
        embedder=embedder,
        search=lambda vector, k: store.search(collection, vector, k),
        keyword_search=lambda text, k: store.keyword_search(collection, text, k)[0],
        exclude_questions=exclude_questions,
        allow_question_headings=allow_question_headings,
        options=options,
    )
    return passages, mined


def train_reranker(
    store: DocumentStore,
    embedder: Embedder,
    collection: str,
    *,
    base_model: str,
    models_dir: Path,
    exclude_questions: Sequence[str] = (),
    also_collections: Sequence[str] = (),
    options: TrainOptions | None = None,
    progress: Callable[[str], None] = lambda line: None,
) -> tuple[Path, TrainReport]:
    """Mine, train, evaluate on held-out sections, and save to ``models_dir/reranker-NAME``
    (``options``: the defaults of ``TrainOptions`` when None). ``also_collections`` give more
    training pairs (never held out; their question headings are queries).

    Raises ``UnknownCollection`` for a collection with no chunks and ``ValueError`` when too
    little could be mined to train on.
    """
    options = options or TrainOptions()
    passages, mined = _mine_collection(
        store, embedder, collection, exclude_questions, options, allow_question_headings=False
    )
    train, heldout = split_holdout(mined.queries, options.holdout, options.seed)
    extra: dict[str, int] = {}
    for other in also_collections:
        _, more = _mine_collection(
            store, embedder, other, exclude_questions, options, allow_question_headings=True
        )
        before = len(mined.queries)
        mined = mined.merged(more)
        train += mined.queries[before:]
        extra[other] = len(mined.queries) - before
    heldout = heldout[: options.max_holdout_queries]
    validation: list[MinedQuery] = []
    if options.eval_every:
        groups = sorted({q.group for q in heldout})
        checked = set(groups[::2])
        validation = [q for q in heldout if q.group in checked]
        heldout = [q for q in heldout if q.group not in checked]
    trainable = [q for q in train if mined.negatives(q, 1)]
    if not trainable:
        raise ValueError(
            f"collection {collection!r} gave no training pairs ({len(mined.queries)} queries "
            "mined, none with a neighbour from another section): ingest more documents"
        )
    also = "".join(f", {n} from {name!r}" for name, n in extra.items())
    progress(
        f"mined {len(mined.queries)} queries ({len(passages)} chunks of {collection!r}{also}): "
        f"{len(train)} to train, {len(validation)} to check, {len(heldout)} held out; left out "
        f"{mined.question_headings} question headings and {mined.excluded_questions} queries "
        "close to evaluation questions"
    )

    import torch
    from sentence_transformers import CrossEncoder

    torch.manual_seed(options.seed)
    if options.threads:
        torch.set_num_threads(options.threads)
    model = CrossEncoder(
        base_model, num_labels=1, max_length=options.max_length, device="cpu", local_files_only=True
    )
    if _pass_cls_through_pooler(model):
        progress("reset the BERT pooler to pass the [CLS] state through (tanh of identity)")
    section_sizes: dict[Any, int] = {}
    for p in passages:
        group = (p.source, first_section(p.section))
        section_sizes[group] = section_sizes.get(group, 0) + 1
    early = None
    if validation:
        early = EarlyStop(
            model,
            lambda: evaluate_heldout(model, validation, mined, section_sizes),
            options.eval_every,
            options.patience,
        )
    steps, seconds, first, last = _fit(model, trainable, mined, options, progress, early)
    progress(f"trained {steps} steps in {seconds:.0f} s; scoring {len(heldout)} held-out queries")
    with torch.inference_mode():
        figures = evaluate_heldout(model, heldout, mined, section_sizes)
    if early is not None:
        figures["validation"] = asdict(early.checks) | {"queries": len(validation)}

    report = TrainReport(
        collection=collection,
        base_model=str(base_model),
        options=asdict(options),
        mined={
            "chunks": len(passages),
            "queries": len(mined.queries),
            "heading_queries": sum(q.kind == "heading" for q in mined.queries),
            "sentence_queries": sum(q.kind == "sentence" for q in mined.queries),
            "train_queries": len(trainable),
            "heldout_queries": len(heldout),
            "validation_queries": len(validation),
            "also_collections": extra,
            "question_headings_left_out": mined.question_headings,
            "excluded_close_to_questions": mined.excluded_questions,
            "exclude_questions_given": len(exclude_questions),
        },
        steps=steps,
        train_seconds=round(seconds, 1),
        loss_first=first,
        loss_last=last,
        heldout=figures,
    )
    target = trained_model_dir(models_dir, collection)
    _save(model, report, target)
    return target, report


def _save(model: Any, report: TrainReport, target: Path) -> None:
    """Write the model and its record beside ``target``, then swap it into place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(str(tmp))
    record = asdict(report) | {"created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    (tmp / RECORD_NAME).write_text(json.dumps(record, indent=2) + "\n")
    old = target.with_name(f".{target.name}.{os.getpid()}.old")
    if target.exists():
        target.rename(old)
    tmp.rename(target)
    shutil.rmtree(old, ignore_errors=True)
