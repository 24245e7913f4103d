"""The commands: fecbench run, impls, dask certs, status, bench campaign, bench capture."""
