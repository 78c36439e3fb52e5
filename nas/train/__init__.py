"""Training: weight-sharing supernets (and, on the same code path, fixed architectures)."""
