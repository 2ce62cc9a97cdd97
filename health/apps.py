from django.apps import AppConfig


class HealthConfig(AppConfig):
    name = "health"

    def ready(self) -> None:
        from deployments.memory_watch import node_operation_done
        from health.leaks import memory_sample_record

        node_operation_done.connect(memory_sample_record, dispatch_uid="health-leak-watch")
