"""Kubernetes and Kueue sources: Prometheus metrics and Workload snapshots."""
