"""Signals other apps listen to without the registry importing them (one-way imports)."""

from django.dispatch import Signal

# Sent after the transaction that registered a version commits; kwargs: version_id.
version_registered = Signal()
