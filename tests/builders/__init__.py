"""The shared test builders, in one place: ``state`` (ClusterState and model objects), ``scenario``
(spec v1 scenarios, their simulated runs, the bundled examples) and ``kube`` (API objects as dicts)."""
