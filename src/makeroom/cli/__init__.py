"""The command line: the only place that wires model, planner, controller, sim and kube together."""
