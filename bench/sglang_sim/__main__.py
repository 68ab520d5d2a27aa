"""``python -m bench.sglang_sim --port 0 ...``: the simulated SGLang server as a process.

It prints ``listening on http://HOST:PORT`` on its first line (``--port 0`` picks a free port),
then serves until it is stopped. The timings are those of a GPU server you want to plan for.
"""

from __future__ import annotations

import argparse
import socket
from collections.abc import Sequence

import uvicorn

from bench.sglang_sim.config import SimConfig
from bench.sglang_sim.server import SimulatedSGLang


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.sglang_sim",
        description="A server that speaks SGLang 0.5.23's native HTTP API with GPU-like timings.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000, help="0: pick a free one")
    parser.add_argument("--model", default=SimConfig.model)
    parser.add_argument("--fixed-ms", type=float, default=0.0, help="TTFT once running")
    parser.add_argument("--prefill-ms-per-token", type=float, default=0.0)
    parser.add_argument("--decode-ms-per-token", type=float, default=0.0)
    parser.add_argument("--max-running", type=int, default=SimConfig.max_running)
    parser.add_argument("--max-queued", type=int, default=None)
    parser.add_argument("--context-length", type=int, default=SimConfig.context_length)
    parser.add_argument("--natural-tokens", type=int, default=SimConfig.natural_tokens)
    parser.add_argument("--incremental-streaming-output", action="store_true")
    parser.add_argument("--enable-priority-scheduling", action="store_true")
    parser.add_argument("--schedule-low-priority-values-first", action="store_true")
    parser.add_argument("--disable-priority-preemption", action="store_true")
    parser.add_argument("--priority-scheduling-preemption-threshold", type=int, default=10)
    parser.add_argument("--abort-on-priority-when-disabled", action="store_true")
    parser.add_argument(
        "--slow-factor", type=float, default=1.0,
        help="every timing this many times longer (POST /bench/pace changes it later)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    server = SimulatedSGLang()
    server.reset(
        model=args.model,
        ttft_s=args.fixed_ms / 1000.0,
        prefill_s_per_token=args.prefill_ms_per_token / 1000.0,
        itl_s=args.decode_ms_per_token / 1000.0,
        max_running=args.max_running,
        queue_capacity=args.max_queued,
        context_length=args.context_length,
        natural_tokens=args.natural_tokens,
        incremental=args.incremental_streaming_output,
        priority_scheduling=args.enable_priority_scheduling,
        low_priority_values_first=args.schedule_low_priority_values_first,
        priority_preemption=not args.disable_priority_preemption,
        preemption_threshold=args.priority_scheduling_preemption_threshold,
        abort_on_priority_when_disabled=args.abort_on_priority_when_disabled,
        slow_factor=args.slow_factor,
    )
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    print(f"listening on http://{args.host}:{sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(server.app, log_level="warning", lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
