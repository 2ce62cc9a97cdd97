"""The `switchyard` command-line client: talks only to the REST API (docs/CLI.md)."""
