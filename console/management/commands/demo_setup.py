"""Prepare `make demo`: check ports, create one demo user per role with fresh passwords."""

from django.core.management.base import BaseCommand, CommandError

from console.demo import demo_users_create
from integrations.triton.local import port_is_free


class Command(BaseCommand):
    help = "Create the demo users (DEMO ONLY: passwords are printed) and check the ports."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--triton-base-port", type=int, default=18000)

    def handle(self, *args, **opts):
        port = opts["port"]
        if not port_is_free(port):
            raise CommandError(
                f"Port {port} on 127.0.0.1 is in use: stop what holds it, "
                f"or run `make demo PORT={port + 10}`."
            )
        base = opts["triton_base_port"]
        busy = [p for p in (*range(base, base + 6), base + 80) if not port_is_free(p)]
        if busy:
            raise CommandError(
                f"Port {busy[0]} (local Triton nodes and router) is in use: stop what holds it, "
                f"or run `make demo TRITON_BASE_PORT={base + 100}`."
            )
        demo_users_create()
