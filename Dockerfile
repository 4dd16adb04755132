# The controller daemon; the same image runs workers with `gencoach worker`.
# The API listens on 0.0.0.0 here, so `gencoach serve` starts only with a token, read
# from a file (a Docker secret) or a variable:
#   docker run -e GENCOACH_API__TOKEN_FILE=/run/secrets/gencoach_api_token ... gencoach
#   docker run -e GENCOACH_API__TOKEN_ENV=GENCOACH_API_TOKEN -e GENCOACH_API_TOKEN=... \
#              -e GENCOACH_REDIS__URL=redis://... -p 127.0.0.1:8750:8750 gencoach
# (or -e GENCOACH_API__HOST=127.0.0.1 for an API reachable inside the container only).
# compose.yaml runs Redis, the controller and workers together; see docs/deployment.md.

# The Python the tests run on, as an exact tag (bump it with the tested version).
FROM python:3.11.7-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    GENCOACH_API__HOST=0.0.0.0 \
    GENCOACH_OUTPUT_DIR=/data/output

WORKDIR /src
# The runtime dependencies at the versions the tests ran with (scripts/constraints.py).
COPY docker/constraints.txt ./
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --constraint constraints.txt . \
 && useradd --create-home --uid 10001 gencoach \
 && mkdir -p /data/output && chown -R gencoach /data

USER gencoach
WORKDIR /data
EXPOSE 8750
# No VOLUME: a container that keeps saves mounts a named volume on /data/output
# (compose.yaml's `saves`); the others (workers, agent, simulator) need none.

HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 CMD ["gencoach", "health"]
CMD ["gencoach", "serve"]
