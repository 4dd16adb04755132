# The controller daemon; the same image runs workers with `gencoach worker`.
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
