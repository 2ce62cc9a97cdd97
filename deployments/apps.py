from django.apps import AppConfig


class DeploymentsConfig(AppConfig):
    name = "deployments"

    def ready(self) -> None:
        from django.db.models.signals import post_save

        from accounts.waits import saved_receiver
        from deployments.backends import custom_backends_in_use
        from models_registry.signals import custom_backends_wanted, version_registered

        version_registered.connect(_queue_smoke, dispatch_uid="deployments-smoke")
        custom_backends_wanted.connect(
            custom_backends_in_use, weak=False, dispatch_uid="deployments-custom-backends"
        )
        # ?wait= on a deployment's detail wakes on its saves (accounts/waits.py).
        post_save.connect(
            saved_receiver("deployment"),
            sender="deployments.Deployment",
            weak=False,
            dispatch_uid="deployments-wait",
        )


def _queue_smoke(sender, version_id: int, **kwargs) -> None:
    from deployments.smoke import model_version_smoke_skip, smoke_node
    from deployments.tasks import smoke_validate
    from models_registry.models import ModelVersion

    version = ModelVersion.objects.select_related("model").filter(pk=version_id).first()
    if version is None:
        return
    node, why = smoke_node(version)
    if node is None:
        model_version_smoke_skip(version_id=version_id, reason=why)
    else:
        smoke_validate.delay(version_id)
