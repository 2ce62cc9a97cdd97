"""The shapes of the model names the control plane loads on nodes itself (pure).

Smoke tests load a version as `<model>--smoke-<version>-<hex6>`, benchmarks as
`<model>--bench-<run>-v<version>-<hex6>` (older: `<model>--bench-<run>-<hex6>`), and a
config canary serves its candidate as `<model>--c<version>`. deployments/temporary.py makes
and reads them; the registry refuses a model whose own name has one of these shapes, since
its series, rows and costs would be filed as another model's.
"""

import re

SUFFIX = r"[0-9a-f]{6}"
SMOKE = re.compile(rf"^(?P<model>.+?)--smoke-(?P<version>\d+)-{SUFFIX}$")
BENCH = re.compile(rf"^(?P<model>.+?)--bench-(?P<run>\d+)-(?:v(?P<version>\d+)-)?{SUFFIX}$")
SIBLING = re.compile(r"^(?P<model>.+?)--c(?P<version>\d+)$")


def reserved_shape(name: str) -> str:
    """What a model name would be taken for ("a smoke test's", ...), "" for none."""
    if "--" not in name:
        return ""
    for pattern, what in (
        (SMOKE, "a smoke test's temporary model"),
        (BENCH, "a benchmark's temporary model"),
        (SIBLING, "a config canary's candidate"),
    ):
        if pattern.match(name):
            return what
    return ""
