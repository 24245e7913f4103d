"""The results database and what it records: the SQLite schema, migrations and campaigns (`db`), a run's
records from pending to finished (`run_records`), the run statuses (`status`) and the version and git SHA every
record carries (`provenance`)."""
