"""What the box is doing: the sampler, GPU readings, Prometheus, the dashboard's figures, the self-test."""
