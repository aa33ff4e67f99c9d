"""Prometheus metrics of every role: live run gauges (`RunwatchMetrics`), the roles' own
counters, and the small HTTP servers for /metrics, /healthz and /readyz. The only place that
imports prometheus-client."""
