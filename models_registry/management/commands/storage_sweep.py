"""Remove stored files no model version references any more, and abandoned uploads."""

from django.conf import settings
from django.core.management.base import BaseCommand

from models_registry.services import storage_sweep


class Command(BaseCommand):
    help = (
        "Remove blobs no version references (deleted versions) and abandoned upload folders "
        "untouched for the grace period; celery beat runs it daily."
    )

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="only say what would go")
        parser.add_argument(
            "--grace-hours",
            type=float,
            default=settings.SWITCHYARD_STORAGE_SWEEP_GRACE_S / 3600,
            help="keep anything touched more recently (default: %(default)g)",
        )

    def handle(self, *args, **opts):
        done = storage_sweep(grace_s=opts["grace_hours"] * 3600, dry_run=opts["dry_run"])
        verb = "would remove" if done.dry_run else "removed"
        self.stdout.write(
            f"{verb} {done.blobs_removed} stored file(s), {done.bytes_freed / 1e6:.1f} MB, and "
            f"{done.staging_removed} abandoned upload folder(s); {done.blobs_kept} kept"
        )
