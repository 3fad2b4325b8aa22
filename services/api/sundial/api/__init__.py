"""The API service: the public, tenant-scoped ``JobService`` and the ``AdminService``."""
