"""Saving: finished runs written as MAGMA-GEN 2.0 save folders."""
