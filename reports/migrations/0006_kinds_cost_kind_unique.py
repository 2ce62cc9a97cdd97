"""One cost row per series, period and cost kind."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("reports", "0005_kinds_cost_kind_rows"),
    ]

    operations = [
        migrations.AddConstraint(
            model_name="costrollup",
            constraint=models.UniqueConstraint(
                fields=(
                    "cluster",
                    "node_name",
                    "period",
                    "start",
                    "kind",
                    "model_name",
                    "version",
                    "cost_kind",
                ),
                name="one_cost_row_per_series_kind_period",
            ),
        ),
    ]
