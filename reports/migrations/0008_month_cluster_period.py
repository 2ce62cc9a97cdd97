"""Month rows summed over a cluster's nodes ("mc"), derived from the stored day rows ("dc"):
this migration writes them for every month already rolled up, as the hourly rollup writes
them from now on (reports.services.DERIVED)."""

from django.db import migrations, models

# The same sums as reports.services' derived rows, written out here so that the migration
# keeps meaning what it meant when that module changes.
MONTHS = """
INSERT INTO reports_costrollup (
    cluster_id, node_name, period, start, kind, model_name, version, cost_kind, cost_ticks,
    idle_share_ticks, requests, successes, compute_us, minutes, output_tokens
)
SELECT cluster_id, '', 'mc', date_trunc('month', start AT TIME ZONE 'UTC') AT TIME ZONE 'UTC',
    kind, model_name, version, cost_kind, SUM(cost_ticks), SUM(idle_share_ticks),
    SUM(requests), SUM(successes), SUM(compute_us), SUM(minutes), SUM(output_tokens)
FROM reports_costrollup
WHERE period = 'dc'
GROUP BY cluster_id, 4, kind, model_name, version, cost_kind
"""


class Migration(migrations.Migration):
    dependencies = [
        ("reports", "0007_cost_output_tokens"),
    ]

    operations = [
        migrations.AlterField(
            model_name="costrollup",
            name="period",
            field=models.CharField(
                choices=[
                    ("hour", "Hour"),
                    ("day", "Day"),
                    ("hc", "Hour, summed over the cluster's nodes"),
                    ("dc", "Day, summed over the cluster's nodes"),
                    ("mc", "Month, summed over the cluster's nodes"),
                ],
                max_length=4,
            ),
        ),
        migrations.RunSQL(MONTHS, "DELETE FROM reports_costrollup WHERE period = 'mc'"),
    ]
