from django.apps import AppConfig


class ReleasesConfig(AppConfig):
    name = "releases"

    def ready(self) -> None:
        from django.db.models.signals import post_save

        from accounts.waits import saved_receiver
        from models_registry.signals import protected_change

        protected_change.connect(_refuse_during_release, dispatch_uid="releases-protect")
        # ?wait= on a release's detail wakes on its saves and on every tick's publish.
        post_save.connect(
            saved_receiver("release"), sender="releases.Release", weak=False, dispatch_uid="rw"
        )


def _refuse_during_release(sender, model, change: str, release_id: int | None, **kwargs) -> None:
    """While a release of `model` runs (any cluster), its SLA and production alias hold still."""
    from models_registry.services import RegistryError
    from releases.selectors import active_releases_of

    active = active_releases_of(model=model).exclude(pk=release_id).first()
    if active is None:
        return
    what = "the SLA" if change == "sla" else "the production alias"
    raise RegistryError(
        f"Release {active.pk} of {model.name} on {active.cluster.name} is {active.phase}: "
        f"{what} cannot change until it ends (it holds the SLA it started with).",
        field="sla" if change == "sla" else "version",
        status=409,
    )
