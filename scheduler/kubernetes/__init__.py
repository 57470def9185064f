"""Kubernetes as a resource manager: pods and nodes in, Bindings and deletions out (docs/kubernetes.md)."""
