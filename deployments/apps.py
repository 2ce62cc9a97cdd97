from django.apps import AppConfig


class DeploymentsConfig(AppConfig):
    name = "deployments"

    def ready(self) -> None:
        from django.db.models.signals import post_save

        from accounts.waits import saved_receiver
        from models_registry.signals import version_registered

        version_registered.connect(_queue_smoke, dispatch_uid="deployments-smoke")
        # ?wait= on a deployment's detail wakes on its saves (accounts/waits.py).
        post_save.connect(
            saved_receiver("deployment"),
            sender="deployments.Deployment",
            weak=False,
            dispatch_uid="deployments-wait",
        )


def _queue_smoke(sender, version_id: int, **kwargs) -> None:
    from deployments.smoke import smoke_node
    from deployments.tasks import smoke_validate

    if smoke_node() is not None:
        smoke_validate.delay(version_id)
