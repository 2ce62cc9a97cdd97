from django.apps import AppConfig


class HealthConfig(AppConfig):
    name = "health"

    def ready(self) -> None:
        from deployments.memory_watch import node_operation_done
        from deployments.signals import smoke_node_lost
        from health.leaks import memory_sample_record
        from health.services import smoke_node_lost_alert

        node_operation_done.connect(memory_sample_record, dispatch_uid="health-leak-watch")
        smoke_node_lost.connect(smoke_node_lost_alert, dispatch_uid="health-smoke-node-lost")
