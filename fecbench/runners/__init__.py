"""Campaigns, by job: ``experiment`` (what an experiment is: design, descriptors, runs, checks), ``run`` (one
run on a testbed and what it records), ``executors`` (where runs execute: engine, serial, --jobs, calibration,
Dask), ``commands`` (the CLI). Each sub-package imports only those before it (ARCHITECTURE.md)."""
