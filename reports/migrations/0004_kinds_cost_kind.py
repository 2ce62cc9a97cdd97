"""Cost rows get a cost kind (serving by default); the unique key is replaced by one with it
in 0006, after 0005 moved the rows of temporary names (each step its own transaction: a
table whose rows changed cannot be altered in the same one)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("reports", "0003_cluster_periods"),
    ]

    operations = [
        migrations.AddField(
            model_name="costrollup",
            name="cost_kind",
            field=models.CharField(
                blank=True,
                choices=[
                    ("serving", "Serving"),
                    ("validation", "Validation (smoke tests)"),
                    ("benchmark", "Benchmark"),
                    ("", "None (idle or unknown)"),
                ],
                default="serving",
                max_length=10,
            ),
        ),
        migrations.RemoveConstraint(
            model_name="costrollup",
            name="one_cost_row_per_series_period",
        ),
    ]
