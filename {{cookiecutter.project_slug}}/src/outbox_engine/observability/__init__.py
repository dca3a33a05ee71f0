"""What the engine reports: the Observer protocol the service's telemetry implements (observer)
and the worker/consumer health and readiness probes (probes)."""
