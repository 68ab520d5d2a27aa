"""The budget engine: one latency budget per request, carried from arrival to the last token.

The loop, once per request:

1. **measure**: every stage runs inside the request's ``BudgetLedger`` (``ledger``), which
   times it, charges it to the budget and writes the figures on its span;
2. **predict**: the ``CostModel`` (``cost_model``) says what each stage will cost: per unit for
   embed, search and rerank; for generation, one model per serving target (time to first token
   as a fixed cost plus a cost per uncached prompt token, then a cost per output token), at a
   high quantile (p90) of what was observed, anchored to a prior that a target's
   ``calibration`` probe measures;
3. **plan**: the ``DegradationPolicy`` (``policy``) picks, among the plans that fit the time
   left after the predicted queue wait (``queue``: the work already promised to the target),
   the one that keeps the most answer quality (``quality``: measured per saving), and raises
   ``BudgetInfeasible`` only when not even the smallest plan fits;
4. **charge**: the plan's per-stage predictions go on the ledger (``expect``); each stage's span
   carries predicted and actual ms, and the ratio feeds a Prometheus histogram; waits for
   blocking work and streamed tokens end at the deadline (``deadline``);
5. **learn**: what each stage really cost goes back into the cost model, whose observations
   fade with count and age, so one burst of cache hits, a stall or a slow period cannot
   lock the service out.

``BudgetEngine`` (``engine``) holds the pieces. Each request opens a ``BudgetSession``
(``session``) that owns its admission, plan, reservation, stage deadlines and
observations: the pipeline hands each stage (``stage``: a component with ``run(inputs,
allowance)``) to its session; nothing else plans. Stage names are ``StageName`` members
(``stage_names``).
"""

from tracing.budget.allowances import Allowance, GenerationAllowance, ServingNeed
from tracing.budget.calibration import Calibrator, Probe, ProbeResult, calibrate
from tracing.budget.cost_model import (
    CPU_GENERATION_PRIOR,
    CostModel,
    GenerationCost,
    GenerationPrior,
    Learning,
)
from tracing.budget.deadline import next_before_deadline
from tracing.budget.engine import BudgetEngine, Rules
from tracing.budget.errors import BudgetError, BudgetInfeasible, DeadlinePassed, TargetSaturated
from tracing.budget.ledger import BudgetLedger, Degradation, StageRecord, StageSpan
from tracing.budget.plan import Action, Plan, PlanLimits
from tracing.budget.policy import DegradationPolicy
from tracing.budget.quality import DEFAULT_QUALITY_PATH, QualityTable
from tracing.budget.queue import Reservation, Reservations, TargetQueue
from tracing.budget.session import BudgetSession
from tracing.budget.stage import Stage, StreamingStage
from tracing.budget.stage_names import StageName

__all__ = [
    "CPU_GENERATION_PRIOR",
    "DEFAULT_QUALITY_PATH",
    "Action",
    "Allowance",
    "BudgetEngine",
    "BudgetError",
    "BudgetInfeasible",
    "BudgetLedger",
    "BudgetSession",
    "Calibrator",
    "CostModel",
    "DeadlinePassed",
    "Degradation",
    "DegradationPolicy",
    "GenerationAllowance",
    "GenerationCost",
    "GenerationPrior",
    "Learning",
    "Plan",
    "PlanLimits",
    "Probe",
    "ProbeResult",
    "QualityTable",
    "Reservation",
    "Reservations",
    "Rules",
    "ServingNeed",
    "Stage",
    "StageName",
    "StageRecord",
    "StageSpan",
    "StreamingStage",
    "TargetQueue",
    "TargetSaturated",
    "calibrate",
    "next_before_deadline",
]
