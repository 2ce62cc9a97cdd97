from django.apps import AppConfig


class ModelsRegistryConfig(AppConfig):
    name = "models_registry"

    def ready(self) -> None:
        from django.db.models.signals import post_save

        from accounts.waits import saved_receiver

        # ?wait= on the detail wakes on its saves (accounts/waits.py).
        post_save.connect(
            saved_receiver("version"),
            sender="models_registry.ModelVersion",
            weak=False,
            dispatch_uid="models_registry-wait",
        )
