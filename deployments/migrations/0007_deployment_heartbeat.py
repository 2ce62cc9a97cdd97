from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("deployments", "0006_node_cost")]

    operations = [
        migrations.AddField(
            model_name="deployment",
            name="heartbeat_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
