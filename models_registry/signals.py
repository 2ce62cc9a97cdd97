"""Signals other apps listen to without the registry importing them (one-way imports)."""

from django.dispatch import Signal

# Sent after the transaction that registered a version commits; kwargs: version_id.
version_registered = Signal()

# Sent inside the transaction that changes a model's SLA or moves its `production` alias;
# kwargs: model, change ("sla" | "production_alias"), release_id (the release making the
# move, else None). A receiver refuses the change by raising RegistryError (status 409):
# releases does while a release of the model is active.
protected_change = Signal()

# Sent while an upload is checked; receivers return the backends some cluster allows beyond
# SWITCHYARD_ALLOWED_BACKENDS (deployments answers with its clusters' custom_backends).
custom_backends_wanted = Signal()
