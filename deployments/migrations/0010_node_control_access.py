from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("deployments", "0009_cluster_api_key_and_backends"),
    ]

    operations = [
        migrations.AddField(
            model_name="tritonnode",
            name="control_access",
            field=models.CharField(
                choices=[
                    ("unknown", "Not known yet"),
                    ("restricted", "Refuses model control without the key"),
                    ("open", "Answers model control without any key"),
                ],
                default="unknown",
                max_length=12,
            ),
        ),
    ]
