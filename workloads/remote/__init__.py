"""Client load from the workers of a Dask cluster (``--workers``)."""
