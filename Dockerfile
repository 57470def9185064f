# evsched service image: the package and its Kafka/MQTT extras on a slim Python.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY events events
COPY projections projections
COPY scheduler scheduler
COPY replay replay
RUN pip install --no-cache-dir '.[kafka,mqtt,http]' \
 && useradd --system --uid 10001 --home-dir /app evsched \
 && mkdir -p /data && chown evsched /data
USER evsched
EXPOSE 9090
# Liveness of a service started with --http 0.0.0.0:9090 (the compose file does).
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD python -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:9090/healthz', timeout=4)" || exit 1
ENTRYPOINT ["evsched"]
