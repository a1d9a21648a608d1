# The adlrec allocation service (and the CLI), CPU-only torch.
#   docker build -t adlrec .
#   docker run --rm -p 8470:8470 -e ADLREC_SERVICE_TOKEN=$(openssl rand -hex 16) adlrec
# Without a token the service refuses to listen on 0.0.0.0, so the image needs one.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    MLFLOW_DISABLE_TELEMETRY=true \
    ADLREC_DATA_DIR=/data \
    ADLREC_SERVICE_HOST=0.0.0.0 \
    ADLREC_SERVICE_PORT=8470

# CPU wheels from the PyTorch index; override with --build-arg TORCH=torch==<version>.
ARG TORCH=torch
RUN pip install --index-url https://download.pytorch.org/whl/cpu "$TORCH"

WORKDIR /app
COPY pyproject.toml setup.py README.md ./
COPY adlrec ./adlrec
COPY webapp ./webapp
RUN pip install ".[postgres]" \
    && useradd --create-home --uid 10001 adlrec \
    && mkdir -p /data && chown adlrec /data

USER adlrec
VOLUME ["/data"]
EXPOSE 8470
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
    CMD python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8470/health', timeout=2).status != 200)"
CMD ["adlrec", "serve"]
