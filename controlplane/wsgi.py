"""WSGI entry point (the console is served over ASGI by daphne; this is for tooling)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.dev")
application = get_wsgi_application()
