"""Shared infrastructure every app may use (it imports no app): see docs/ARCHITECTURE.md."""
