"""Drop DRF's authtoken table: it held every token in clear. Its tokens stop working; users
make new ones (CHANGELOG.md). The app is no longer installed, so its migration rows go too."""

from django.db import migrations

DROP = """
DROP TABLE IF EXISTS authtoken_token CASCADE;
DELETE FROM django_migrations WHERE app = 'authtoken';
"""


class Migration(migrations.Migration):
    dependencies = [("accounts", "0002_api_tokens")]
    operations = [migrations.RunSQL(DROP, reverse_sql=migrations.RunSQL.noop)]
