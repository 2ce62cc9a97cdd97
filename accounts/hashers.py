"""The password hasher: Argon2id with parameters sized for many sign-ins at once.

Django's PBKDF2 (1,000,000 iterations in Django 5.2) costs about half a second of CPU per
sign-in, so fifty people signing in together on two cores waited 17 s at the median. Argon2id
is memory-hard, so it can be made as costly for an attacker's GPU while costing a sign-in
far less CPU: these are OWASP's minimum recommended parameters for Argon2id (19 MiB, 2
passes, 1 lane), about 30 ms of one core. Memory is what bounds concurrency: fifty hashes at
once hold about 1 GiB. docs/SECURITY.md ("Password hashing") has the numbers.

Hashes are Django's standard `argon2$argon2id$v=19$m=...,t=...,p=...$` strings: hashes made
with other parameters (Django's own Argon2 defaults) still verify, and, like PBKDF2 hashes,
are re-hashed with these at the user's next successful sign-in.
"""

from django.contrib.auth.hashers import Argon2PasswordHasher


class SwitchyardArgon2PasswordHasher(Argon2PasswordHasher):
    """Django's Argon2id hasher with the parameters above."""

    time_cost = 2
    memory_cost = 19 * 1024  # KiB
    parallelism = 1
