# The controller daemon; the same image runs workers with `gencoach worker`.
# The API listens on 0.0.0.0 here, so `gencoach serve` starts only with a token:
#   docker run -e GENCOACH_API__TOKEN_ENV=GENCOACH_API_TOKEN -e GENCOACH_API_TOKEN=... \
#              -e GENCOACH_REDIS__URL=redis://... -p 127.0.0.1:8750:8750 gencoach
# (or -e GENCOACH_API__HOST=127.0.0.1 for an API reachable inside the container only).
# compose.yaml runs Redis, the controller and workers together; see docs/deployment.md.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    GENCOACH_API__HOST=0.0.0.0 \
    GENCOACH_OUTPUT_DIR=/data/output

WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install . \
 && useradd --create-home --uid 10001 gencoach \
 && mkdir -p /data/output && chown -R gencoach /data

USER gencoach
WORKDIR /data
EXPOSE 8750
VOLUME ["/data"]

HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 CMD ["gencoach", "health"]
CMD ["gencoach", "serve"]
