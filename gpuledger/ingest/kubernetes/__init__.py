"""Kubernetes ingest: pods, DRA claims, dcgm-exporter and Kueue metrics read window by window and
stored."""
