"""The mock-cluster helper of the proxy tests lives in the package (the bench uses it too)."""

from kip714.tools.mock_cluster import MockCluster

__all__ = ["MockCluster"]
