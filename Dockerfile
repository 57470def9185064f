# evsched service image: the package, its compiled core and its Kafka/MQTT/HTTP extras on a slim Python.
# Build stage: a C compiler and mypyc (pyproject's build requirements) compile the hot modules
# into a wheel (setup.py, docs/native.md); the image installs that wheel without the compiler.
FROM python:3.11-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY events events
COPY projections projections
COPY scheduler scheduler
COPY replay replay
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
 && python -c "import json, zipfile, glob, sys; w = zipfile.ZipFile(glob.glob('/wheels/evsched-*.whl')[0]); \
m = json.loads(w.read('events/native.json')); print('evsched core:', m['build'], m.get('reason', '')); \
sys.exit(m['build'] != 'compiled')"

FROM python:3.11-slim
WORKDIR /app
COPY --from=build /wheels /wheels
RUN whl=$(ls /wheels/evsched-*.whl) && pip install --no-cache-dir "${whl}[kafka,mqtt,http]" \
 && rm -rf /wheels \
 && evsched --version | grep -q "core: compiled" \
 && useradd --system --uid 10001 --home-dir /app evsched \
 && mkdir -p /data && chown evsched /data
USER evsched
EXPOSE 9090
# Liveness of a service started with --http 0.0.0.0:9090 (the compose file does).
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD python -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:9090/healthz', timeout=4)" || exit 1
ENTRYPOINT ["evsched"]
