"""bench/api_scale.py only: the production settings, with a URL root that adds the bare DRF
list views next to the product's URLs (bench/api_scale_urls.py). Nothing in the product
imports this; it exists so the bare view never becomes a hook in production code."""

from controlplane.settings.prod import *  # noqa: F403

ROOT_URLCONF = "bench.api_scale_urls"
