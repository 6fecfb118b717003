"""What the boxes are doing: each node's sampler, GPU readings, every node's state (node_status), Prometheus, the
dashboard's figures, health, the self-test."""
