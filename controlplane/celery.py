"""The Celery app: settings come from Django (CELERY_* names), tasks from each app."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.dev")
# Celery's Django fixup runs every system check when a worker or beat starts, which imports
# the whole web side (its URLs and views) that a worker never serves: about 0.3 s of CPU per
# start. The checks run with `manage.py migrate` (which the web kind runs first).
os.environ.setdefault("CELERY_SKIP_CHECKS", "1")

app = Celery("switchyard")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
