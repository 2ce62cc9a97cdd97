from django.apps import AppConfig


class DeploymentsConfig(AppConfig):
    name = "deployments"

    def ready(self) -> None:
        from models_registry.signals import version_registered

        version_registered.connect(_queue_smoke, dispatch_uid="deployments-smoke")


def _queue_smoke(sender, version_id: int, **kwargs) -> None:
    from deployments.smoke import smoke_node
    from deployments.tasks import smoke_validate

    if smoke_node() is not None:
        smoke_validate.delay(version_id)
