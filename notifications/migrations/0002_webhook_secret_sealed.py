"""Webhook signing secrets are stored sealed (core/sealed.py), no longer in plain text."""

from django.db import migrations, models

from core.sealed import seal, unseal


def seal_secrets(apps, schema_editor):
    Webhook = apps.get_model("notifications", "Webhook")
    for hook in Webhook.objects.only("pk", "secret"):
        Webhook.objects.filter(pk=hook.pk).update(secret_sealed=seal(hook.secret))


def unseal_secrets(apps, schema_editor):
    Webhook = apps.get_model("notifications", "Webhook")
    for hook in Webhook.objects.only("pk", "secret_sealed"):
        Webhook.objects.filter(pk=hook.pk).update(secret=unseal(hook.secret_sealed))


class Migration(migrations.Migration):
    dependencies = [("notifications", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="webhook", name="secret_sealed", field=models.TextField(default="")
        ),
        migrations.RunPython(seal_secrets, unseal_secrets),
        migrations.RemoveField(model_name="webhook", name="secret"),
        migrations.AlterField(model_name="webhook", name="secret_sealed", field=models.TextField()),
    ]
