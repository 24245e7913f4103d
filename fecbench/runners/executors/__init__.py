"""Where runs execute: the campaign engine, one network, N networks, --jobs auto's calibration, a Dask cluster
(and who may talk to it), the host fingerprint."""
