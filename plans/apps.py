from django.apps import AppConfig


class PlansConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "plans"
    verbose_name = "Release plans"

    def ready(self) -> None:
        from django.db.models.signals import post_save

        from accounts.waits import notify_changed, saved_receiver

        # ?wait= on a plan's detail and the plan page's socket wake on the plan's saves and
        # on those of its cells (a release started or brought back), approvals and events.
        post_save.connect(
            saved_receiver("plan"), sender="plans.ReleasePlan", weak=False, dispatch_uid="pw"
        )

        def part_saved(sender, instance, **kwargs) -> None:
            notify_changed("plan", instance.plan_id)

        for part in ("PlanRelease", "PlanApproval", "PlanEvent"):
            post_save.connect(
                part_saved, sender=f"plans.{part}", weak=False, dispatch_uid=f"pw-{part}"
            )
