from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("benchmarks", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="benchmarkrun",
            name="heartbeat_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
