"""Weekly chargeback reports (HTML and CSV) written from the ledger; used by CLI and Dagster
(``weekly.write_weekly_report``)."""
