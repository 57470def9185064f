"""Kubernetes as a resource manager: pods and nodes of an API server in, Bindings and deletions out (docs/kubernetes.md)."""
