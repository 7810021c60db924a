"""The embedded cluster: an API-server subset, its controllers and the cloud node-pool APIs."""
