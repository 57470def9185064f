# evsched service image: the package and its Kafka/MQTT extras on a slim Python.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY events events
COPY projections projections
COPY scheduler scheduler
COPY replay replay
RUN pip install --no-cache-dir '.[kafka,mqtt]'
ENTRYPOINT ["evsched"]
