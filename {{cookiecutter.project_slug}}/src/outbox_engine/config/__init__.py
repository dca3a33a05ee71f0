"""The box configuration: the boxes.yaml schema and loading (boxes), the registry that resolves
it into classes and transports (registry), and the partition strategies (partitioning)."""
