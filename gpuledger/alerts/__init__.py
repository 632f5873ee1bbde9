"""Alerts to the owners of idle or low-efficiency GPUs (docs/alerts.md)."""
