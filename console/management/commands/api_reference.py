"""`manage.py api_reference > docs/API.md`: the API reference page from the OpenAPI document."""

from django.core.management.base import BaseCommand
from drf_spectacular.generators import SchemaGenerator

from controlplane.api_reference import render


class Command(BaseCommand):
    help = "Print docs/API.md, generated from the OpenAPI document (/api/schema/)."

    def handle(self, *args, **options):
        document = SchemaGenerator().get_schema(request=None, public=True)
        self.stdout.write(render(document), ending="")
