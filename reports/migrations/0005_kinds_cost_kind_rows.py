"""Cost rows carry a cost kind; the rows of temporary models move onto their real model and
version under it (rows of one version that meet there are summed into one)."""

from django.db import migrations

from deployments.temporary import SERVING, charged_to

SUMMED = ("cost_ticks", "idle_share_ticks", "requests", "successes", "compute_us", "minutes")


def charge_temporary_rows(apps, schema_editor):
    CostRollup = apps.get_model("reports", "CostRollup")
    CostRollup.objects.exclude(kind="model").update(cost_kind="")
    kept: dict[tuple, object] = {}
    rows = CostRollup.objects.filter(kind="model", model_name__contains="--").order_by("pk")
    for row in rows.iterator():
        to = charged_to(row.model_name, row.version)
        if to.cost_kind == SERVING:
            continue
        key = (row.cluster_id, row.node_name, row.period, row.start, to)
        into = kept.get(key)
        if into is None:
            row.model_name, row.version, row.cost_kind = to.model, to.version, to.cost_kind
            row.save(update_fields=["model_name", "version", "cost_kind"])
            kept[key] = row
            continue
        for name in SUMMED:
            setattr(into, name, getattr(into, name) + getattr(row, name))
        into.save(update_fields=list(SUMMED))
        row.delete()


def drop_kind_rows(apps, schema_editor):
    # Back to one row per name: the validation and benchmark rows go (cost_rollup --since
    # rebuilds them from telemetry under the temporary names where telemetry still has them).
    CostRollup = apps.get_model("reports", "CostRollup")
    CostRollup.objects.filter(kind="model").exclude(cost_kind=SERVING).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("reports", "0004_kinds_cost_kind"),
    ]

    operations = [
        migrations.RunPython(charge_temporary_rows, drop_kind_rows),
    ]
