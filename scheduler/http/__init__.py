"""The operator's surface over HTTP: Prometheus metrics, health probes, a read-only state API and a web page."""
