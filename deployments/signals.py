"""Signals the apps above listen to without deployments importing them (one-way imports)."""

from django.dispatch import Signal

# Sent after a smoke test's node stopped answering during the smoke inference (the version
# under test likely crashed it); kwargs: node (TritonNode), version (ModelVersion), reason.
# health raises an alert.
smoke_node_lost = Signal()
