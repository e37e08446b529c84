"""The Kubernetes adapter: the only package that talks to an API server (see docs/kube.md).

- ``client``: connect, rate limit, retries, JSON over HTTP, paged lists, watches.
- ``slim``: API objects cut to what planning reads, shared parts stored once.
- ``cache``: list-then-watch informers and the ClusterState built from them.
- ``cluster``: the controller's Cluster port (eviction, patches, nomination, scale, Events).
- ``dryrun``: the port with every mutating verb only logged.
- ``leader``: Lease-based leader election.
- ``metrics``: Prometheus metrics, /healthz, /readyz.
- ``runner``: ``makeroom run``'s loop.
- ``dump``: the cluster's objects for ``makeroom snapshot`` and ``makeroom plan --kubeconfig``.
"""

from makeroom.kube.client import Api, ConnectError, ConnectOptions, KubeError, connect

__all__ = ["Api", "ConnectError", "ConnectOptions", "KubeError", "connect"]
