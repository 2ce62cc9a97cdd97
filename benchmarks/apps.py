from django.apps import AppConfig


class BenchmarksConfig(AppConfig):
    name = "benchmarks"

    def ready(self) -> None:
        from django.db.models.signals import post_save

        from accounts.waits import saved_receiver

        # ?wait= on the detail wakes on its saves (accounts/waits.py).
        post_save.connect(
            saved_receiver("benchmark"),
            sender="benchmarks.BenchmarkRun",
            weak=False,
            dispatch_uid="benchmarks-wait",
        )
