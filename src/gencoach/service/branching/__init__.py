"""Branches and proofs: corrections reinjected through the agent, outcomes proven."""
