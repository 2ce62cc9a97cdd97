"""Price history (docs/COSTS.md): every node and cluster starts with its current price,
in effect from the epoch, so hours rolled up again are charged what they were before."""

from datetime import UTC, datetime

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
NODE_FIELDS = ("hourly_cost", "gpu_hourly_cost", "gpu_count", "execution_slots")


def first_prices(apps, schema_editor):
    cluster_model = apps.get_model("deployments", "TritonCluster")
    node_model = apps.get_model("deployments", "TritonNode")
    change = apps.get_model("deployments", "PriceChange")
    rows = [
        change(cluster_id=c.pk, effective_at=EPOCH, node_hourly_cost=c.node_hourly_cost)
        for c in cluster_model.objects.all()
    ]
    rows += [
        change(
            cluster_id=n.cluster_id,
            node_name=n.name,
            effective_at=EPOCH,
            **{f: getattr(n, f) for f in NODE_FIELDS},
        )
        for n in node_model.objects.all()
    ]
    change.objects.bulk_create(rows, batch_size=1000)


class Migration(migrations.Migration):
    dependencies = [
        ("deployments", "0012_cluster_require_sla"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="PriceChange",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("node_name", models.CharField(blank=True, max_length=100)),
                ("effective_at", models.DateTimeField()),
                (
                    "hourly_cost",
                    models.DecimalField(blank=True, decimal_places=4, max_digits=10, null=True),
                ),
                (
                    "gpu_hourly_cost",
                    models.DecimalField(blank=True, decimal_places=4, max_digits=10, null=True),
                ),
                ("gpu_count", models.PositiveIntegerField(blank=True, null=True)),
                ("execution_slots", models.PositiveIntegerField(blank=True, null=True)),
                (
                    "node_hourly_cost",
                    models.DecimalField(blank=True, decimal_places=4, max_digits=10, null=True),
                ),
                ("before", models.JSONField(blank=True, default=dict)),
                ("changed_by_username", models.CharField(blank=True, max_length=150)),
                (
                    "changed_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "cluster",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="price_changes",
                        to="deployments.tritoncluster",
                    ),
                ),
            ],
            options={
                "ordering": ["effective_at", "id"],
                "indexes": [
                    models.Index(
                        fields=["cluster", "node_name", "effective_at"], name="price_in_effect"
                    )
                ],
            },
        ),
        migrations.RunPython(first_prices, migrations.RunPython.noop),
    ]
