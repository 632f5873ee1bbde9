"""Copies of the ledger out: FOCUS files and backups (and their restore)."""
