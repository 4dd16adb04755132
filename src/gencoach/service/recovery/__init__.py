"""Recovery: reconciliation, run ends, controller leases and Redis housekeeping."""
