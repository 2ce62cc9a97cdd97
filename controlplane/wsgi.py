"""WSGI entry point (the console is served by daphne, controlplane/asgi.py, which runs plain
HTTP requests through this same sync handler on a pool of threads; this is for tooling)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.dev")
application = get_wsgi_application()
